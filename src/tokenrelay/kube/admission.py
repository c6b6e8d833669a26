"""AdmissionReview v1 in, AdmissionReview v1 out: the webhook's answer for one pod, as a pure function.

The answer allows the pod with the mutation's JSON patch, allows it untouched (already injected,
opted out, not a pod creation, an excluded namespace), or refuses it with the mutation's reason, so
that a pod which opted in never starts without its sidecar.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Collection, Mapping
from typing import Any

from ..errors import InjectionRefused
from . import mutation

log = logging.getLogger("tokenrelay.webhook")
API_VERSION = "admission.k8s.io/v1"
# results, the label values of tokenrelay_webhook_admissions_total
INJECTED, ALREADY, OPTED_OUT, EXCLUDED, IGNORED, REFUSED = (
    "injected",
    "already_injected",
    "opted_out",
    "excluded_namespace",
    "ignored",
    "refused",
)
RESULTS = (INJECTED, ALREADY, OPTED_OUT, EXCLUDED, IGNORED, REFUSED, "invalid")


class BadReview(ValueError):
    """The request body is not an AdmissionReview v1 with a request uid."""


def answer(
    review: Any, injector: mutation.Injector, excluded: Collection[str] = ()
) -> tuple[dict[str, Any], str]:
    """The AdmissionReview to send back for ``review``, and the result (one of RESULTS)."""
    if not isinstance(review, Mapping) or review.get("apiVersion") != API_VERSION:
        raise BadReview(f"expected an AdmissionReview of apiVersion {API_VERSION}")
    request = review.get("request")
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        raise BadReview("the AdmissionReview has no request.uid")
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    out = {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
    kind = _typed(request, "kind", Mapping, "request.kind") or {}
    pod = _typed(request, "object", Mapping, "request.object")
    metadata = _typed(pod or {}, "metadata", Mapping, "request.object.metadata") or {}
    for key in ("name", "generateName", "namespace"):
        _typed(metadata, key, str, f"request.object.metadata.{key}")
    if (
        kind.get("kind") != "Pod"
        or request.get("operation") != "CREATE"
        or request.get("subResource")
        or pod is None
    ):
        return out, IGNORED
    namespace = _typed(request, "namespace", str, "request.namespace") or metadata.get("namespace") or ""
    if namespace in excluded:
        return out, EXCLUDED
    try:
        result = mutation.mutate(pod, injector)
    except Exception as exc:
        reason = str(exc) if isinstance(exc, InjectionRefused) else _internal(exc)
        response["allowed"] = False
        response["status"] = {
            "code": 403,
            "reason": "Forbidden",
            "message": f"tokenrelay: pod {_name(namespace, pod)} cannot be injected: {reason}",
        }
        return out, REFUSED
    if not result.ops:
        return out, ALREADY if result.result == "already injected" else OPTED_OUT
    response["patchType"] = "JSONPatch"
    response["patch"] = base64.b64encode(json.dumps(result.ops, separators=(",", ":")).encode()).decode()
    return out, INJECTED


def _typed(parent: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """``parent[key]``, None when absent or null; a value of another type than ``kind`` is a BadReview
    (the API server never sends one, so the sender is not an API server: answered 400, not 500)."""
    value = parent.get(key)
    if value is not None and not isinstance(value, kind):
        raise BadReview(f"{where} is {_json_type(value)}, not {_JSON_TYPES[kind]}")
    return value


_JSON_TYPES: dict[type, str] = {Mapping: "an object", str: "a string"}


def _json_type(value: object) -> str:
    for kind, name in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (list, "an array")):
        if isinstance(value, kind):
            return name
    return _JSON_TYPES[Mapping] if isinstance(value, Mapping) else _JSON_TYPES[str]


def pod_name(review: Mapping[str, Any]) -> str | None:
    """The name of the pod of an AdmissionReview that ``answer`` accepted (its generateName when the
    API server has not named it yet), for the log line."""
    request = review["request"]
    metadata: Mapping[str, Any] = (request.get("object") or {}).get("metadata") or {}
    name: str | None = request.get("name") or metadata.get("name") or metadata.get("generateName")
    return name


def _internal(exc: Exception) -> str:
    # The API server decodes pods into their types before calling us, so this is a bug of ours: the
    # pod is refused (it opted in and must not start without its sidecar) with something to report.
    log.exception("mutation failed")
    return f"internal error in the injector ({type(exc).__name__}: {exc}); please report it"


def _name(namespace: str, pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    # Pods of controllers have only a generateName at admission: the API server names them later.
    name = metadata.get("name") or (metadata.get("generateName") or "") + "<generated>"
    return f"{namespace}/{name}"
