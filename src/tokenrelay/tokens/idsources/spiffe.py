"""SPIFFE: a JWT-SVID for our audience from the Workload API at every exchange.

``SpiffeWorkloadAPI/FetchJWTSVID`` (the published ``workload.proto``, committed beside this module)
at ``SPIFFE_ENDPOINT_SOCKET`` (``unix:///run/spire/agent-sockets/api.sock``, or ``tcp://IP:PORT``),
with the ``workload.spiffe.io: true`` metadata every Workload API call must carry, for
``--id-token-audience``; the first SVID answered is the workload's (as go-spiffe's ``FetchJWTSVID``).
A refusal quotes the agent's status and words; the call is bounded by the exchange timeout, so an
agent that accepts and never answers costs that, then one line.

Why grpcio (the ``spiffe`` extra, ``pip install 'tokenrelay[spiffe]'``) rather than a hand-written
client over the h2 and protobuf the package already has: a correct gRPC client is more than one
framed message on a stream: the connection preface and settings, flow control, trailers-only
refusals, ``grpc-status``/``grpc-message`` decoding, deadlines, and the ``unix:`` target forms the
SPIFFE spec borrows from gRPC's naming. grpcio does all of that as the SPIFFE libraries and SPIRE's
own tests rely on, in about ten lines here; a hand-written client would be a few hundred lines of
protocol to keep right, for one unary call. grpcio is imported by this module only, at the first read
(so ``tokenrelay run`` with another source never loads it); the messages are protobuf's, which the
package already depends on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ...errors import ConfigError, IdTokenError
from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from .base import IdToken, Source, SourceInputs, checked
from .httpfetch import platform_words

SOCKET_VARIABLE = "SPIFFE_ENDPOINT_SOCKET"
METHOD = "/SpiffeWorkloadAPI/FetchJWTSVID"
SECURITY_HEADER = ("workload.spiffe.io", "true")


def grpc_target(endpoint: str) -> str:
    """gRPC's target for a ``SPIFFE_ENDPOINT_SOCKET`` value; ValueError saying what is wrong with it.

    The SPIFFE Workload Endpoint spec: ``unix:`` with an absolute path and nothing else, or ``tcp:``
    with an IP address and a port."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    if parts.scheme == "unix":
        if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
            raise ValueError("a unix: address is unix:///ABSOLUTE/PATH")
        return f"unix://{parts.path}"
    if parts.scheme == "tcp":
        try:
            host, port = parts.hostname, parts.port
        except ValueError:
            host = port = None
        if not host or port is None or parts.path not in ("", "/"):
            raise ValueError("a tcp: address is tcp://IP:PORT")
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    raise ValueError("the scheme is unix: or tcp:")


@dataclass(slots=True)
class SpiffeSource(Source):
    """The SPIFFE Workload API's FetchJWTSVID, at SPIFFE_ENDPOINT_SOCKET."""

    name = "spiffe"
    platform = "SPIFFE"
    mints = True
    needs = ("grpc", "grpcio", "spiffe")
    setup = f"run a SPIFFE Workload API (a SPIRE agent) and set {SOCKET_VARIABLE} to its socket"

    endpoint: str
    target: str
    audience: str
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = ""

    def __post_init__(self) -> None:
        self.description = f"the SPIFFE Workload API at {self.endpoint} ({SOCKET_VARIABLE})"

    @classmethod
    def build(cls, inputs: SourceInputs) -> SpiffeSource:
        endpoint = inputs.environ.get(SOCKET_VARIABLE, "")
        if not endpoint:
            raise ConfigError(
                f"the spiffe OIDC token source needs {SOCKET_VARIABLE}: the Workload API's socket, "
                "e.g. unix:///run/spire/agent-sockets/api.sock"
            )
        try:
            target = grpc_target(endpoint)
        except ValueError as exc:
            raise ConfigError(
                f"{SOCKET_VARIABLE}={endpoint!r} is not a Workload API address: {exc}"
            ) from None
        cls.require()
        return cls(endpoint, target, inputs.audience, inputs.timeout, inputs.wall)

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        return f"{SOCKET_VARIABLE} is set" if environ.get(SOCKET_VARIABLE) else None

    async def read(self) -> IdToken:
        import grpc

        from . import workload_pb2

        # One channel per read: the agent may restart between exchanges, and a Unix socket connects
        # in microseconds.
        async with grpc.aio.insecure_channel(self.target) as channel:
            fetch = channel.unary_unary(
                METHOD,
                request_serializer=workload_pb2.JWTSVIDRequest.SerializeToString,
                response_deserializer=workload_pb2.JWTSVIDResponse.FromString,
            )
            try:
                answer = await fetch(
                    workload_pb2.JWTSVIDRequest(audience=[self.audience]),
                    metadata=(SECURITY_HEADER,),
                    timeout=self.timeout,
                )
            except grpc.aio.AioRpcError as exc:
                raise IdTokenError(self._failure(exc.code(), exc.details() or "")) from None
        if not answer.svids:
            raise IdTokenError(f"{self.description} answered no JWT-SVID")
        return checked(answer.svids[0].svid, self.description, self.wall)

    def _failure(self, code: object, details: str) -> str:
        import grpc

        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"{self.description} did not answer within {self.timeout:g}s"
        words = platform_words(details.encode())
        if code == grpc.StatusCode.UNAVAILABLE:
            return f"cannot reach {self.description}: {words}"
        name = getattr(code, "name", str(code))
        return f"{self.description} refused FetchJWTSVID: {name}: {words}"

    def fix(self) -> str:
        return (
            f"{self.setup}; the agent must have a registration entry for this workload (a refusal "
            "'no identity issued' says it has none)"
        )
