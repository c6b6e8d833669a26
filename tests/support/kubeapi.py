"""A fake Kubernetes API server on loopback: the few endpoints ``tokenrelay webhook`` calls, kept only
for what the real one (tests/support/k8s.py) cannot show: faults (``fail``, ``race``) and a version
other than its own.

GET/PUT of one Secret (PUT honours ``metadata.resourceVersion``: a stale one gets 409 Conflict, as
from the real API server), GET/PATCH (RFC 6902 JSON patch) of MutatingWebhookConfigurations, and
GET /version. Every call is recorded; ``fail`` makes the next calls answer 500.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from aiohttp import web

NAMESPACE, SECRET, CONFIGURATION = "tokenrelay-system", "tokenrelay-injector-tls", "tokenrelay-injector"


def configuration() -> dict[str, Any]:
    hook = {
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "clientConfig": {
            "service": {"name": "tokenrelay-injector", "namespace": NAMESPACE, "path": "/mutate"}
        },
        "rules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
        ],
    }
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION, "resourceVersion": "1"},
        "webhooks": [
            {**hook, "name": "namespace.inject.tokenrelay.dev"},
            {**hook, "name": "pod.inject.tokenrelay.dev"},
        ],
    }


def kubeconfig(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "webhook", "user": {"token": "not-a-secret"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "webhook"}}],
        "current-context": "fake",
    }


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    text = json.dumps({**body, "message": message, "reason": reason, "code": code})
    # exactly this Content-Type, as the API server sends it (clients match it to decode a Status)
    return web.Response(body=text.encode(), status=code, headers={"Content-Type": "application/json"})


class FakeApi:
    def __init__(
        self, namespace: str, secret: str, configuration: dict[str, Any], version: str = "v1.30.4"
    ) -> None:
        self.namespace = namespace
        self.version = version
        self.secrets: dict[str, dict[str, Any]] = {
            secret: {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret, "namespace": namespace, "resourceVersion": "1"},
                "type": "Opaque",
            }
        }
        self.configurations = {configuration["metadata"]["name"]: copy.deepcopy(configuration)}
        self.calls: list[str] = []
        self.fail = 0  # answer this many next calls with 500
        self.race = False  # bump the Secret's resourceVersion before the next PUT, as another writer would
        self._version = 1

    def _rv(self) -> str:
        self._version += 1
        return str(self._version)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        base = "/api/v1/namespaces/{ns}/secrets/{name}"
        app.router.add_get(base, self.get_secret)
        app.router.add_put(base, self.put_secret)
        mwc = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"
        app.router.add_get(mwc, self.get_configuration)
        app.router.add_patch(mwc, self.patch_configuration)
        app.router.add_get("/version", self.get_version)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.calls.append(f"{request.method} {request.path}")
        if self.fail:
            self.fail -= 1
            return status(500, "InternalError", "etcdserver: request timed out")
        response: web.StreamResponse = await handler(request)
        return response

    async def get_version(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"major": "1", "minor": self.version.split(".")[1], "gitVersion": self.version}
        )

    async def get_secret(self, request: web.Request) -> web.Response:
        secret = self.secrets.get(request.match_info["name"])
        if secret is None or request.match_info["ns"] != self.namespace:
            return status(404, "NotFound", f'secrets "{request.match_info["name"]}" not found')
        return web.json_response(secret)

    async def put_secret(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.json()
        if self.race:
            self.race = False
            self.secrets[name]["metadata"]["resourceVersion"] = self._rv()
        if body["metadata"].get("resourceVersion") != self.secrets[name]["metadata"]["resourceVersion"]:
            return status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on secrets "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        body["metadata"]["resourceVersion"] = self._rv()
        self.secrets[name] = body
        return web.json_response(body)

    async def get_configuration(self, request: web.Request) -> web.Response:
        found = self.configurations.get(request.match_info["name"])
        if found is None:
            return status(404, "NotFound", "not found")
        return web.json_response(found)

    async def patch_configuration(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if request.content_type != "application/json-patch+json":
            return status(415, "UnsupportedMediaType", request.content_type)
        try:
            patched = jsonpatch.apply_patch(self.configurations[name], await request.json())
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
            return status(422, "Invalid", str(exc))
        patched["metadata"]["resourceVersion"] = self._rv()
        self.configurations[name] = patched
        return web.json_response(patched)
