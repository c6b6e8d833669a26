"""The doctor inside a pod in agent mode (``TOKENRELAY_AGENT_TOKEN_FILE`` set): the pod's projected
token, the identity it asks for, the node agent's socket, and one token asked of the agent as the
clients ask for it. The pod holds no settings of its own: the agent does (docs/agent.md)."""

from __future__ import annotations

import asyncio
import stat
import time
from collections.abc import Mapping
from pathlib import Path

from ..errors import LocalApiError
from ..lite import socketclient
from ..lite.jwtclaims import numeric_claim, unverified_claims
from ..lite.names import AGENT_TOKEN_FILE_ENV, IDENTITY_ENV, SOCKET_ENV
from ..lite.redact import fingerprint
from .report import Check, Outcome, failed, passed, skipped

_REINJECT = (
    "the injector mounts it in agent mode: check the pod carries tokenrelay.dev/status: injected and "
    "re-create it (its controller makes one the webhook injects)"
)
_AGENT_PODS = "kubectl -n tokenrelay-agent get pods -o wide --field-selector spec.nodeName=<this pod's node>"
# What to do about the agent's refusals (docs/agent.md, "The request"), by reason.
_FIXES = {
    # the injector projects its own TOKENRELAY_AUTH_URL; the agent wants its own --auth-url by default
    "POD_TOKEN_AUDIENCE": (
        "the injector and the agent disagree on the token service: the pod's token is for {audience} "
        "(the injector's TOKENRELAY_AUTH_URL, or the pod's tokenrelay.dev/oidc-audience), the agent "
        "accepts its --pod-token-audience (default: its --auth-url); give the injector's "
        "TOKENRELAY_AUTH_URL the agent's value (docs/agent.md), then re-create the pod"
    ),
    "POD_TOKEN_ISSUER": "the token is not this cluster's: is the agent's --cluster-issuer right?",
    "POD_TOKEN_SIGNATURE": "the agent does not know the key that signed it: its --cluster-jwks-file is stale",
    "POD_TOKEN_NODE": "the token is of a pod of another node: the socket must be this node's agent's",
    "POD_TOKEN_POD_GONE": "the agent does not see this pod on its node yet: retry; else check its pod watch",
    "IDENTITY_MISSING": f"set {IDENTITY_ENV} (the annotation tokenrelay.dev/identity)",
    "RATE_LIMITED": "retry later: the agent limits each connection's request rate",
    "TOKEN_UNAVAILABLE": "the agent cannot get a token now: its log says why (`exchange failed`)",
}


def pod_token(path: str, now: float) -> Check:
    """The projected token the clients send: readable, a pod-bound service-account token, not expired."""
    try:
        raw = Path(path).read_text().strip()
    except OSError as exc:
        why = f"cannot read the pod's token {path} named by {AGENT_TOKEN_FILE_ENV}: {exc.strerror or exc}"
        return failed("agent.pod_token", why, _REINJECT)
    claims = unverified_claims(raw)
    if claims is None:
        return failed("agent.pod_token", f"{path} does not hold a service-account token (a JWT)", _REINJECT)
    kube = claims.get("kubernetes.io")
    pod = kube.get("pod") if isinstance(kube, dict) else None
    if not isinstance(kube, dict) or not isinstance(pod, dict):
        return failed(
            "agent.pod_token",
            f"{path} holds a token that is not bound to a pod: the agent refuses it (POD_TOKEN_CLAIMS)",
            "mount a projected service-account token (the injector's volume tokenrelay-oidc-token), "
            "not a Secret's",
        )
    expiry = numeric_claim(claims, "exp")
    if expiry is not None and expiry <= now:
        return failed(
            "agent.pod_token",
            f"the pod's token {path} expired {int(now - expiry)} s ago",
            "the kubelet rewrites it at 80% of its life: is the volume a projected token, and the "
            "kubelet well?",
        )
    audience = claims.get("aud")
    audiences = audience if isinstance(audience, list) else [audience]
    left = f", {int(expiry - now)} s left" if expiry is not None else ""
    return passed(
        "agent.pod_token",
        f"the pod's token {path}: pod {kube['namespace']}/{pod.get('name')}, audience "
        f"{', '.join(map(str, audiences))}{left}",
        fingerprint=fingerprint(raw),
        audiences=audiences,
        subject=claims.get("sub"),
    )


def identity(environ: Mapping[str, str]) -> Check:
    uid = environ.get(IDENTITY_ENV, "")
    if not uid:
        return failed(
            "agent.identity",
            f"{IDENTITY_ENV} is not set: the agent does not know which identity this pod asks for",
            f"set {IDENTITY_ENV}; the injector sets it from the annotation tokenrelay.dev/identity",
        )
    return passed("agent.identity", f"the clients ask for identity {uid}", identity=uid)


async def socket(path: str) -> Check:
    try:
        info = await asyncio.to_thread(Path(path).stat)
    except OSError as exc:
        return failed(
            "agent.socket",
            f"no agent socket at {path} ({exc.strerror or exc}): the node's agent is not running or "
            "not ready",
            f"{_AGENT_PODS}; or point {SOCKET_ENV} at the agent's socket",
        )
    if not stat.S_ISSOCK(info.st_mode):
        return failed("agent.socket", f"{path} is not a socket", f"point {SOCKET_ENV} at the agent's socket")
    return passed("agent.socket", f"the agent's socket is at {path}", path=path)


async def token(path: str, audiences: list[str] | None = None) -> Check:
    """One token, asked for as `tokenrelay token` asks: the pod's token (whose ``audiences`` the fix
    of a refused audience names) sent, the identity named."""
    try:
        reply = await asyncio.to_thread(socketclient.fetch_token, path, None, 15.0)
    except LocalApiError as exc:
        reason = exc.reason
        fix = _FIXES.get(reason, "").format(audience=", ".join(audiences or ["another audience"])) or (
            "the token service refused this service account that identity: its claimMatch must match the "
            f"pod's token's subject; {_AGENT_PODS}, then the agent's log"
        )
        return failed("agent.token", f"the agent gave no token: {exc}", fix, reason=reason)
    return passed(
        "agent.token",
        f"the agent answered a token for {reply.audience}, valid until {reply.expire_time}",
        fingerprint=fingerprint(reply.token),
        audience=reply.audience,
    )


async def check(environ: Mapping[str, str], now: float | None = None) -> list[Check]:
    """Every agent check, in order; the request is tried only when its parts are in place."""
    path = socketclient.socket_path(None, environ)
    checks = [
        pod_token(environ[AGENT_TOKEN_FILE_ENV], time.time() if now is None else now),
        identity(environ),
    ]
    checks.append(await socket(path))
    if any(c.outcome is Outcome.FAILED for c in checks):
        checks.append(skipped("agent.token", "no request to the agent: fix the lines above first"))
    else:
        audiences = checks[0].details.get("audiences")
        checks.append(await token(path, [str(a) for a in audiences] if isinstance(audiences, list) else None))
    return checks
