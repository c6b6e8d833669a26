"""``tokenrelay run``: its parts, each a Component wired in ``daemon.build``.

``command`` (the command: settings, logs, the daemon on its loop), ``daemon`` (build, Sidecar,
serve), ``localapi`` (/v1/token and SocketServer), ``quicktoken``, ``status`` (/v1/status and
``tokenrelay status``), ``metrics`` (run's Prometheus collectors), ``oneshot`` (--once),
``reloader`` (SIGHUP), ``memory``. What other commands share with run is in ``serving``; exec and
dev run this package whole, and import only ``command``, ``daemon`` and ``oneshot`` of it.
"""
