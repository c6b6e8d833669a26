"""The SPIFFE Workload API as the emulator plays it: ``FetchJWTSVID`` on a Unix socket, for the spiffe source.

A gRPC server (grpcio, the ``spiffe`` extra; loaded only when a socket is asked for) answering
``SpiffeWorkloadAPI/FetchJWTSVID`` with the published ``workload.proto``'s messages, as a SPIRE agent
does: a call without the ``workload.spiffe.io: true`` metadata is refused ``InvalidArgument: security
header missing from request``, one without an audience ``InvalidArgument: audience must be specified``;
else one JWT-SVID for the workload (``SPIFFE_ID``), minted by the emulator's platform issuer with
the audiences asked for. The other methods answer ``Unimplemented``. The messages (protobuf) load
with the server, not with the platform's table.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from ...errors import ConfigError
from .base import Platform

TRUST_DOMAIN = "example.org"
SPIFFE_ID = f"spiffe://{TRUST_DOMAIN}/ns/default/sa/app"  # the Kubernetes workload registrar's shape

SERVICE = "SpiffeWorkloadAPI"
SECURITY_HEADER = ("workload.spiffe.io", "true")


def claims(audience: str) -> dict[str, Any]:
    return {"sub": SPIFFE_ID}


PLATFORM = Platform(
    "spiffe",
    f"https://oidc-discovery.{TRUST_DOMAIN}",
    claims,
    "",
    "https://github.com/spiffe/spiffe/blob/main/standards/JWT-SVID.md",
)


class WorkloadApi:
    """A Workload API server on ``path``, minting JWT-SVIDs through ``mint`` (audience -> token)."""

    def __init__(self, path: str, mint: Callable[[str], str]) -> None:
        self.path = path
        self._mint = mint
        self._server: Any = None

    @property
    def endpoint(self) -> str:
        """What ``SPIFFE_ENDPOINT_SOCKET`` says for this socket."""
        return f"unix://{self.path}"

    async def start(self) -> None:
        try:
            import grpc
        except ImportError:
            raise ConfigError("--spiffe-socket needs grpcio: pip install 'tokenrelay[spiffe]'") from None
        from ...tokens.idsources import workload_pb2

        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(
            self._fetch_jwt_svid,
            request_deserializer=workload_pb2.JWTSVIDRequest.FromString,
            response_serializer=workload_pb2.JWTSVIDResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, {"FetchJWTSVID": handler}),)
        )
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)  # noqa: PTH108  # left by an emulator that was killed
        try:
            server.add_insecure_port(f"unix:{self.path}")
        except RuntimeError:
            raise ConfigError(f"--spiffe-socket: cannot listen on {self.path}") from None
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=None)
            self._server = None

    async def _fetch_jwt_svid(self, request: Any, context: Any) -> Any:
        import grpc

        from ...tokens.idsources import workload_pb2

        if SECURITY_HEADER not in tuple(context.invocation_metadata() or ()):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "security header missing from request")
        if not request.audience:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "audience must be specified")
        if request.spiffe_id and request.spiffe_id != SPIFFE_ID:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no identity issued")
        # the platform issuer signs one audience per token; the first is the one asked for
        svid = workload_pb2.JWTSVID(spiffe_id=SPIFFE_ID, svid=self._mint(request.audience[0]))
        return workload_pb2.JWTSVIDResponse(svids=[svid])
