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
    kind = request.get("kind") or {}
    pod = request.get("object")
    if (
        kind.get("kind") != "Pod"
        or request.get("operation") != "CREATE"
        or request.get("subResource")
        or not isinstance(pod, Mapping)
    ):
        return out, IGNORED
    namespace = request.get("namespace") or (pod.get("metadata") or {}).get("namespace") or ""
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
