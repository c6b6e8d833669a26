"""Which hosts get a token: parsing TOKENRELAY_HOSTS / the TOML ``hosts`` key, and matching servers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenrelay.errors import HostsError
from tokenrelay.helpers.hosts import Host, load, match, parse_list, parse_spec, split_hostport


def test_spec_audience_defaults_to_the_host_itself() -> None:
    """A bare host's audience is the host (with its port when one is given)."""
    assert parse_spec("Registry.Example.com") == Host("registry.example.com", None, "registry.example.com")
    assert parse_spec(" 127.0.0.1:05000 ") == Host("127.0.0.1", "5000", "127.0.0.1:5000")
    assert parse_spec("[::1]:8443").netloc == "[::1]:8443"


def test_spec_with_explicit_audience() -> None:
    """``host=audience`` sends the token minted for that audience."""
    host = parse_spec("git.example.com=https://api.example.com")
    assert (host.netloc, host.audience) == ("git.example.com", "https://api.example.com")


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "https://registry.example.com",
        "host:0",
        "host:99999",
        "host:x",
        "a b",
        "host=",
        "[::1",
        "::1",
        "-x",
        "a..b",
    ],
)
def test_malformed_spec_is_refused_with_an_example(spec: str) -> None:
    """A malformed entry is an error that shows the expected form."""
    with pytest.raises(HostsError, match=r"host\[:port\]\[=audience\]|empty audience"):
        parse_spec(spec)


def test_list_error_names_the_variable() -> None:
    """The error says which variable holds the bad entry."""
    with pytest.raises(HostsError, match=r"^TOKENRELAY_HOSTS: 'bad host'"):
        load({"TOKENRELAY_HOSTS": "ok.example,bad host"})


def test_conflicting_audiences_for_one_host_are_refused() -> None:
    """The same host listed with two audiences is ambiguous, so refused."""
    with pytest.raises(HostsError, match="listed twice"):
        parse_list(["a.example=x, a.example=y"], "TOKENRELAY_HOSTS")
    assert parse_list(["a.example, a.example"], "TOKENRELAY_HOSTS") == (Host("a.example", None, "a.example"),)


def test_toml_hosts_used_only_when_the_variable_is_unset(tmp_path: Path) -> None:
    """``hosts`` in TOKENRELAY_CONFIG applies when TOKENRELAY_HOSTS is unset; the variable wins."""
    config = tmp_path / "tokenrelay.toml"
    config.write_text('auth_url = "https://sts.example"\nhosts = ["cgr.example", "127.0.0.1:5000=reg"]\n')
    assert [h.audience for h in load({"TOKENRELAY_CONFIG": str(config)})] == ["cgr.example", "reg"]
    assert load({"TOKENRELAY_CONFIG": str(config), "TOKENRELAY_HOSTS": "only.example"}) == (
        Host("only.example", None, "only.example"),
    )
    # the file is not even read when the variable is set
    assert load({"TOKENRELAY_CONFIG": str(tmp_path / "missing.toml"), "TOKENRELAY_HOSTS": ""}) == ()


@pytest.mark.parametrize(
    ("content", "message"),
    [("hosts = 3", "expected a list of strings"), ("hosts = [", "not valid TOML")],
)
def test_bad_toml_hosts_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    """A bad config file is an error naming the file and the problem."""
    config = tmp_path / "c.toml"
    config.write_text(content)
    with pytest.raises(HostsError, match=message):
        load({"TOKENRELAY_CONFIG": str(config)})
    with pytest.raises(HostsError, match="cannot be read"):
        load({"TOKENRELAY_CONFIG": str(tmp_path / "none.toml")})


HOSTS = parse_list(["registry.example.com, 127.0.0.1:5000, docker.io, git.example.com:8443"], "test")


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("registry.example.com", "registry.example.com"),
        ("REGISTRY.example.com.", "registry.example.com"),
        ("https://registry.example.com/v2/", "registry.example.com"),
        ("registry.example.com:443", "registry.example.com"),
        ("https://user@registry.example.com", "registry.example.com"),
        ("127.0.0.1:5000", "127.0.0.1:5000"),
        ("http://127.0.0.1:5000/simple/", "127.0.0.1:5000"),
        ("https://index.docker.io/v1/", "docker.io"),
        ("git.example.com:8443", "git.example.com:8443"),
        ("https://git.example.com:8443/org/repo.git", "git.example.com:8443"),
    ],
)
def test_configured_hosts_match_their_server_strings(server: str, expected: str) -> None:
    """Docker's bare hosts, URLs and Docker Hub's index address all find their host."""
    host = match(HOSTS, server)
    assert host is not None
    assert host.netloc == expected


@pytest.mark.parametrize(
    "server",
    [
        "registry.example.com.evil.example",
        "evil.example/registry.example.com",
        "registry.example.com:5000",
        "127.0.0.1",
        "127.0.0.1:5001",
        "git.example.com",
        "http://registry.example.com",  # plain http off loopback: the token would cross the network
        "ftp://registry.example.com",
        "registry.example.com@evil.example",
        "",
        "not a host",
    ],
)
def test_other_servers_get_nothing(server: str) -> None:
    """Lookalikes, other ports, plain http off loopback and garbage match no host."""
    assert match(HOSTS, server) is None


def test_git_protocol_decides_the_default_port() -> None:
    """git's separate ``protocol=`` picks the default port a bare host stands for."""
    hosts = parse_list(["localhost"], "test")
    assert match(hosts, "localhost", "http") is not None
    assert match(hosts, "localhost:80", "http") is not None
    assert match(hosts, "localhost:443", "http") is None
    assert match(HOSTS, "registry.example.com", "http") is None


@given(st.text(max_size=80))
def test_matching_never_raises(text: str) -> None:
    """Any server string at all gets an answer (a host or None), never an exception."""
    match(HOSTS, text)
    match(HOSTS, text, "http")


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True)


@given(st.lists(_label, min_size=1, max_size=4), st.one_of(st.none(), st.integers(1, 65535)))
def test_hostport_round_trips(labels: list[str], port: int | None) -> None:
    """A well-formed host[:port] parses back to its parts and matches itself."""
    name = ".".join(labels)
    text = name if port is None else f"{name}:{port}"
    assert split_hostport(text) == (name, None if port is None else str(port))
    host = parse_spec(text)
    assert match([host], text) == host
    assert match([host], f"https://{text}/path") == host


@given(st.text(max_size=60))
def test_spec_parser_accepts_or_explains(text: str) -> None:
    """Any TOKENRELAY_HOSTS value either parses or raises HostsError, nothing else."""
    try:
        parse_list([text], "TOKENRELAY_HOSTS")
    except HostsError as exc:
        message = str(exc)
    else:
        return
    assert message.startswith("TOKENRELAY_HOSTS: ")
