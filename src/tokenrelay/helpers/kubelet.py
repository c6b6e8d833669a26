"""``tokenrelay kubelet-credential-provider``: a kubelet image credential provider.

kubelet writes a ``CredentialProviderRequest`` (``credentialprovider.kubelet.k8s.io/v1``) on stdin and
reads a ``CredentialProviderResponse`` from stdout. With ``serviceAccountToken`` in the request
(KEP-4412: kubelet sends the pod's service-account token when the provider's ``tokenAttributes`` ask
for it), that token is exchanged directly, for the identity in the service account's
``tokenrelay.dev/identity`` annotation or else ``--identity``; the answer then belongs to that
service account only, which is why the provider config must say ``cacheType: ServiceAccount``.
Without one, the node's sidecar socket gives the token.

The answer is ``auth`` for the image's registry host with ``cacheKeyType: Registry`` and a
``cacheDuration`` that ends before the token's refresh point, so kubelet never holds a token the
sidecar has already moved past. An image on a host not in ``TOKENRELAY_HOSTS`` gets an empty
``auth``: kubelet then pulls anonymously. Errors: one line on stderr, exit status 1.
"""

from __future__ import annotations

import json
import os
import sys
import time

from ..errors import RequestError
from ..lite.lifetime import DEFAULT_LIFETIME, EARLIEST_REFRESH
from ..lite.names import HOSTS_ENV, SOCKET_ENV
from . import USERNAME, Credential, CredentialError, failure_line
from .direct import (
    AUTH_URL_ENV,
    IDENTITY_ENV,
    auth_url_from,
    exchange_token,
    timeout_from,
    token_expiry,
)
from .hosts import load, match
from .source import fetcher

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping
    from typing import Any, TextIO

    from . import Exchange

API_VERSION = "credentialprovider.kubelet.k8s.io/v1"
IDENTITY_ANNOTATION = "tokenrelay.dev/identity"
MAX_INPUT = 1 << 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--identity",
        metavar="UID",
        help=f"identity to exchange a pod's service-account token for, unless its service account has "
        f"the {IDENTITY_ANNOTATION} annotation [env {IDENTITY_ENV}]",
    )
    parser.add_argument(
        "--auth-url",
        metavar="URL",
        help=f"token service base URL, for service-account tokens [env {AUTH_URL_ENV}]",
    )
    parser.add_argument(
        "--hosts",
        metavar="HOST[:PORT][=AUD],...",
        help=f"registry hosts that get a token, and their audiences [env {HOSTS_ENV}]",
    )
    parser.add_argument("--socket", metavar="PATH", help=f"the node sidecar's socket [env {SOCKET_ENV}]")


def run(args: argparse.Namespace) -> int:
    env = dict(os.environ)
    flags = {
        IDENTITY_ENV: args.identity,
        AUTH_URL_ENV: args.auth_url,
        HOSTS_ENV: args.hosts,
        SOCKET_ENV: args.socket,
    }
    env.update({name: value for name, value in flags.items() if value})
    return handle(sys.stdin, sys.stdout, sys.stderr, environ=env)


def handle(
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    *,
    environ: Mapping[str, str] | None = None,
    fetch: Callable[[str], Credential] | None = None,
    exchange: Exchange | None = None,
    wall: Callable[[], float] = time.time,
) -> int:
    """Answer one request; the exit status. Never raises, never prints a traceback."""
    env = os.environ if environ is None else environ
    try:
        request = parse_request(stdin.read(MAX_INPUT + 1))
        response = respond(
            request, env, fetch=fetch or fetcher(env), exchange=exchange or exchange_token, wall=wall
        )
    except Exception as exc:  # kubelet logs stderr: one line, never a traceback
        stderr.write(
            failure_line(
                exc,
                unreadable="kubelet sent a request this provider cannot read",
                not_text="kubelet sent a request that is not UTF-8 text",
            )
        )
    else:
        json.dump(response, stdout)
        stdout.write("\n")
        return 0
    return 1


def parse_request(text: str) -> dict[str, Any]:
    """The request object, checked for what this provider relies on; raises RequestError."""
    if len(text) > MAX_INPUT:
        raise RequestError("over 1 MiB")
    try:
        request = json.loads(text)
    except ValueError:
        raise RequestError("it is not JSON") from None
    except RecursionError:  # json nests by recursion: "[[[[...", well under 1 MiB, exhausts the stack
        raise RequestError("its JSON is nested too deeply") from None
    if not isinstance(request, dict):
        raise RequestError("it is not a JSON object")
    if request.get("apiVersion") != API_VERSION:
        raise RequestError(f"apiVersion {request.get('apiVersion')!r}, expected {API_VERSION}")
    if request.get("kind") != "CredentialProviderRequest":
        raise RequestError(f"kind {request.get('kind')!r}, expected CredentialProviderRequest")
    image = request.get("image")
    if not isinstance(image, str) or not image.strip():
        raise RequestError('no "image" string')
    token = request.get("serviceAccountToken")
    if token is not None and not isinstance(token, str):
        raise RequestError('"serviceAccountToken" is not a string')
    annotations = request.get("serviceAccountAnnotations")
    if annotations is not None and not (
        isinstance(annotations, dict) and all(isinstance(v, str) for v in annotations.values())
    ):
        raise RequestError('"serviceAccountAnnotations" is not a map of strings')
    return request


def registry_of(image: str) -> str:
    """The registry host of an image reference (Docker Hub when the first part is not a host)."""
    first, sep, _ = image.strip().partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first
    return "docker.io"


def respond(
    request: Mapping[str, Any],
    environ: Mapping[str, str],
    *,
    fetch: Callable[[str], Credential],
    exchange: Exchange,
    wall: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """The CredentialProviderResponse for a checked request."""
    registry = registry_of(request["image"])
    response: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "CredentialProviderResponse",
        "cacheKeyType": "Registry",
    }
    host = match(load(environ), registry)
    if host is None:
        response["auth"] = {}
        return response
    now = wall()
    sa_token = (request.get("serviceAccountToken") or "").strip()
    if sa_token:
        token = _exchange_service_account(request, sa_token, host.audience, environ, exchange, now)
    else:
        token = fetch(host.audience)
    issued, expires = token.times()
    response["cacheDuration"] = go_duration(cache_seconds(issued, expires, now))
    response["auth"] = {registry: {"username": USERNAME, "password": token.token}}
    return response


def _exchange_service_account(
    request: Mapping[str, Any],
    sa_token: str,
    audience: str,
    environ: Mapping[str, str],
    exchange: Exchange,
    now: float,
) -> Credential:
    annotations = request.get("serviceAccountAnnotations") or {}
    identity = (annotations.get(IDENTITY_ANNOTATION) or environ.get(IDENTITY_ENV) or "").strip()
    if not identity:
        raise CredentialError(
            f"no identity for this pod's service account: annotate it with {IDENTITY_ANNOTATION}, "
            f"or pass --identity (env {IDENTITY_ENV}) in the provider's args"
        )
    auth_url = auth_url_from(environ)
    token, stated = exchange(
        auth_url=auth_url,
        audience=audience,
        identity=identity,
        id_token=sa_token,
        timeout=timeout_from(environ),
    )
    return Credential(token, token_expiry(token, stated, now))


def cache_seconds(issued: float | None, expires: float | None, now: float) -> int:
    """Whole seconds until the token's earliest refresh point; 0 (do not cache) when past it."""
    if expires is None:
        return 0
    lifetime = expires - issued if issued is not None and expires > issued else DEFAULT_LIFETIME
    refresh_at = expires - lifetime * (1 - EARLIEST_REFRESH)
    return max(0, int(refresh_at - now))


def go_duration(seconds: int) -> str:
    """A duration as Go's time.Duration prints it (``1h2m3s``, ``27m0s``, ``45s``), as kubelet parses it."""
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
