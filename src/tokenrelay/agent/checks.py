"""The agent's request policy as data: the checks a token request passes, in order, each a small
class that refuses (``refusals.Refused``) or lets the request on, all applied by one loop
(``apply``). The handler stays thin, as SPIRE's workload handler does: identify the caller, apply
the policy, serve.

Two ordered lists, because the per-pod rate limit (middleware, ``ratelimit``) needs the verified
pod and must count a pod's requests before anything it asks for is judged:

- ``Checks.caller``: who asks. The pod's token (read, signed by the cluster, its issuer, audience,
  expiry, a pod-bound token of this node: ``podtoken.Verifier``), then the pod still running here.
- ``Checks.policy``: what it asks for. An identity named, and no refusal of the token service
  for that (identity, audience) remembered.

Adding a check: a class here with ``async __call__(asking)``, its place in ``Checks.build``, its
rows in ``refusals.CATALOGUE`` (the docs' table follows), and a test that asks the agent through
its socket.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from aiohttp import web

from . import refusals
from .exchanges import Exchanges, Key
from .pods import NodePods
from .podtoken import PodToken, Verifier


class Asking:
    """One token request as the checks see it; each check may fill in what it found out."""

    __slots__ = ("key", "pod", "request")

    def __init__(self, request: web.Request, pod: PodToken | None = None) -> None:
        self.request = request
        self.pod = pod  # set by PodTokenValid
        self.key: Key | None = None  # set by IdentityNamed


Check = Callable[[Asking], Awaitable[None]]


async def apply(checks: Sequence[Check], asking: Asking) -> None:
    """Each check in order; the first refusal ends it (raises ``refusals.Refused``)."""
    for check in checks:
        await check(asking)


# -- who asks ----------------------------------------------------------------------------------


class PodTokenValid:
    """The pod's token: readable, signed with the cluster's key, for us, unexpired, of this node."""

    __slots__ = ("_verifier",)

    def __init__(self, verifier: Verifier) -> None:
        self._verifier = verifier

    async def __call__(self, asking: Asking) -> None:
        asking.pod = await self._verifier.verify(asking.request.headers.get("Authorization"))


class PodRunsHere:
    """The token's pod runs on this node now (a pod the watch has not told of yet is waited for)."""

    __slots__ = ("_pods",)

    def __init__(self, pods: NodePods) -> None:
        self._pods = pods

    async def __call__(self, asking: Asking) -> None:
        pod = asking.pod
        assert pod is not None  # precondition: PodTokenValid passed
        if not self._pods.running(pod.pod_uid) and not await self._pods.wait_for(pod.pod_uid):
            raise refusals.POD_GONE.refuse(namespace=pod.namespace, pod=pod.pod_name, uid=pod.pod_uid)


# -- what it asks for --------------------------------------------------------------------------


class IdentityNamed:
    """The request names an identity (``?identity=``); the audience defaults to the --api-url."""

    __slots__ = ("_default_audience",)

    def __init__(self, default_audience: str) -> None:
        self._default_audience = default_audience

    async def __call__(self, asking: Asking) -> None:
        query = asking.request.query
        identity = query.get("identity", "")
        if not identity:
            raise refusals.IDENTITY_MISSING.refuse()
        pod = asking.pod
        assert pod is not None  # precondition: PodTokenValid passed
        audience = query.get("audience") or self._default_audience
        asking.key = Key(pod.namespace, pod.service_account, identity, audience)


class NotRefusedLately:
    """The token service has not just refused this account that identity or audience: its words
    from memory, for --refusal-ttl, with no exchange."""

    __slots__ = ("_exchanges",)

    def __init__(self, exchanges: Exchanges) -> None:
        self._exchanges = exchanges

    async def __call__(self, asking: Asking) -> None:
        assert asking.key is not None  # precondition: IdentityNamed passed
        refused = self._exchanges.refusal(asking.key)
        if refused is not None:
            raise refusals.EXCHANGE_REFUSED.refuse(reason=refused.reason, message=refused.message)


@dataclass(frozen=True, slots=True)
class Checks:
    """The two ordered lists, built once for the agent."""

    caller: tuple[Check, ...]
    policy: tuple[Check, ...]

    @classmethod
    def build(cls, verifier: Verifier, pods: NodePods, exchanges: Exchanges, default_audience: str) -> Checks:
        return cls(
            caller=(PodTokenValid(verifier), PodRunsHere(pods)),
            policy=(IdentityNamed(default_audience), NotRefusedLately(exchanges)),
        )
