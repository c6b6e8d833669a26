"""A minimal HTTP/1.1 client for the local API over its Unix socket, standard library only.

``tokenrelay token`` and the credential helpers run once per use, often on a hot path (a docker
pull, a git fetch), so they must start in milliseconds: no aiohttp, no http.client (it drags in
``email`` and ``ssl``), just a socket and one request. ``json`` and ``aip193`` (with ``re`` and
``enum`` behind them) are imported only by the calls that need them: ``fetch_token_text``'s
successful path needs neither. Nor does it need ``tokenrelay.errors``: ``LocalApiError`` is loaded
when one is raised, and handed on from here on first use (PEP 562).

With ``TOKENRELAY_AGENT_TOKEN_FILE`` set, the socket is the node agent's (docs/agent.md): every call
reads that file afresh (kubelet rotates it) and sends it as ``Authorization: Bearer``, and a token
request names ``identity=$TOKENRELAY_IDENTITY``, as AWS's container-credentials provider does.
"""

# The C module behind ``socket``: the same socket object for what we do here (connect, sendall, recv),
# without socket.py's enum conversions and selectors, a tenth of a helper's start-up.
from _socket import AF_UNIX, SOCK_STREAM
from _socket import socket as unix_socket

from . import environ as process_environ
from .names import AGENT_TOKEN_FILE_ENV, DEFAULT_SOCKET, EXPIRES_HEADER, IDENTITY_ENV, SOCKET_ENV

__all__ = [
    "DEFAULT_SOCKET",
    "SOCKET_ENV",
    "LocalApiError",
    "TokenReply",
    "fetch_token",
    "fetch_token_bare",
    "fetch_token_text",
]

TYPE_CHECKING = False  # not typing's: the helpers' hot path must not import typing
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..errors import LocalApiError

MAX_REPLY = 1 << 20
MAX_AGENT_TOKEN = 64 * 1024  # a projected service-account token is a few KiB
_EXPIRES_KEY = EXPIRES_HEADER.lower().encode()


# RFC 3986 unreserved characters: what urllib.parse.quote(safe="") leaves alone.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class TokenReply:
    """The local API's answer. A plain slotted class, not a dataclass, and no urllib.parse below:
    those two imports alone cost more start-up than the rest of a credential helper's run."""

    __slots__ = ("audience", "expire_time", "token")

    def __init__(self, token: str, expire_time: str, audience: str) -> None:
        self.token = token
        self.expire_time = expire_time
        self.audience = audience

    def __repr__(self) -> str:  # never the token
        return f"TokenReply(expire_time={self.expire_time!r}, audience={self.audience!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TokenReply):
            return NotImplemented
        return (self.token, self.expire_time, self.audience) == (
            other.token,
            other.expire_time,
            other.audience,
        )

    def __hash__(self) -> int:
        return hash((self.token, self.expire_time, self.audience))


def __getattr__(name: str) -> object:
    if name == "LocalApiError":  # the name this module has always handed on, loaded on first use
        from ..errors import LocalApiError

        return LocalApiError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _error(message: str, *, status: int | None = None, reason: str = "") -> "LocalApiError":
    # errors is imported only when one is raised: a helper's successful run never loads it.
    from ..errors import LocalApiError

    return LocalApiError(message, status=status, reason=reason)


def quote(text: str) -> str:
    """Percent-encode everything but the unreserved characters, as ``urllib.parse.quote(text, safe="")``."""
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in text.encode())


def socket_path(explicit: str | None = None, environ: "Mapping[str, str] | None" = None) -> str:
    """``explicit``, else $TOKENRELAY_SOCKET, else where ``tokenrelay run`` listens by default."""
    env = process_environ() if environ is None else environ
    return explicit or env.get(SOCKET_ENV) or DEFAULT_SOCKET


def fetch_token(path: str, audience: str | None = None, timeout: float = 15.0) -> TokenReply:
    """The sidecar's current token for ``audience`` (its API audience when None)."""
    status, body = request(path, _target(audience), timeout)
    if status != 200:
        raise _refusal(path, status, body)
    from .litejson import loads  # not json: it imports re, which the git helper cannot afford

    try:
        obj = loads(body)
        return TokenReply(obj["token"], obj["expireTime"], obj["audience"])
    except (ValueError, KeyError, TypeError):
        raise _error(f"the tokenrelay sidecar at {path} answered an unexpected body") from None


def fetch_token_text(path: str, audience: str | None = None, timeout: float = 15.0) -> str:
    """The token alone, asked for as ``text/plain``."""
    return fetch_token_bare(path, audience, timeout)[0]


def fetch_token_bare(path: str, audience: str | None = None, timeout: float = 15.0) -> tuple[str, int | None]:
    """The token asked for as ``text/plain``, and its expiry in Unix seconds from the answer's
    ``Token-Expires-At`` header (None from a sidecar that sends none): what the credential helpers
    use, since decoding JSON costs more start-up (``json`` imports ``re``) than the rest of their run."""
    status, headers, body = exchange(path, _target(audience), timeout, accept="text/plain")
    if status != 200:
        raise _refusal(path, status, body)
    if body.split() != [body]:  # empty, or a JSON body from a sidecar that ignored Accept
        raise _error(f"the tokenrelay sidecar at {path} answered an unexpected body")
    try:
        token = body.decode()
    except UnicodeDecodeError:
        raise _error(f"the tokenrelay sidecar at {path} answered an unexpected body") from None
    stated = headers.get(_EXPIRES_KEY, b"")
    # Digits only, and no later than year 9999: what git's password_expiry_utc can carry.
    return token, int(stated) if stated.isdigit() and len(stated) <= 12 else None


def _target(audience: str | None) -> str:
    query = [f"audience={quote(audience)}"] if audience else []
    env = process_environ()
    if env.get(AGENT_TOKEN_FILE_ENV):
        # The agent serves every identity of the node: the pod names its own on every call. Sent
        # empty when unset, so that the agent's refusal names the variable.
        query.append(f"identity={quote(env.get(IDENTITY_ENV, ''))}")
    return "/v1/token" + ("?" + "&".join(query) if query else "")


def _authorization() -> str:
    """The ``Authorization`` header line for the node agent, read afresh; "" without the agent."""
    path = process_environ().get(AGENT_TOKEN_FILE_ENV)
    if not path:
        return ""
    try:
        with open(path, "rb") as file:  # noqa: PTH123 (pathlib costs the helpers' start-up)
            raw = file.read(MAX_AGENT_TOKEN + 1)
    except OSError as exc:
        raise _error(
            f"cannot read the pod's token {path} named by {AGENT_TOKEN_FILE_ENV}: "
            f"{exc.strerror or exc}; mount the projected token there or unset the variable"
        ) from None
    token = raw.strip()
    if not token or len(raw) > MAX_AGENT_TOKEN or token.split() != [token] or not token.isascii():
        raise _error(f"the file {path} named by {AGENT_TOKEN_FILE_ENV} does not hold a service-account token")
    return "Authorization: Bearer " + token.decode() + "\r\n"


def _refusal(path: str, status: int, body: bytes) -> "LocalApiError":
    from . import aip193

    parsed = aip193.parse(body)
    if parsed is None:
        return _error(f"the tokenrelay sidecar at {path} answered HTTP {status}", status=status)
    _, message, reason = parsed
    return _error(message, status=status, reason=reason)


def request(path: str, target: str, timeout: float, accept: str = "application/json") -> tuple[int, bytes]:
    """One GET over the socket; ``(status, body)``."""
    status, _, body = exchange(path, target, timeout, accept)
    return status, body


def exchange(
    path: str, target: str, timeout: float, accept: str = "application/json"
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One GET over the socket; ``(status, headers, body)``, header names in lower case."""
    authorization = _authorization()  # before connecting: a missing file is the pod's to fix
    sock = unix_socket(AF_UNIX, SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        sock.sendall(
            f"GET {target} HTTP/1.1\r\nHost: tokenrelay\r\nAccept: {accept}\r\n{authorization}"
            "Connection: close\r\n\r\n".encode()
        )
        chunks = []
        size = 0
        while chunk := sock.recv(65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_REPLY:
                raise _error(f"the tokenrelay sidecar at {path} answered over 1 MiB")
    except (FileNotFoundError, ConnectionRefusedError):
        if authorization:
            raise _error(
                f"no tokenrelay agent is listening at {path}: is the node's agent (its DaemonSet) "
                f"running, and its directory mounted where {SOCKET_ENV} points?"
            ) from None
        raise _error(
            f"no tokenrelay sidecar is listening at {path}: start `tokenrelay run`, or point "
            "--socket / TOKENRELAY_SOCKET at its socket"
        ) from None
    except PermissionError:
        raise _error(
            f"permission denied on the tokenrelay socket {path}: run as a user that "
            "--socket-mode / --socket-allow-uid admit"
        ) from None
    except TimeoutError:
        raise _error(f"the tokenrelay sidecar at {path} did not answer within {timeout:g}s") from None
    except OSError as exc:
        raise _error(f"cannot talk to the tokenrelay sidecar at {path}: {exc.strerror or exc}") from None
    finally:
        sock.close()
    try:
        return _parse_reply(b"".join(chunks), path)
    except (ValueError, IndexError):  # a malformed chunked body: one error type for every caller
        raise _error(f"the process at {path} does not speak the tokenrelay local API") from None


def _parse_reply(raw: bytes, path: str) -> tuple[int, dict[bytes, bytes], bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise _error(f"the process at {path} does not speak the tokenrelay local API")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    if headers.get(b"transfer-encoding", b"").lower() == b"chunked":
        body = _dechunk(body)
    elif b"content-length" in headers and headers[b"content-length"].isdigit():
        body = body[: int(headers[b"content-length"])]
    return int(parts[1]), headers, body


def _dechunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        data = rest[size + 2 :]
    return b"".join(out)
