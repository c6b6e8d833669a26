"""Which hosts get a token, for which audience, and whether a server string names one of them.

The list comes from ``TOKENRELAY_HOSTS`` (comma-separated ``host[:port][=audience]``; the audience
defaults to ``host[:port]`` itself) or, only when that variable is unset, from the ``hosts`` key of the
TOML file named by ``TOKENRELAY_CONFIG``. Every other host gets nothing.

Standard library only, and parsed by hand rather than with ``urllib.parse`` or ``re``: every helper
run goes through here before it can answer. ``errors`` too is imported only to raise a HostsError.
"""

from ..lite import environ as process_environ
from ..lite.names import CONFIG_ENV, HOSTS_ENV

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ..errors import HostsError

EXAMPLE = "e.g. registry.example.com, 127.0.0.1:5000 or git.example.com=https://git.example.com"

_DEFAULT_PORTS = {"https": "443", "http": "80"}
# Docker Hub answers under several names; docker itself asks for https://index.docker.io/v1/.
_ALIASES = {"index.docker.io": "docker.io", "registry-1.docker.io": "docker.io"}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-._")
_IPV6_CHARS = frozenset("0123456789abcdef:.")


def _hosts_error() -> "type[HostsError]":
    # errors is imported only when a host list is wrong: a helper's successful run never loads it.
    from ..errors import HostsError

    return HostsError


def _error(message: str) -> "HostsError":
    return _hosts_error()(message)


class Host:
    """One configured host: ``name`` (lower case), ``port`` (None for the scheme's default), audience."""

    __slots__ = ("audience", "name", "port")

    def __init__(self, name: str, port: str | None, audience: str) -> None:
        self.name = name
        self.port = port
        self.audience = audience

    @property
    def netloc(self) -> str:
        """``host[:port]`` as a client writes it (IPv6 in brackets)."""
        return join_netloc(self.name, self.port)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Host):
            return NotImplemented
        return (self.name, self.port, self.audience) == (other.name, other.port, other.audience)

    def __hash__(self) -> int:
        return hash((self.name, self.port, self.audience))

    def __repr__(self) -> str:
        return f"Host({self.netloc!r}, audience={self.audience!r})"


def join_netloc(name: str, port: str | None) -> str:
    shown = f"[{name}]" if ":" in name else name
    return f"{shown}:{port}" if port else shown


def split_hostport(text: str) -> tuple[str, str | None] | None:
    """``(name, port)`` from ``host``, ``host:port``, ``[v6]`` or ``[v6]:port``; None when malformed.

    The name comes back lower case without a trailing dot; the port without leading zeros.
    """
    if not text or any(c in text for c in " \t\r\n/@?#=,\\"):
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[1:end].lower(), text[end + 1 :]
        if ":" not in name or not set(name) <= _IPV6_CHARS:
            return None
        if rest and not rest.startswith(":"):
            return None
        port_text: str | None = rest[1:] if rest else None
    else:
        name, sep, after = text.partition(":")
        name = name.lower().rstrip(".")
        port_text = after if sep else None
        if not name or not set(name) <= _NAME_CHARS or name[0] in "-." or ".." in name:
            return None
    if port_text is None:
        return name, None
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, str(int(port_text))


def parse_spec(spec: str) -> Host:
    """One ``host[:port][=audience]`` entry; raises HostsError."""
    hostport, sep, audience = spec.strip().partition("=")
    hostport, audience = hostport.strip(), audience.strip()
    if sep and not audience:
        raise _error(f"{spec.strip()!r} has an empty audience after '='")
    if any(c in audience for c in " \t\r\n,"):
        raise _error(f"{spec.strip()!r}: the audience must not contain spaces or commas")
    parts = split_hostport(hostport)
    if parts is None:
        raise _error(f"{spec.strip()!r} is not host[:port][=audience] ({EXAMPLE})")
    name, port = parts
    return Host(name, port, audience or join_netloc(name, port))


def parse_list(entries: "Iterable[str]", where: str) -> tuple[Host, ...]:
    """Every host in ``entries`` (each may hold several comma-separated specs); raises HostsError."""
    found: dict[tuple[str, str | None], Host] = {}
    for entry in entries:
        for spec in entry.split(","):
            if not spec.strip():
                continue
            try:
                host = parse_spec(spec)
            except _hosts_error() as exc:  # evaluated only when parse_spec raises
                raise _error(f"{where}: {exc}") from None
            key = (_ALIASES.get(host.name, host.name), host.port)
            earlier = found.setdefault(key, host)
            if earlier.audience != host.audience:
                raise _error(
                    f"{where}: {host.netloc} is listed twice, with audiences "
                    f"{earlier.audience!r} and {host.audience!r}; keep one"
                )
    return tuple(found.values())


def load(environ: "Mapping[str, str] | None" = None) -> tuple[Host, ...]:
    """The configured hosts (possibly none); raises HostsError naming the variable or file to fix."""
    env = process_environ() if environ is None else environ
    raw = env.get(HOSTS_ENV)
    if raw is not None:
        return parse_list([raw], HOSTS_ENV)
    path = env.get(CONFIG_ENV)
    if not path:
        return ()
    value = _read_config(path).get("hosts", [])
    where = f"key 'hosts' in {path} ({CONFIG_ENV})"
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _error(f'{where}: expected a list of strings such as ["registry.example.com"]')
    return parse_list(value, where)


def _read_config(path: str) -> dict[str, object]:
    import tomllib  # only when the file is the source: it costs more than the rest of a run

    try:
        with open(path, "rb") as f:  # noqa: PTH123 - pathlib would cost a few ms of start-up
            return tomllib.load(f)
    except OSError as exc:
        raise _error(f"{CONFIG_ENV} names {path}, which cannot be read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise _error(f"{CONFIG_ENV} names {path}, which is not valid TOML: {exc}") from None


class Target:
    """A server a client asked about: scheme (None when not given), host name and port."""

    __slots__ = ("name", "port", "scheme")

    def __init__(self, scheme: str | None, name: str, port: str | None) -> None:
        self.scheme = scheme
        self.name = name
        self.port = port


def parse_server(text: str, scheme: str | None = None) -> Target | None:
    """The host a server string names: ``host[:port]``, or a URL such as ``https://host/v1/``.

    ``scheme`` is the protocol when the caller knows it apart (git's ``protocol=``). None when the
    string names no host or uses a scheme other than http(s).
    """
    rest = text.strip()
    scheme_sep = rest.find("://")
    if scheme_sep >= 0:
        scheme = rest[:scheme_sep].lower()
        rest = rest[scheme_sep + 3 :]
    if scheme is not None and scheme not in _DEFAULT_PORTS:
        return None
    for stop in "/?#":
        rest = rest.partition(stop)[0]
    rest = rest.rpartition("@")[2]  # userinfo never takes part in matching
    parts = split_hostport(rest)
    if parts is None:
        return None
    return Target(scheme, parts[0], parts[1])


def match(hosts: "Iterable[Host]", server: str, scheme: str | None = None) -> Host | None:
    """The configured host that ``server`` names, or None.

    A host listed without a port matches its scheme's default port (443 when the scheme is not
    known); one listed with a port matches only that port. Plain ``http`` gets a token only on
    loopback: anywhere else the token would cross the network in the clear.
    """
    target = parse_server(server, scheme)
    if target is None:
        return None
    if target.scheme == "http" and not _is_loopback(target.name):
        return None
    default = _DEFAULT_PORTS[target.scheme or "https"]
    effective = target.port or default
    name = _ALIASES.get(target.name, target.name)
    for host in hosts:
        if _ALIASES.get(host.name, host.name) != name:
            continue
        if host.port is None:
            if target.port is None or target.port == default:
                return host
        elif host.port == effective:
            return host
    return None


def _is_loopback(host: str) -> bool:
    # imported here: only plain-http servers ask, and every helper run that does not saves a module
    from ..lite.netloc import is_loopback

    return is_loopback(host)
