import datetime

from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Uidp(_message.Message):
    __slots__ = ("descendants_of", "children_of")
    DESCENDANTS_OF_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_OF_FIELD_NUMBER: _ClassVar[int]
    descendants_of: str
    children_of: str
    def __init__(self, descendants_of: _Optional[str] = ..., children_of: _Optional[str] = ...) -> None: ...

class Group(_message.Message):
    __slots__ = ("uid", "name", "description", "resource_limits", "verified", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_LIMITS_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    resource_limits: _struct_pb2.Struct
    verified: bool
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., resource_limits: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., verified: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp", "name")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    name: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("groups", "next_page_token", "total_count", "skipped")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[Group]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, groups: _Optional[_Iterable[_Union[Group, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetGroupRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateGroupRequest(_message.Message):
    __slots__ = ("parent", "group")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    parent: str
    group: Group
    def __init__(self, parent: _Optional[str] = ..., group: _Optional[_Union[Group, _Mapping]] = ...) -> None: ...

class UpdateGroupRequest(_message.Message):
    __slots__ = ("group", "update_mask")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    group: Group
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, group: _Optional[_Union[Group, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class ClaimMatch(_message.Message):
    __slots__ = ("issuer", "subject")
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    issuer: str
    subject: str
    def __init__(self, issuer: _Optional[str] = ..., subject: _Optional[str] = ...) -> None: ...

class Identity(_message.Message):
    __slots__ = ("uid", "name", "description", "last_seen_time", "claim_match", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_TIME_FIELD_NUMBER: _ClassVar[int]
    CLAIM_MATCH_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    last_seen_time: _timestamp_pb2.Timestamp
    claim_match: ClaimMatch
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., last_seen_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., claim_match: _Optional[_Union[ClaimMatch, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListIdentitiesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ...) -> None: ...

class ListIdentitiesResponse(_message.Message):
    __slots__ = ("identities", "next_page_token", "total_count", "skipped")
    IDENTITIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    identities: _containers.RepeatedCompositeFieldContainer[Identity]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, identities: _Optional[_Iterable[_Union[Identity, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetIdentityRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateIdentityRequest(_message.Message):
    __slots__ = ("parent", "identity")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    parent: str
    identity: Identity
    def __init__(self, parent: _Optional[str] = ..., identity: _Optional[_Union[Identity, _Mapping]] = ...) -> None: ...

class UpdateIdentityRequest(_message.Message):
    __slots__ = ("identity", "update_mask")
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    identity: Identity
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, identity: _Optional[_Union[Identity, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteIdentityRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class Role(_message.Message):
    __slots__ = ("uid", "name", "description", "capabilities", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListRolesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp", "name")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    name: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class ListRolesResponse(_message.Message):
    __slots__ = ("roles", "next_page_token", "total_count", "skipped")
    ROLES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedCompositeFieldContainer[Role]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, roles: _Optional[_Iterable[_Union[Role, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetRoleRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateRoleRequest(_message.Message):
    __slots__ = ("parent", "role")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    parent: str
    role: Role
    def __init__(self, parent: _Optional[str] = ..., role: _Optional[_Union[Role, _Mapping]] = ...) -> None: ...

class UpdateRoleRequest(_message.Message):
    __slots__ = ("role", "update_mask")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    role: Role
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, role: _Optional[_Union[Role, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteRoleRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class IdentityRef(_message.Message):
    __slots__ = ("uid", "name", "description", "subject", "issuer")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    subject: str
    issuer: str
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., subject: _Optional[str] = ..., issuer: _Optional[str] = ...) -> None: ...

class ResourceRef(_message.Message):
    __slots__ = ("uid", "name", "description")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class RoleBinding(_message.Message):
    __slots__ = ("uid", "identity", "group", "role", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    identity: IdentityRef
    group: ResourceRef
    role: ResourceRef
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., identity: _Optional[_Union[IdentityRef, _Mapping]] = ..., group: _Optional[_Union[ResourceRef, _Mapping]] = ..., role: _Optional[_Union[ResourceRef, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListRoleBindingsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp", "identity_uid", "role_uid")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_UID_FIELD_NUMBER: _ClassVar[int]
    ROLE_UID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    identity_uid: str
    role_uid: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ..., identity_uid: _Optional[str] = ..., role_uid: _Optional[str] = ...) -> None: ...

class ListRoleBindingsResponse(_message.Message):
    __slots__ = ("role_bindings", "next_page_token", "total_count", "skipped")
    ROLE_BINDINGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    role_bindings: _containers.RepeatedCompositeFieldContainer[RoleBinding]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, role_bindings: _Optional[_Iterable[_Union[RoleBinding, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetRoleBindingRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateRoleBindingRequest(_message.Message):
    __slots__ = ("parent", "identity_uid", "role_uid")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_UID_FIELD_NUMBER: _ClassVar[int]
    ROLE_UID_FIELD_NUMBER: _ClassVar[int]
    parent: str
    identity_uid: str
    role_uid: str
    def __init__(self, parent: _Optional[str] = ..., identity_uid: _Optional[str] = ..., role_uid: _Optional[str] = ...) -> None: ...

class UpdateRoleBindingRequest(_message.Message):
    __slots__ = ("uid", "role_uid", "update_mask")
    UID_FIELD_NUMBER: _ClassVar[int]
    ROLE_UID_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    uid: str
    role_uid: str
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, uid: _Optional[str] = ..., role_uid: _Optional[str] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteRoleBindingRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class Oidc(_message.Message):
    __slots__ = ("issuer",)
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    issuer: str
    def __init__(self, issuer: _Optional[str] = ...) -> None: ...

class IdentityProvider(_message.Message):
    __slots__ = ("uid", "name", "description", "oidc", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    OIDC_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    oidc: Oidc
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., oidc: _Optional[_Union[Oidc, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListIdentityProvidersRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ...) -> None: ...

class ListIdentityProvidersResponse(_message.Message):
    __slots__ = ("identity_providers", "next_page_token", "total_count", "skipped")
    IDENTITY_PROVIDERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    identity_providers: _containers.RepeatedCompositeFieldContainer[IdentityProvider]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, identity_providers: _Optional[_Iterable[_Union[IdentityProvider, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetIdentityProviderRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateIdentityProviderRequest(_message.Message):
    __slots__ = ("parent", "identity_provider")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    parent: str
    identity_provider: IdentityProvider
    def __init__(self, parent: _Optional[str] = ..., identity_provider: _Optional[_Union[IdentityProvider, _Mapping]] = ...) -> None: ...

class UpdateIdentityProviderRequest(_message.Message):
    __slots__ = ("identity_provider", "update_mask")
    IDENTITY_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    identity_provider: IdentityProvider
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, identity_provider: _Optional[_Union[IdentityProvider, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteIdentityProviderRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class AmazonAccount(_message.Message):
    __slots__ = ("account",)
    ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    account: str
    def __init__(self, account: _Optional[str] = ...) -> None: ...

class GoogleProject(_message.Message):
    __slots__ = ("project_id", "project_number")
    PROJECT_ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_NUMBER_FIELD_NUMBER: _ClassVar[int]
    project_id: str
    project_number: str
    def __init__(self, project_id: _Optional[str] = ..., project_number: _Optional[str] = ...) -> None: ...

class AzureApplication(_message.Message):
    __slots__ = ("tenant_id", "client_id")
    TENANT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    tenant_id: str
    client_id: str
    def __init__(self, tenant_id: _Optional[str] = ..., client_id: _Optional[str] = ...) -> None: ...

class AccountAssociation(_message.Message):
    __slots__ = ("uid", "name", "description", "amazon", "google", "azure", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    AMAZON_FIELD_NUMBER: _ClassVar[int]
    GOOGLE_FIELD_NUMBER: _ClassVar[int]
    AZURE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    description: str
    amazon: AmazonAccount
    google: GoogleProject
    azure: AzureApplication
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., description: _Optional[str] = ..., amazon: _Optional[_Union[AmazonAccount, _Mapping]] = ..., google: _Optional[_Union[GoogleProject, _Mapping]] = ..., azure: _Optional[_Union[AzureApplication, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListAccountAssociationsRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ...) -> None: ...

class ListAccountAssociationsResponse(_message.Message):
    __slots__ = ("account_associations", "next_page_token", "total_count", "skipped")
    ACCOUNT_ASSOCIATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    account_associations: _containers.RepeatedCompositeFieldContainer[AccountAssociation]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, account_associations: _Optional[_Iterable[_Union[AccountAssociation, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetAccountAssociationRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateAccountAssociationRequest(_message.Message):
    __slots__ = ("parent", "account_association")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ACCOUNT_ASSOCIATION_FIELD_NUMBER: _ClassVar[int]
    parent: str
    account_association: AccountAssociation
    def __init__(self, parent: _Optional[str] = ..., account_association: _Optional[_Union[AccountAssociation, _Mapping]] = ...) -> None: ...

class UpdateAccountAssociationRequest(_message.Message):
    __slots__ = ("account_association", "update_mask")
    ACCOUNT_ASSOCIATION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    account_association: AccountAssociation
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, account_association: _Optional[_Union[AccountAssociation, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteAccountAssociationRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class GroupInvite(_message.Message):
    __slots__ = ("uid", "role", "expire_time", "single_use", "code", "create_time", "update_time")
    UID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SINGLE_USE_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    uid: str
    role: ResourceRef
    expire_time: _timestamp_pb2.Timestamp
    single_use: bool
    code: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, uid: _Optional[str] = ..., role: _Optional[_Union[ResourceRef, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., single_use: _Optional[bool] = ..., code: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListGroupInvitesRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "order_by", "skip", "uidp")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    SKIP_FIELD_NUMBER: _ClassVar[int]
    UIDP_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    order_by: str
    skip: int
    uidp: Uidp
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order_by: _Optional[str] = ..., skip: _Optional[int] = ..., uidp: _Optional[_Union[Uidp, _Mapping]] = ...) -> None: ...

class ListGroupInvitesResponse(_message.Message):
    __slots__ = ("group_invites", "next_page_token", "total_count", "skipped")
    GROUP_INVITES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COUNT_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    group_invites: _containers.RepeatedCompositeFieldContainer[GroupInvite]
    next_page_token: str
    total_count: int
    skipped: int
    def __init__(self, group_invites: _Optional[_Iterable[_Union[GroupInvite, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_count: _Optional[int] = ..., skipped: _Optional[int] = ...) -> None: ...

class GetGroupInviteRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class CreateGroupInviteRequest(_message.Message):
    __slots__ = ("parent", "role_uid", "expire_time", "single_use")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    ROLE_UID_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SINGLE_USE_FIELD_NUMBER: _ClassVar[int]
    parent: str
    role_uid: str
    expire_time: _timestamp_pb2.Timestamp
    single_use: bool
    def __init__(self, parent: _Optional[str] = ..., role_uid: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., single_use: _Optional[bool] = ...) -> None: ...

class UpdateGroupInviteRequest(_message.Message):
    __slots__ = ("uid", "expire_time", "single_use", "update_mask")
    UID_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    SINGLE_USE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    uid: str
    expire_time: _timestamp_pb2.Timestamp
    single_use: bool
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, uid: _Optional[str] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., single_use: _Optional[bool] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class DeleteGroupInviteRequest(_message.Message):
    __slots__ = ("uid",)
    UID_FIELD_NUMBER: _ClassVar[int]
    uid: str
    def __init__(self, uid: _Optional[str] = ...) -> None: ...

class AcceptGroupInviteRequest(_message.Message):
    __slots__ = ("uid", "code")
    UID_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    uid: str
    code: str
    def __init__(self, uid: _Optional[str] = ..., code: _Optional[str] = ...) -> None: ...
