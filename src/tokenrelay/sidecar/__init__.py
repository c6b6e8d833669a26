"""The serving parts of ``tokenrelay run``, each a Component wired in ``daemon.build``.

``daemon`` (build, Sidecar, serve), ``localapi`` (/v1/token and SocketServer), ``probes`` (/healthz,
/readyz and the metrics port), ``metrics`` (the Prometheus collectors), ``unixsocket``,
``peercred``, ``sinks`` (--token-file), ``oneshot`` (--once), ``reloader`` (SIGHUP), ``logs``.
"""
