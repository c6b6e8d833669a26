"""A direct exchange for when no sidecar answers, with the token cached on disk for the next run.

Enabled by ``TOKENRELAY_AUTH_URL``, ``TOKENRELAY_IDENTITY`` and an OIDC source
(``TOKENRELAY_ID_TOKEN_FILE``, ``TOKENRELAY_ID_TOKEN_ENV`` naming a variable, or
``TOKENRELAY_ID_TOKEN_SOURCE`` naming any source of ``tokenrelay run``: a CI system, a cloud, ``auto``),
the same names ``tokenrelay run`` reads. The OIDC token is read through the sidecar's own sources
(``tokens.idsources``), their messages naming these variables.

The cache lives in ``$XDG_CACHE_HOME/tokenrelay/`` (``~/.cache/tokenrelay/``): the directory is
0700, each file 0600 and written to a temporary name then renamed, so a helper running at the same
moment reads the old token or the new one, never half of either. A cached token is reused while at
least five minutes remain, which leaves any client time to finish with it.

Only this module talks to the token service, and it imports urllib only when it actually exchanges (a
source that asks its platform loads asyncio, and aiohttp, only then). The service's answer passes the
sidecar's own checks (``stsanswer``), worded here with the environment variables to set rather than
``tokenrelay run``'s flags.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path

from ..lite.names import DEFAULT_EXCHANGE_TIMEOUT, env, where
from . import Credential, CredentialError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import urllib.request
    from collections.abc import Callable, Coroutine, Mapping
    from typing import Any

    from ..tokens.idsources import IdToken
    from . import Exchange

AUTH_URL_ENV = env("auth_url")
IDENTITY_ENV = env("identity")
ID_TOKEN_FILE_ENV = env("id_token_file")
ID_TOKEN_ENV_ENV = env("id_token_env")
SOURCE_ENV = env("id_token_source")
TIMEOUT_ENV = env("exchange_timeout")
HINT = (
    f"or set {AUTH_URL_ENV}, {IDENTITY_ENV} and {ID_TOKEN_FILE_ENV} (or {ID_TOKEN_ENV_ENV}) "
    "to exchange without a sidecar"
)

MIN_REMAINING = 300.0  # reuse a cached token only while at least this much of its life is left
MAX_BYTES = 1 << 20  # of a cache file


def configured(environ: Mapping[str, str]) -> bool:
    """True when every input of a direct exchange is set."""
    has_source = bool(
        environ.get(ID_TOKEN_FILE_ENV) or environ.get(ID_TOKEN_ENV_ENV) or environ.get(SOURCE_ENV)
    )
    return bool(environ.get(AUTH_URL_ENV) and environ.get(IDENTITY_ENV) and has_source)


def fetch(
    audience: str,
    environ: Mapping[str, str],
    *,
    wall: Callable[[], float] = time.time,
    exchange: Exchange | None = None,
) -> Credential:
    """A token for ``audience`` from the cache, else from a fresh exchange; raises CredentialError."""
    auth_url = auth_url_from(environ)
    identity = environ[IDENTITY_ENV].strip()
    directory = cache_dir(environ)
    path = directory / cache_name(auth_url, identity, audience)
    now = wall()
    cached = load_cached(path, now)
    if cached is not None:
        return cached
    timeout = timeout_from(environ)
    id_token = read_id_token(environ, now, auth_url=auth_url, timeout=timeout)
    do_exchange = exchange or exchange_token
    token, expiry = do_exchange(
        auth_url=auth_url,
        audience=audience,
        identity=identity,
        id_token=id_token,
        timeout=timeout,
    )
    expiry = token_expiry(token, expiry, now)
    store_cached(directory, path, token, expiry)
    return Credential(token, expiry)


def auth_url_from(environ: Mapping[str, str]) -> str:
    """The token service's base URL, without a trailing slash; raises CredentialError."""
    from ..lite.rules import http_url

    auth_url = (environ.get(AUTH_URL_ENV) or "").strip().rstrip("/")
    if not auth_url.startswith(("https://", "http://")):
        shown = f", not {auth_url!r}" if auth_url else ""
        raise CredentialError(f"{where('auth_url')} must be an http:// or https:// URL{shown}")
    try:  # the sidecar's own rule for the same variable
        return http_url(auth_url)
    except ValueError as exc:
        raise CredentialError(f"{where('auth_url')}: {exc}") from None


def token_expiry(token: str, stated: float | None, now: float) -> float:
    """When the token expires, as a Unix time: ``now`` plus its life by ``lifetime.lifetime_of``."""
    from ..lite.lifetime import lifetime_of

    return now + lifetime_of(token, stated, now)


def timeout_from(environ: Mapping[str, str]) -> float:
    from ..lite.rules import seconds

    raw = environ.get(TIMEOUT_ENV)
    if not raw:
        return DEFAULT_EXCHANGE_TIMEOUT
    try:  # the sidecar's own rule and bounds for the same variable
        return seconds(raw)
    except ValueError as exc:
        raise CredentialError(f"{TIMEOUT_ENV}: {exc}") from None


# -- the OIDC token ----------------------------------------------------------------------------


def read_id_token(environ: Mapping[str, str], now: float, *, auth_url: str, timeout: float) -> str:
    """The platform's OIDC token, read afresh through the source the environment names (the file,
    unless TOKENRELAY_ID_TOKEN_ENV or TOKENRELAY_ID_TOKEN_SOURCE says); raises CredentialError."""
    from ..errors import ConfigError, IdTokenError
    from ..lite.names import DEFAULT_ID_TOKEN_FILE
    from ..tokens.idsources import SOURCE_SETTINGS, SOURCES, SourceInputs, explained

    name = (environ.get(SOURCE_ENV) or ("env" if environ.get(ID_TOKEN_ENV_ENV) else "file")).strip().lower()
    if name not in SOURCES:
        raise CredentialError(f"{SOURCE_ENV}: {name!r} is not one of {', '.join(SOURCES)}")
    inputs = SourceInputs(
        environ=environ,
        audience=environ.get(env("id_token_audience")) or auth_url,
        id_token_file=environ.get(ID_TOKEN_FILE_ENV) or DEFAULT_ID_TOKEN_FILE,
        id_token_env=environ.get(ID_TOKEN_ENV_ENV) or None,
        settings={name: environ[env(name)] for name in SOURCE_SETTINGS if environ.get(env(name))},
        timeout=timeout,
        wall=lambda: now,
        spell=env,
    )
    try:
        source = SOURCES[name].build(inputs)
    except ConfigError as exc:
        raise CredentialError(exc.message) from None
    try:
        return _completed(source.read()).value
    except IdTokenError as exc:
        raise CredentialError(explained(source, exc).message) from None


def _completed(read: Coroutine[Any, Any, IdToken]) -> IdToken:
    """The read's result, on an event loop of its own (on a thread when the caller runs one)."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(read)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as thread:  # an in-process caller already inside an event loop
        return thread.submit(asyncio.run, read).result()


# -- the exchange ------------------------------------------------------------------------------


def exchange_token(
    *, auth_url: str, audience: str, identity: str, id_token: str, timeout: float
) -> tuple[str, float | None]:
    """``GET {auth_url}/sts/exchange``: the API token and the service's stated expiry, if any.

    Redirects are not followed: the OIDC token would travel with them.
    """
    import urllib.error
    import urllib.request
    from urllib.parse import urlencode

    from ..errors import ExchangeError
    from ..lite import stsanswer
    from ..lite.unreachable import unreachable

    url = auth_url + "/sts/exchange"
    request = urllib.request.Request(  # noqa: S310 - auth_url_from() allows only http(s)
        url + "?" + urlencode({"aud": audience, "identity": identity}),
        headers={"Authorization": f"Bearer {id_token}", "Accept": "application/json"},
    )

    opener = urllib.request.build_opener(_no_redirect_handler())
    try:
        with opener.open(request, timeout=timeout) as response:
            raw = response.read(stsanswer.MAX_ANSWER_BYTES + 1)
        if len(raw) > stsanswer.MAX_ANSWER_BYTES:
            raise stsanswer.oversized()
        token, stated = stsanswer.token_from(raw, url)
    except urllib.error.HTTPError as exc:
        refused = stsanswer.refusal(
            exc.code,
            exc.read(stsanswer.MAX_ANSWER_BYTES),
            audience=audience,
            id_token=id_token,
            location=exc.headers.get("Location"),
            retry_after=exc.headers.get("Retry-After"),
            auth_url_setting=AUTH_URL_ENV,
            identity_setting=IDENTITY_ENV,
        )
        raise CredentialError(str(refused)) from None
    except ExchangeError as exc:
        raise CredentialError(str(exc)) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise CredentialError(
                f"the token service at {url} did not answer within {timeout:g}s ({TIMEOUT_ENV})"
            ) from None
        raise CredentialError(str(unreachable(url, exc, AUTH_URL_ENV))) from None
    except TimeoutError:
        raise CredentialError(
            f"the token service at {url} did not answer within {timeout:g}s ({TIMEOUT_ENV})"
        ) from None
    except OSError as exc:
        raise CredentialError(f"cannot talk to the token service at {url}: {exc.strerror or exc}") from None
    return token, stated


def _no_redirect_handler() -> urllib.request.HTTPRedirectHandler:
    """A redirect handler that follows nothing: urllib then raises HTTPError for the 3xx, reported
    by stsanswer.refusal. The class is made once, on the first exchange (urllib loads only then)."""
    global _NO_REDIRECT
    if _NO_REDIRECT is None:
        import urllib.request

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: object, **kwargs: object) -> None:
                return None

        _NO_REDIRECT = NoRedirect
    return _NO_REDIRECT()


_NO_REDIRECT: type[urllib.request.HTTPRedirectHandler] | None = None


# -- the cache ---------------------------------------------------------------------------------


def cache_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/tokenrelay``, or ``~/.cache/tokenrelay``."""
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path(environ.get("HOME") or Path.home()) / ".cache"
    return base / "tokenrelay"


def cache_name(auth_url: str, identity: str, audience: str) -> str:
    """One file per (token service, identity, audience); hashed so no name leaks into a listing."""
    import hashlib

    key = "\n".join((auth_url, identity, audience)).encode()
    return hashlib.sha256(key).hexdigest()[:32] + ".json"


def load_cached(path: Path, now: float) -> Credential | None:
    """The cached token when it is ours, private and has at least MIN_REMAINING left; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if info.st_uid != os.getuid() or info.st_mode & 0o077 or not stat.S_ISREG(info.st_mode):
            return None  # someone else could have written or read it: exchange afresh
        raw = f.read(MAX_BYTES)
    try:
        obj = json.loads(raw)
        token, expiry = obj["token"], obj["expiry"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(token, str) or not isinstance(expiry, int | float) or expiry - now < MIN_REMAINING:
        return None
    return Credential(token, float(expiry))


def store_cached(directory: Path, path: Path, token: str, expiry: float) -> None:
    """Write the cache file atomically; a cache that cannot be written only costs the next run time."""
    from ..lite.files import write_atomic

    if not _private_dir(directory):
        return
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps({"token": token, "expiry": expiry}).encode(), 0o600)


def _private_dir(directory: Path) -> bool:
    """Create ``directory`` 0700 (or tighten it); False when it is not ours to use."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if stat.S_IMODE(info.st_mode) != 0o700:
            directory.chmod(0o700)
    except OSError:
        return False
    return True
