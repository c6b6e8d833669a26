"""The upstream's address as the proxy writes it: the Host line and HTTP/2's :authority."""

from __future__ import annotations

from tokenrelay.proxy.target import Target


def test_a_non_ascii_upstream_host_is_sent_as_its_idna_host_line() -> None:
    """An api-url naming an internationalized host gives the upstream ``Host: xn--...`` (port kept)."""
    target = Target.from_url("http://bücher.example:8080/api")
    assert target.host_header == b"Host: xn--bcher-kva.example:8080\r\n"
    assert target.authority == b"xn--bcher-kva.example:8080"


def test_the_authority_drops_the_scheme_default_port_and_brackets_ipv6() -> None:
    """The default port is left out of the authority; an IPv6 literal keeps its brackets."""
    assert Target.from_url("http://api.example:80").authority == b"api.example"
    assert Target.from_url("http://[::1]:8080/").host_header == b"Host: [::1]:8080\r\n"
