"""Whether a host is this machine's loopback (localhost, 127.0.0.0/8, ::1), cheaply.

The credential helpers ask this on their hot path, so the usual spellings are answered without
importing ipaddress; anything else that could be an IPv6 address goes to ipaddress.
"""

from __future__ import annotations


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
