"""A grpcio server that checks the bearer token on every call; no .proto (generic handlers), reflection on.

``tokenrelay.test.Echo``: ``Unary`` answers ``"<value> <token jti>"`` (StringValue), ``Download``
streams as many bytes as its request asks for, ``Upload`` answers how many bytes it was sent.
A call without a token from the token service, or with a revoked one, ends UNAUTHENTICATED.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, wrappers_pb2
from grpc_reflection.v1alpha import reflection

from tokenrelay.testing import jti

SERVICE = "tokenrelay.test.Echo"
MiB = 1024 * 1024


def _pool() -> descriptor_pool.DescriptorPool:
    """The service's descriptors, for reflection: what grpcurl learns the methods from."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="tokenrelay/test/echo.proto",
        package="tokenrelay.test",
        dependency=["google/protobuf/wrappers.proto"],
        syntax="proto3",
    )
    service = file.service.add(name="Echo")
    string, octets = ".google.protobuf.StringValue", ".google.protobuf.BytesValue"
    service.method.add(name="Unary", input_type=string, output_type=string)
    service.method.add(name="Download", input_type=octets, output_type=octets, server_streaming=True)
    service.method.add(name="Upload", input_type=octets, output_type=octets, client_streaming=True)
    pool.Add(file)
    return pool


def _deny(request: Any, context: grpc.ServicerContext) -> Any:
    context.abort(grpc.StatusCode.UNAUTHENTICATED, "no valid bearer token")


def _denied(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that refuses the call."""
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(_deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(_deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(_deny)
    return grpc.unary_unary_rpc_method_handler(_deny)


@dataclass
class GrpcEcho:
    tokens: list[str] = field(default_factory=list)  # the jti of every call's token, in order
    revoked: set[str] = field(default_factory=set)
    port: int = 0
    server: grpc.Server | None = None

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), interceptors=[_Auth(self)])
        handlers = {
            "Unary": grpc.unary_unary_rpc_method_handler(
                self.unary,
                request_deserializer=wrappers_pb2.StringValue.FromString,
                response_serializer=wrappers_pb2.StringValue.SerializeToString,
            ),
            "Download": grpc.unary_stream_rpc_method_handler(self.download),
            "Upload": grpc.stream_unary_rpc_method_handler(self.upload),
        }
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
        reflection.enable_server_reflection([SERVICE, reflection.SERVICE_NAME], server, pool=_pool())
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.server = server

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(None)

    def unary(
        self, request: wrappers_pb2.StringValue, context: grpc.ServicerContext
    ) -> wrappers_pb2.StringValue:
        return wrappers_pb2.StringValue(value=f"{request.value} {self.tokens[-1]}")

    def download(self, request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        left = int(request)
        block = b"\x5a" * MiB
        while left > 0:
            yield block[: min(MiB, left)]
            left -= MiB

    def upload(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        return str(sum(len(request) for request in requests)).encode()


class _Auth(grpc.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, echo: GrpcEcho) -> None:
        self.echo = echo

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = continuation(details)
        auth = dict(details.invocation_metadata).get("authorization", "")
        token = jti(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ey") else auth
        self.echo.tokens.append(token)
        if not auth.startswith("Bearer ey") or token in self.echo.revoked:
            return _denied(handler)
        return handler
