"""Which hosts count as loopback: the proxy's listen check and the helpers' plain-http rule."""

from __future__ import annotations

import pytest

from tokenrelay.lite.netloc import is_loopback


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.255.0.9", "::1", "[::1]", "0:0:0:0:0:0:0:1"])
def test_loopback_spellings(host: str) -> None:
    """Every usual spelling of this machine is loopback."""
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host",
    [
        "0.0.0.0",
        "10.0.0.1",
        "128.0.0.1",
        "127.0.0.256",
        "127.000.0.1",
        "127.0.0",
        "::",
        "example.com",
        "127.0.0.1.example.com",
        "::ffff:10.0.0.1",
        "",
    ],
)
def test_other_hosts(host: str) -> None:
    """Anything else is not, including look-alikes and octal-looking octets."""
    assert not is_loopback(host)
