"""A gRPC request message as a call on the JSON API, and the JSON API's answer as a gRPC answer.

The proto3 JSON mapping is the bridge: a resource message rendered as JSON is the JSON resource
(``createTime`` a timestamp string, ``totalCount`` a string), so requests and answers cross without a
hand-written field map. Errors cross the same way: the AIP-193 body *is* a ``google.rpc.Status`` in
JSON, so the gRPC client gets the same code, message and typed details as the HTTP client, the
details in ``grpc-status-details-bin`` as every gRPC status library reads them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.field_mask_pb2 import FieldMask
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2, status_pb2

from ...lite.timestamps import format_timestamp
from .routes import Route

# Fields the server sets: a client may echo them back in a resource it read, and they are ignored, as
# AIP-203 says of output-only fields.
OUTPUT_ONLY = frozenset({"uid", "createTime", "updateTime", "lastSeenTime"})

PAGINATION = frozenset({"page_size", "page_token", "order_by", "skip"})

_TEMPLATE = re.compile(r"\{([a-z_]+(?:\.[a-z_]+)*)\}")

# The gRPC codes for an HTTP status that came without an AIP-193 body (gRPC's own HTTP mapping).
_HTTP_TO_GRPC = {400: 13, 401: 16, 403: 7, 404: 12, 429: 14, 502: 14, 503: 14, 504: 14}

__all__ = ["HttpCall", "error_details_pb2", "from_http", "invalid_argument", "to_http"]


@dataclass(frozen=True, slots=True)
class HttpCall:
    method: str
    target: str  # the path and query, percent-encoded
    body: bytes | None


class MissingField(ValueError):
    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


def to_http(route: Route, request: Message) -> HttpCall:
    """The HTTP call ``route`` makes of ``request``; MissingField when a path value is empty."""
    used: set[str] = set()

    def fill(match: re.Match[str]) -> str:
        dotted = match.group(1)
        value: object = request
        for part in dotted.split("."):
            value = getattr(value, part)
        if not isinstance(value, str) or not value:
            raise MissingField(dotted)
        used.add(dotted.partition(".")[0])
        return _uid_path(value)

    path = _TEMPLATE.sub(fill, route.path)
    body: dict[str, object] | None = None
    query: list[tuple[str, str]] = []
    if route.body == "*":
        # every field not in the path is the body, but a field mask: that is always updateMask
        body = {}
        for field, value in request.ListFields():
            if field.name not in used and not isinstance(value, FieldMask):
                body[field.json_name] = _json_value(field, value)
                used.add(field.name)
    elif route.body is not None:
        used.add(route.body)
        rendered = _json(getattr(request, route.body))
        body = {key: value for key, value in rendered.items() if key not in OUTPUT_ONLY}
    for field, value in request.ListFields():
        if field.name not in used:
            query.extend(_query(field, value))
    target = path + ("?" + urlencode(query, quote_via=quote) if query else "")
    return HttpCall(route.method, target, None if body is None else json.dumps(body).encode())


def _uid_path(uid: str) -> str:
    """A uid as path segments that stay inside the collection.

    A uid is a slash-separated path, so its slashes stay; but a ``.`` or ``..`` segment is encoded
    (``%2E``), so that no URL normalisation between here and the JSON API's router can take
    ``../identityProviders/x`` out of the groups: the router decodes it back into the uid it was,
    which names no group, as it would for an HTTP client sending the same uid.
    """
    return "/".join(
        "%2E" * len(segment) if segment in {".", ".."} else quote(segment, safe="")
        for segment in uid.split("/")
    )


def _json_value(field: FieldDescriptor, value: object) -> object:
    if isinstance(value, Timestamp):
        return _timestamp(value)
    if field.message_type is not None and isinstance(value, Message):
        return _json(value)
    return value


def _json(message: Message) -> dict[str, object]:
    """A message in the JSON API's form: proto3 JSON, but timestamps as the API writes them."""
    rendered: dict[str, object] = json_format.MessageToDict(message)
    if message.DESCRIPTOR.full_name.startswith("google.protobuf."):
        return rendered  # a well-known type (Struct, FieldMask): its JSON form is its own
    for field, value in message.ListFields():
        if isinstance(value, Message) and not field.is_repeated:
            rendered[field.json_name] = _json_value(field, value)
    return rendered


def _timestamp(value: Timestamp) -> str:
    """``2026-01-02T03:04:05.000Z``, where proto3 JSON writes a whole second ``...:05Z``: the JSON API
    compares an echoed timestamp with its own text (an invite's unchanged expiry is not re-checked)."""
    return format_timestamp(value.ToNanoseconds() / 1e9)


def _query(field: FieldDescriptor, value: object) -> list[tuple[str, str]]:
    """A request field as the JSON API's query parameters.

    The pagination parameters keep the document's spelling (``page_size``); a message of filters
    flattens to dotted names (``uidp.descendants_of``); every other field is a resource field, named
    as in the JSON resource (``identityUid``, ``updateMask`` with the JSON field names).
    """
    if isinstance(value, FieldMask):
        return [(field.json_name, value.ToJsonString())]
    if isinstance(value, Message):
        return [(f"{field.name}.{name}", text) for name, text in _scalars(value)]
    name = field.name if field.name in PAGINATION else field.json_name
    return [(name, _text(value))]


def _scalars(message: Message) -> list[tuple[str, str]]:
    return [(field.name, _text(value)) for field, value in message.ListFields()]


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def from_http(status: int, body: bytes, answer: Message) -> status_pb2.Status | None:
    """Fill ``answer`` from a 2xx JSON body and return None, or return the error as a Status."""
    try:
        payload = json.loads(body) if body.strip() else {}
    except ValueError:
        payload = None
    if 200 <= status < 300 and isinstance(payload, dict):
        try:
            json_format.ParseDict(payload, answer, ignore_unknown_fields=True)
        except json_format.ParseError as exc:
            return _status(13, f"Internal error: the JSON API's answer does not fit the message: {exc}")
        return None
    if isinstance(payload, dict) and isinstance(payload.get("code"), int):
        return _aip193(payload)
    return _status(_HTTP_TO_GRPC.get(status, 2), f"HTTP {status} from the JSON API")


def _aip193(payload: dict[str, object]) -> status_pb2.Status:
    """An AIP-193 body as a Status, with its typed details where they are known types."""
    status = status_pb2.Status()
    try:
        json_format.ParseDict(payload, status, ignore_unknown_fields=True)
    except json_format.ParseError:
        # a detail of a type this side does not know: keep code and message, drop the details
        status = status_pb2.Status(code=int(str(payload["code"])), message=str(payload.get("message", "")))
    return status


def _status(code: int, message: str) -> status_pb2.Status:
    return status_pb2.Status(code=code, message=message)


def invalid_argument(field: str, description: str, domain: str) -> status_pb2.Status:
    """The emulator's code-3 refusal, for a request that never reached the JSON API."""
    status = _status(3, f"Invalid argument: {field}: {description}")
    info = error_details_pb2.ErrorInfo(reason="INVALID_ARGUMENT", domain=domain)
    bad = error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field=field, description=description)]
    )
    status.details.add().Pack(info)
    status.details.add().Pack(bad)
    return status
