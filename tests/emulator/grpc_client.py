"""A grpcio client of the emulator's port for the tests: calls as an identity, and refusals read back."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import status_pb2


class Client:
    """grpcio calls on the emulator's port, as the identity holding ``token`` (None: no credentials)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.channel = channel

    async def call(self, method: str, request: Message, answer: type[Message], token: str | None) -> Any:
        stub = self.channel.unary_unary(
            method, request_serializer=_serialize, response_deserializer=answer.FromString
        )
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return await stub(request, metadata=metadata, timeout=10)

    async def refusal(
        self, method: str, request: Message, answer: type[Message], token: str | None
    ) -> tuple[grpc.StatusCode, dict[str, Any]]:
        """The call's status code and its google.rpc.Status in JSON, as the HTTP API would send it."""
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await self.call(method, request, answer, token)
        error = raised.value
        details = dict(error.trailing_metadata() or ()).get("grpc-status-details-bin")
        assert isinstance(details, bytes), "no google.rpc.Status in the trailers"
        status = json_format.MessageToDict(status_pb2.Status.FromString(details))
        assert status["message"] == error.details()
        return error.code(), status


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()
