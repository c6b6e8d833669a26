"""The gRPC methods the emulator serves, each carried out by the JSON API.

Every method of the services in ``iam.proto`` and ``registry.proto`` is found from the descriptors,
so there is no generated servicer code to keep in step: a call decodes its request message, makes the
JSON API's HTTP call for it (``routes``, ``transcode``) on the emulator itself, and encodes the answer
or the error. The caller's ``authorization`` metadata is the HTTP call's ``Authorization`` header.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import aiohttp
from google.protobuf import descriptor_pool, message_factory
from google.protobuf.descriptor import MethodDescriptor, ServiceDescriptor
from google.protobuf.message import DecodeError, Message
from google.rpc import status_pb2
from yarl import URL

from ..errors import IAM_DOMAIN
from . import iam_pb2, registry_pb2, vulnerabilities_pb2
from .routes import Route, route_for
from .transcode import MissingField, from_http, invalid_argument, to_http

FILES = (iam_pb2.DESCRIPTOR, registry_pb2.DESCRIPTOR, vulnerabilities_pb2.DESCRIPTOR)
DEFAULT_TIMEOUT = 30.0


def services() -> Iterator[ServiceDescriptor]:
    for file in FILES:
        yield from file.services_by_name.values()


def message_class(full_name: str) -> type[Message]:
    return message_factory.GetMessageClass(descriptor_pool.Default().FindMessageTypeByName(full_name))


@dataclass(frozen=True, slots=True)
class Method:
    path: str  # "/iam.v2beta1.Groups/ListGroups"
    route: Route
    request: type[Message]
    answer: type[Message]

    @classmethod
    def of(cls, service: ServiceDescriptor, method: MethodDescriptor) -> Method:
        return cls(
            f"/{service.full_name}/{method.name}",
            route_for(service, method),
            message_class(method.input_type.full_name),
            message_class(method.output_type.full_name),
        )


class Methods:
    """The unary methods by their HTTP/2 path, and the JSON API client that carries them out."""

    def __init__(self, base_url: Callable[[], str]) -> None:
        self._base_url = base_url
        self._session: aiohttp.ClientSession | None = None
        self.services = [service.full_name for service in services()]
        self.by_path = {
            m.path: m for service in services() for m in (Method.of(service, d) for d in service.methods)
        }

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # no connection limit: the emulator calls itself once per call, on loopback
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(
        self, method: Method, payload: bytes, authorization: str | None, timeout: float | None
    ) -> bytes | status_pb2.Status:
        """The encoded answer to one call, or the Status it fails with."""
        request = method.request()
        try:
            request.ParseFromString(payload)
            http = to_http(method.route, request)
        except DecodeError:
            return status_pb2.Status(code=13, message="Internal error: the request message does not decode")
        except MissingField as missing:
            return invalid_argument(missing.field, "required", IAM_DOMAIN)
        headers = {"Accept": "application/json"}
        if http.body is not None:
            headers["Content-Type"] = "application/json"
        if authorization is not None:
            headers["Authorization"] = authorization
        limit = aiohttp.ClientTimeout(total=timeout or DEFAULT_TIMEOUT)
        url = URL(self._base_url() + http.target, encoded=True)  # as built: yarl resolves dot-segments
        try:
            async with self.session().request(
                http.method, url, data=http.body, headers=headers, timeout=limit
            ) as response:
                body = await response.read()
        except TimeoutError:
            return status_pb2.Status(code=4, message="Deadline exceeded: the JSON API did not answer in time")
        answer = method.answer()
        error = from_http(response.status, body, answer)
        return error if error is not None else answer.SerializeToString()
