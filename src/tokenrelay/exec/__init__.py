"""``tokenrelay exec [run's flags] -- CMD [ARGS...]``: the relay in this process for as long as CMD lives.

``cli`` reads the command line (run's options from ``sidecar.settings.OPTIONS``, exec's own from
``options.EXEC_OPTIONS``); ``workspace`` lays out the private directory and the command's environment;
``targets`` is the table of ``--configure`` targets; ``session`` runs the sidecar that
``sidecar.daemon.build`` composes, starts the command once the first tokens are held, forwards
signals to it and hands back its exit status.
"""
