import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from tokenrelay.emulator.grpcapi import iam_pb2 as _iam_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Advisory(_message.Message):
    __slots__ = ("uid", "vulnerability_id", "aliases", "package", "severity", "status", "fixed_version", "summary", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    VULNERABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    PACKAGE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FIXED_VERSION_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    vulnerability_id: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    package: str
    severity: str
    status: str
    fixed_version: str
    summary: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., vulnerability_id: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., package: _Optional[str] = ..., severity: _Optional[str] = ..., status: _Optional[str] = ..., fixed_version: _Optional[str] = ..., summary: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAdvisoriesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp", "vulnerability_id")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    VULNERABILITY_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: _iam_pb2.Uidp
    vulnerability_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[_iam_pb2.Uidp, _Mapping]] = ..., vulnerability_id: _Optional[str] = ...) -> None: ...

class ListAdvisoriesResponse(_message.Message):
    __slots__ = ("advisories", "next_page_token", "total_count", "skipped")
    ADVISORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    advisories: _containers.RepeatedCompositeFieldContainer[Advisory]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, advisories: _Optional[_Iterable[_Union[Advisory, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetAdvisoryRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...
