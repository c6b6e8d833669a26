"""The serving kit: what every long-running command (``run``, ``exec``, ``agent``, ``webhook``,
``emulate``, ``dev``) builds on, below all of them, as Vault's ``agentproxyshared`` is below its
Agent and Proxy. Nothing here knows one command's settings.

``startup`` (a command's event loop, its logs and its one-line errors; aiohttp loaded lean),
``listening`` (a bind failure names the flag), ``unixsocket`` and ``socketdir`` (a socket never
reachable with a wider mode; a private directory that fits one), ``parentdirs``, ``peercred`` (who
is at the other end of a socket), ``probes`` (/healthz, /readyz and the metrics port),
``metrics`` (what every command's metrics share), ``tokenanswer`` (the local API's answer
shape), ``clienttls`` (the HTTP session's TLS context), ``logs``, ``sinks`` (the private file
writer), ``site`` (an aiohttp site served through a protocol of our own), ``mimetable``.
"""
