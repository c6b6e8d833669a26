"""Network locations: whether a host is this machine's loopback (localhost, 127.0.0.0/8, ::1), cheaply,
and the one reading of a ``HOST:PORT`` listen address.

The credential helpers ask ``is_loopback`` on their hot path, so the usual spellings are answered
without importing ipaddress; anything else that could be an IPv6 address goes to ipaddress.
"""


def is_loopback(host: str) -> bool:
    if host in ("localhost", "::1"):
        return True
    octets = host.split(".")
    if len(octets) == 4 and all(o.isdigit() for o in octets):
        # ipaddress's rules for IPv4: four decimal octets below 256, no leading zeros
        return octets[0] == "127" and all(int(o) < 256 and (o == "0" or o[0] != "0") for o in octets)
    if ":" not in host:
        return False
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_hostport(text: str, example: str = "127.0.0.1:8080") -> tuple[str, int]:
    """``(host, port)`` from ``HOST:PORT`` (``[v6]:PORT`` too); ValueError naming ``example`` otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT, e.g. {example}")
    return host, int(port)
