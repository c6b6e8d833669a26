"""A resource kind is registered whole or not at all: store, HTTP and gRPC faces, access, delete guard."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from tokenrelay.emulator import Emulator, api
from tokenrelay.emulator.errors import ApiError
from tokenrelay.emulator.grpcapi.methods import services
from tokenrelay.emulator.grpcapi.routes import collection
from tokenrelay.emulator.iam import groups
from tokenrelay.emulator.iam.access import OWN, READ, ROLE_BY_NAME
from tokenrelay.emulator.iam.kinds import RECORDS
from tokenrelay.emulator.model import Record, Shape
from tokenrelay.emulator.registry.catalog import Catalog, Tag
from tokenrelay.emulator.registry.tagsapi import tags_kind

DOCS = Path(__file__).resolve().parents[2] / "docs" / "emulator.md"
# a value of each field type the records use; the uid is set apart
SAMPLES: dict[str, Any] = {
    "str": "x",
    "int": 1,
    "bool": True,
    "tuple[str, ...]": ("groups.list",),
    "list[str]": [],
    "dict[str, str]": {},
}


def sample(kind: type[Record], uid: str) -> Record:
    """A record of ``kind`` with ``uid``, whatever its other fields."""
    values = {f.name: SAMPLES[str(f.type)] for f in dataclasses.fields(kind) if f.name != "uid"}
    return kind(uid=uid, **values)


def test_every_stored_kind_has_a_table_and_one_http_kind() -> None:
    """Each kind of iam.kinds.RECORDS has its Store table and one api.KINDS row, and every row has a kind."""
    store = Emulator().store
    for kind in RECORDS:
        assert store.table(kind) is getattr(store, kind.table()), kind.KIND
    assert sorted(k.record.KIND for k in api.KINDS) == sorted(kind.KIND for kind in RECORDS)


def test_every_grpc_service_is_an_http_kind_and_back() -> None:
    """The gRPC services' collections are exactly the paths of the HTTP kinds (the registry's tags too)."""
    kinds = [*api.KINDS, tags_kind(Catalog())]
    assert sorted(collection(service) for service in services()) == sorted(k.path for k in kinds)


def test_every_kind_is_readable_and_its_writers_named() -> None:
    """viewer reads every kind; editor and owner descriptions name the kinds they may write."""
    for kind in RECORDS:
        assert {f"{kind.table()}.list", f"{kind.table()}.get"} <= READ
        if kind.WRITER is not None:
            assert f"{kind.table()}.delete" in OWN
            described = ROLE_BY_NAME[kind.WRITER].description
            assert kind.table().replace("_", " ") in described, (kind.KIND, described)


def test_docs_list_every_kind_in_the_permissions_table() -> None:
    """docs/emulator.md's permissions table names every kind's permissions and who may write them."""
    text = DOCS.read_text()
    every = re.search(r"`list`, `get` of every kind \(([^)]*)\)", text)
    assert every is not None
    assert sorted(every.group(1).split(", ")) == sorted({p.partition(".")[0] for p in READ})
    rows = re.findall(r"^\| ([a-z_, ]+): create.*?\|(.*)\|$", text, re.MULTILINE)
    written = {
        name: "editor" if cells.count("✓") == 2 else "owner"
        for names, cells in rows
        for name in names.split(", ")
    }
    assert written == {kind.table(): kind.WRITER for kind in RECORDS if kind.WRITER is not None}


@pytest.mark.parametrize("kind", [kind for kind in RECORDS if kind.IN_GROUP], ids=lambda kind: kind.KIND)
def test_a_group_holding_any_kind_is_not_deleted(kind: type[Record]) -> None:
    """Deleting a group still holding a record of any kind is refused, naming the kind: none is orphaned."""
    emulator = Emulator()
    org = emulator.organization("acme")
    group = groups.create(emulator.resources, org.uid, {"name": "team"})
    emulator.store.put(sample(kind, emulator.resources.new_uid(group.uid)))
    with pytest.raises(ApiError) as refused:
        groups.delete(emulator.resources, group.uid)
    assert refused.value.message == f"Precondition failed: cannot delete group with child {kind.PLURAL}"
    assert group.uid in emulator.store.groups


@pytest.mark.parametrize("kind", RECORDS, ids=lambda kind: kind.KIND)
def test_every_kind_has_its_rules_module_named_as_its_table(kind: type[Record]) -> None:
    """A kind's rules are the module of iam/ named as its table (iam/role_bindings.py), working on its
    record: a reader finds them by the kind's name."""
    rules = importlib.import_module(f"tokenrelay.emulator.iam.{kind.table()}")
    assert getattr(rules, kind.__name__) is kind


@pytest.mark.parametrize(
    "kind", [kind for kind in (*RECORDS, Tag) if hasattr(kind, "V2")], ids=lambda kind: kind.KIND
)
def test_a_kinds_json_is_made_from_its_declared_shape(kind: type[Record]) -> None:
    """Each field a kind's V2 (and V1) shape declares names an attribute of the record, and its JSON
    has exactly the shape's fields, in the shape's order."""
    record = sample(kind, "0" * 40 + "/" + "1" * 16)
    shapes: list[tuple[Shape, dict[str, Any]]] = [(record.v2_shape(), record.v2())]
    if hasattr(kind, "V1"):
        shapes.append((kind.V1, record.v1()))
    for shape, body in shapes:
        assert [a for a in shape.values() if not hasattr(record, a)] == []
        assert list(body) == list(dict.fromkeys(field.partition(".")[0] for field in shape))
