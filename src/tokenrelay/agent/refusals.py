"""Every refusal of the agent, in one table: reason, HTTP status, AIP-193 code, whether asking again
can succeed, the message (a template of named fields) and what to do. The checks, the rate limits
and the connection bounds raise or write these; nothing else spells a refusal. docs/agent.md's
table of refusals is generated from ``CATALOGUE`` (``table``), as the option reference is from the
option table.

A reason may have several rows when its cases say different things (``POD_TOKEN_MALFORMED``: too
large, not a JWT, a claim missing). The token service's own refusal keeps its reason: that row's
reason is the one used when the service gives none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiohttp import web

from ..lite.aip193 import Code
from ..lite.names import IDENTITY_ENV, where
from ..serving.tokenanswer import error_response


@dataclass(frozen=True, slots=True)
class Refusal:
    """One row: ``template`` is ``str.format``'d with the refusal's fields."""

    reason: str
    status: int
    code: Code
    retryable: bool  # whether the same request may succeed later, unchanged
    template: str
    remedy: str  # what to do, for the docs (the message says the gist of it too)
    retry_after: bool = False  # the answer carries Retry-After

    def refuse(self, *, reason: str | None = None, retry_after: float = 1.0, **fields: object) -> Refused:
        """The exception that answers with this row; ``reason``: the token service's own."""
        return Refused(self, self.template.format(**fields), reason or self.reason, retry_after)


class Refused(Exception):
    """A request refused by ``refusal``, with its message; ``answer`` writes the response."""

    def __init__(self, refusal: Refusal, message: str, reason: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.refusal = refusal
        self.message = message
        self.reason = reason
        self.retry_after = retry_after

    def answer(self) -> web.Response:
        refusal = self.refusal
        response = error_response(refusal.status, refusal.code, self.message, self.reason)
        if refusal.retry_after:
            response.headers["Retry-After"] = str(max(1, math.ceil(self.retry_after)))
        return response


_AUDIENCE_FLAG = "the agent's --pod-token-audience"
_RENEW = "re-create the pod if kubelet no longer renews its projected token"


def _pod_token(check: str, template: str, remedy: str) -> Refusal:
    return Refusal("POD_TOKEN_" + check, 401, Code.UNAUTHENTICATED, False, template, remedy)


# -- the caller: its pod token, then its pod -------------------------------------------------------

MISSING = _pod_token(
    "MISSING",
    "no pod token: send the pod's projected service-account token as Authorization: Bearer "
    "(TOKENRELAY_AGENT_TOKEN_FILE names its file)",
    "set TOKENRELAY_AGENT_TOKEN_FILE in the pod (the injector's agent mode does)",
)
TOO_LARGE = _pod_token(
    "MALFORMED",
    "the pod token is over 16 KiB: not a service-account token",
    "send the projected service-account token, not another file",
)
NOT_A_JWT = _pod_token(
    "MALFORMED",
    "the pod token is not a JWT",
    "send the projected service-account token, not another file",
)
NO_CLAIM = _pod_token(
    "MALFORMED",
    "the pod token has no '{claim}' claim",
    "send a service-account token: every one has exp, iss and aud",
)
UNREADABLE = _pod_token(
    "MALFORMED",
    "the pod token cannot be read: {error}",
    "send the projected service-account token, not another file",
)
FOREIGN_KEY = _pod_token(
    "SIGNATURE",
    "the pod token is signed with a key that is not the cluster's",
    "send a token of this cluster; a key the cluster retired is refused after --cluster-jwks-refresh",
)
BAD_SIGNATURE = _pod_token(
    "SIGNATURE",
    "the pod token's signature is not the cluster's",
    "send the token kubelet wrote, unaltered",
)
EXPIRED = _pod_token("EXPIRED", "the pod token has expired: kubelet should have renewed its file", _RENEW)
NOT_YET_VALID = _pod_token(
    "NOT_YET_VALID",
    "the pod token is not valid yet (nbf/iat in the future)",
    "fix the node's clock (5 s of leeway)",
)
WRONG_AUDIENCE = _pod_token(
    "AUDIENCE",
    f"the pod token's audience is not {{audience}}: project the token with that audience ({_AUDIENCE_FLAG})",
    "project the token for the token service's audience, or set --pod-token-audience to the one projected",
)
AUDIENCES = _pod_token(
    "AUDIENCE",
    f"the pod token carries {{count}} audiences: project it for {{audience}} alone ({_AUDIENCE_FLAG})",
    "project the token for one audience only: a token for several could be replayed here",
)
WRONG_ISSUER = _pod_token(
    "ISSUER",
    "the pod token was not issued by {issuer}",
    "send a token of this cluster, or set --cluster-issuer to its issuer",
)
UNBOUND = _pod_token(
    "CLAIMS",
    "the pod token is not bound to a pod: mount a projected service-account token "
    "(serviceAccountToken volume), not a Secret's token",
    "mount a projected token (the injector's agent mode does)",
)
NO_NODE = _pod_token(
    "CLAIMS",
    "the pod token names no node: the API server must issue node claims "
    "(ServiceAccountTokenPodNodeInfo, Kubernetes 1.30 and later)",
    "run Kubernetes 1.30 or later (ServiceAccountTokenPodNodeInfo)",
)
OTHER_NODE = _pod_token(
    "NODE",
    "the pod token is of a pod on node {node}, not on {here}: ask the agent of the pod's own node",
    "mount the socket of the pod's own node (the host directory, not a copied socket)",
)
POD_GONE = _pod_token(
    "POD_GONE",
    "pod {namespace}/{pod} (uid {uid}) does not run on this node any more: its token is refused",
    "nothing: a deleted or finished pod gets no token",
)

# -- what it asks for ------------------------------------------------------------------------------

IDENTITY_MISSING = Refusal(
    "IDENTITY_MISSING",
    400,
    Code.INVALID_ARGUMENT,
    False,
    f"no identity: set {IDENTITY_ENV} in the pod to the uid of the identity it assumes (sent as ?identity=)",
    f"set {IDENTITY_ENV} (the annotation tokenrelay.dev/identity)",
)
EXCHANGE_REFUSED = Refusal(
    "EXCHANGE_REFUSED",
    403,
    Code.PERMISSION_DENIED,
    False,
    "{message}",
    "as the token service's message and reason say (an identity that does not trust the service "
    "account, an audience it does not know); answered from memory for --refusal-ttl",
)
TOKEN_UNAVAILABLE = Refusal(
    "TOKEN_UNAVAILABLE",
    503,
    Code.UNAVAILABLE,
    True,
    "{message}",
    "ask again: the token service is down, or the node's exchange budget is spent for now",
)

# -- the rate limits (ratelimit) -------------------------------------------------------------------

RATE_LIMITED = Refusal(
    "RATE_LIMITED",
    429,
    Code.RESOURCE_EXHAUSTED,
    True,
    "too many requests on this connection: the agent serves the token it holds, ask less often",
    "ask less often on one connection (--max-requests-per-connection)",
    retry_after=True,
)
POD_RATE_LIMITED = Refusal(
    "POD_RATE_LIMITED",
    429,
    Code.RESOURCE_EXHAUSTED,
    True,
    f"pod {{namespace}}/{{pod}} asks too often ({where('max_requests_per_pod')}, "
    f"{where('pod_request_burst')}): the agent serves the token it holds, ask less often",
    "ask again after Retry-After; keep the token until it nears its expiry",
    retry_after=True,
)

# -- the connection bounds (connections), answered before a request is read ------------------------

HEAD_TIMEOUT = Refusal(
    "HEAD_TIMEOUT",
    408,
    Code.DEADLINE_EXCEEDED,
    True,
    f"the request head did not arrive in time ({where('head_timeout')})",
    "send the request head at once after connecting; the connection is closed",
    retry_after=True,
)
TOO_MANY_CONNECTIONS = Refusal(
    "TOO_MANY_CONNECTIONS",
    503,
    Code.UNAVAILABLE,
    True,
    f"the agent holds its maximum of {{limit}} connections ({where('max_connections')}); retry later",
    "retry later; the node's pods hold --max-connections connections",
    retry_after=True,
)
TOO_MANY_CONNECTIONS_FROM_PEER = Refusal(
    "TOO_MANY_CONNECTIONS_FROM_PEER",
    429,
    Code.RESOURCE_EXHAUSTED,
    True,
    f"{{peer}} holds its maximum of {{limit}} connections to the agent "
    f"({where('max_connections_per_peer')}): close idle ones",
    "close idle connections (--max-connections-per-peer per uid)",
    retry_after=True,
)

CATALOGUE: tuple[Refusal, ...] = (
    MISSING,
    TOO_LARGE,
    NOT_A_JWT,
    NO_CLAIM,
    UNREADABLE,
    FOREIGN_KEY,
    BAD_SIGNATURE,
    EXPIRED,
    NOT_YET_VALID,
    WRONG_AUDIENCE,
    AUDIENCES,
    WRONG_ISSUER,
    UNBOUND,
    NO_NODE,
    OTHER_NODE,
    POD_GONE,
    IDENTITY_MISSING,
    EXCHANGE_REFUSED,
    TOKEN_UNAVAILABLE,
    RATE_LIMITED,
    POD_RATE_LIMITED,
    HEAD_TIMEOUT,
    TOO_MANY_CONNECTIONS,
    TOO_MANY_CONNECTIONS_FROM_PEER,
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table() -> list[str]:
    """docs/agent.md's table of refusals, one row per entry of ``CATALOGUE``."""
    lines = [
        "| Reason | Status | Code | Retry | Message | What to do |",
        "|---|---|---|---|---|---|",
    ]
    for row in CATALOGUE:
        retry = ("yes, after `Retry-After`" if row.retry_after else "yes") if row.retryable else "no"
        cells = (
            f"`{row.reason}`",
            str(row.status),
            f"`{row.code.name}`",
            retry,
            _cell(row.template),
            _cell(row.remedy),
        )
        lines.append(f"| {' | '.join(cells)} |")
    return lines
