"""The gRPC server: every method of the services in ``iam.proto`` and ``registry.proto``, with reflection.

Each method is a generic handler built from the service descriptors, so there is no generated
servicer code to keep in step: the handler transcodes the call onto the JSON API at ``base_url``
(the emulator itself, on loopback), carrying the caller's ``authorization`` metadata as its
``Authorization`` header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import aiohttp
import grpc
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.rpc import status_pb2
from grpc_reflection.v1alpha import reflection

from ..errors import IAM_DOMAIN
from . import iam_pb2, registry_pb2
from .routes import route_for
from .transcode import MissingField, from_http, invalid_argument, to_http

FILES = (iam_pb2.DESCRIPTOR, registry_pb2.DESCRIPTOR)
STATUS_DETAILS_KEY = "grpc-status-details-bin"
_CODES = {code.value[0]: code for code in grpc.StatusCode}


def services() -> Iterator[ServiceDescriptor]:
    for file in FILES:
        yield from file.services_by_name.values()


def service_names() -> list[str]:
    return [service.full_name for service in services()]


class GrpcFront:
    """grpcio's asyncio server for the emulator's services, on a Unix socket the listener feeds."""

    def __init__(self, base_url: Callable[[], str]) -> None:
        self._base_url = base_url
        self._session: aiohttp.ClientSession | None = None
        self._server: grpc.aio.Server | None = None

    async def start(self, address: str) -> None:
        """Serve on ``address`` (``unix:/path``)."""
        # no connection limit: the emulator calls itself once per gRPC call, on loopback
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers([self._handler(service) for service in services()])
        reflection.enable_server_reflection([*service_names(), reflection.SERVICE_NAME], server)
        if server.add_insecure_port(address) == 0:
            raise OSError(f"gRPC: cannot listen on {address}")
        await server.start()
        self._server = server

    async def stop(self, grace: float = 1.0) -> None:
        if self._server is not None:
            await self._server.stop(grace)
            self._server = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _handler(self, service: ServiceDescriptor) -> grpc.GenericRpcHandler:
        handlers = {
            method.name: grpc.unary_unary_rpc_method_handler(
                self._unary(service, method),
                request_deserializer=_message_class(method.input_type.full_name).FromString,
                response_serializer=_serialize,
            )
            for method in service.methods
        }
        return grpc.method_handlers_generic_handler(service.full_name, handlers)

    def _unary(
        self, service: ServiceDescriptor, method: MethodDescriptor
    ) -> Callable[[Message, grpc.aio.ServicerContext[Message, Message]], object]:
        fields = frozenset(field.name for field in method.input_type.fields)
        route = route_for(service.full_name, method.name, fields)
        answer_class = _message_class(method.output_type.full_name)

        async def call(request: Message, context: grpc.aio.ServicerContext[Message, Message]) -> Message:
            try:
                http = to_http(route, request)
            except MissingField as missing:
                await _abort(context, invalid_argument(missing.field, "required", IAM_DOMAIN))
                raise AssertionError("unreachable") from None  # abort raises
            headers = {"Accept": "application/json"}
            if http.body is not None:
                headers["Content-Type"] = "application/json"
            authorization = _metadata(context, "authorization")
            if authorization is not None:
                headers["Authorization"] = authorization
            remaining = context.time_remaining()
            timeout = aiohttp.ClientTimeout(total=remaining if remaining is not None else 30.0)
            assert self._session is not None
            async with self._session.request(
                http.method, self._base_url() + http.target, data=http.body, headers=headers, timeout=timeout
            ) as response:
                body = await response.read()
            answer = answer_class()
            error = from_http(response.status, body, answer)
            if error is not None:
                await _abort(context, error)
            return answer

        return call


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _message_class(full_name: str) -> type[Message]:
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(full_name))


def _metadata(context: grpc.aio.ServicerContext[Message, Message], key: str) -> str | None:
    for name, value in context.invocation_metadata() or ():
        if name == key and isinstance(value, str):
            return value
    return None


async def _abort(context: grpc.aio.ServicerContext[Message, Message], status: status_pb2.Status) -> None:
    code = _CODES.get(status.code, grpc.StatusCode.UNKNOWN)
    await context.abort(
        code, status.message, trailing_metadata=((STATUS_DETAILS_KEY, status.SerializeToString()),)
    )
