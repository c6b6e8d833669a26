"""``tokenrelay inject``: the webhook's mutation, offline, on multi-document YAML (for GitOps and review).

Every Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and CronJob (and each item of a
``List``) gets the same ``add`` operations the webhook would send for its pods, applied to its pod
template. Any other document, and any workload already injected or labelled
``tokenrelay.dev/inject: disabled``, is written back byte for byte as it was read, comments included;
an injected document is re-serialized (its comments are lost). Exit status: 0 done, 1 a workload was
refused (each reason on stderr, nothing on stdout), 2 bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from ..errors import ConfigError, InjectionRefused
from ..options import Option, add_options
from . import mutation, settings

# kind -> JSON pointer of its pod template ("" for a Pod itself)
TEMPLATES = {
    "Pod": "",
    "Deployment": "/spec/template",
    "StatefulSet": "/spec/template",
    "DaemonSet": "/spec/template",
    "ReplicaSet": "/spec/template",
    "Job": "/spec/template",
    "CronJob": "/spec/jobTemplate/spec/template",
}
_SEPARATOR = re.compile(r"^---[ \t]*(#.*)?$", re.MULTILINE)


OPTIONS: tuple[Option, ...] = (
    Option(
        "filename",
        "The YAML to read; - for standard input.",
        kind="path",
        default="-",
        metavar="FILE",
        variable=None,
        short="-f",
    ),
    Option(
        "identity",
        "The identity of workloads without the tokenrelay.dev/identity annotation.",
        metavar="UID",
        variable=None,
    ),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)
    settings.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        injector = settings.injector(args)
        text = sys.stdin.read() if args.filename == "-" else Path(args.filename).read_text()
    except ConfigError as exc:
        print(f"tokenrelay inject: {exc}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as exc:
        print(f"tokenrelay inject: -f/--filename: cannot read {args.filename}: {exc}", file=sys.stderr)
        return 2
    return inject_text(text, injector, args.identity, sys.stdout, sys.stderr)


def inject_text(
    text: str, injector: mutation.Injector, identity: str | None, out: TextIO, err: TextIO
) -> int:
    """Write ``text`` with every workload injected to ``out``; refusals go to ``err``."""
    import yaml

    chunks = [chunk for chunk in split_documents(text) if chunk.strip()]
    written: list[str] = []
    refusals: list[str] = []
    for number, chunk in enumerate(chunks, start=1):
        try:
            document = yaml.safe_load(chunk)
        except yaml.YAMLError as exc:
            print(f"tokenrelay inject: document {number} is not YAML: {exc}".replace("\n", " "), file=err)
            return 2
        changed = False
        for ops in _patches(document, injector, identity, refusals, number):
            mutation.apply(document, ops)
            changed = changed or bool(ops)
        written.append(yaml.safe_dump(document, sort_keys=False) if changed else chunk)
    if refusals:
        for line in refusals:
            print(f"tokenrelay inject: {line}", file=err)
        return 1
    out.write("---\n".join(_terminated(chunk) for chunk in written))
    return 0


def _terminated(chunk: str) -> str:
    return chunk if chunk.endswith("\n") else chunk + "\n"


def split_documents(text: str) -> list[str]:
    """The documents of a YAML stream as text, split at ``---`` lines (the separators dropped)."""
    parts = _SEPARATOR.split(text)
    # re.split interleaves the (optional) comment group: keep the documents only
    return [part.lstrip("\n") for part in parts[::2] if part is not None]


def _patches(
    document: Any, injector: mutation.Injector, identity: str | None, refusals: list[str], number: int
) -> Iterator[list[mutation.Op]]:
    if not isinstance(document, dict):
        return
    kind = document.get("kind")
    if kind == "List" and isinstance(document.get("items"), list):
        for i, item in enumerate(document["items"]):
            for ops in _patches(item, injector, identity, refusals, number):
                yield [{**op, "path": f"/items/{i}{op['path']}"} for op in ops]
        return
    if kind not in TEMPLATES or not isinstance(document.get("metadata"), dict | None):
        return
    base = TEMPLATES[kind]
    template: Any = document
    for part in base.split("/")[1:]:
        template = template.get(part) if isinstance(template, dict) else None
    name = f"{kind}/{(document.get('metadata') or {}).get('name', '?')} (document {number})"
    if not isinstance(template, dict):
        refusals.append(f"{name}: has no pod template at {base}")
        return
    try:
        yield mutation.mutate(template, injector, base=base, identity=identity).ops
    except InjectionRefused as exc:
        refusals.append(f"{name}: {exc}")
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        # YAML of the wrong shape (a list where Kubernetes has a map): the API server would refuse it too
        refusals.append(f"{name}: not a valid pod template at {base or '/'} ({type(exc).__name__}: {exc})")
