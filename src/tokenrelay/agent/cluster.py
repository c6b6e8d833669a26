"""What the agent asks of the API server, through lightkube's configured HTTP client (in-cluster
credentials, else $KUBECONFIG): the service-account issuer and its keys, and the start-up taint."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .jwks import MAX_JWKS_BYTES, KeysUnavailable, Load

if TYPE_CHECKING:
    from lightkube import AsyncClient
    from lightkube.config.kubeconfig import SingleConfig

log = logging.getLogger("tokenrelay.agent")

STARTUP_TAINT = "tokenrelay.dev/agent-not-ready"


def kube_config() -> SingleConfig:
    """In-cluster credentials (the DaemonSet's service account), else $KUBECONFIG; ConfigError."""
    from lightkube.config.kubeconfig import KubeConfig

    try:
        config = KubeConfig.from_env().get()
    except Exception as exc:  # lightkube's ConfigError and whatever a broken kubeconfig raises
        raise ConfigError(
            "tokenrelay agent needs the Kubernetes API: run it in a pod with its service account "
            f"(KUBERNETES_SERVICE_HOST), or set KUBECONFIG: {exc}"
        ) from None
    if config is None:
        raise ConfigError(
            "tokenrelay agent needs the Kubernetes API: no in-cluster credentials, no KUBECONFIG"
        )
    return config


async def _get(config: SingleConfig, path: str) -> bytes:
    from lightkube.config.client_adapter import AsyncClient as HttpClient
    from lightkube.config.client_adapter import ConnectionParams

    try:
        async with HttpClient(config, ConnectionParams()) as http:
            response = await http.get(path)
            if response.status_code != 200:
                raise KeysUnavailable(f"the API server answered HTTP {response.status_code} on {path}")
            return response.content[: MAX_JWKS_BYTES + 1]
    except KeysUnavailable:
        raise
    except Exception as exc:  # httpx's errors: the API server is not there yet
        raise KeysUnavailable(f"cannot reach the API server for {path}: {type(exc).__name__}") from None


def api_keys(config: SingleConfig) -> Load:
    """The JWKS from the API server's /openid/v1/jwks."""

    async def load() -> bytes:
        return await _get(config, "/openid/v1/jwks")

    return load


def file_keys(path: str) -> Load:
    """The JWKS from a file, read afresh at every load (a ConfigMap's update reaches it)."""

    async def load() -> bytes:
        try:
            return await asyncio.to_thread(lambda: Path(path).read_bytes()[: MAX_JWKS_BYTES + 1])
        except OSError as exc:
            raise KeysUnavailable(f"--cluster-jwks-file: cannot read {path}: {exc.strerror}") from None

    return load


async def issuer(config: SingleConfig) -> str:
    """The issuer the API server states in /.well-known/openid-configuration."""
    import json

    raw = await _get(config, "/.well-known/openid-configuration")
    try:
        found: Any = json.loads(raw).get("issuer")
    except (ValueError, AttributeError):
        found = None
    if not isinstance(found, str) or not found:
        raise KeysUnavailable("the API server's /.well-known/openid-configuration states no issuer")
    return found


async def remove_startup_taint(client: AsyncClient, node: str) -> bool:
    """Remove the start-up taint from ``node``; True when it was there. A JSON patch that tests the
    list it replaces, so a taint another controller adds meanwhile is not lost (a 422: try again)."""
    from lightkube.resources.core_v1 import Node
    from lightkube.types import PatchType

    found = await client.get(Node, node)
    taints = list(found.spec.taints or []) if found.spec is not None else []
    keep = [taint for taint in taints if taint.key != STARTUP_TAINT]
    if len(keep) == len(taints):
        return False
    patch = [
        {"op": "test", "path": "/spec/taints", "value": [t.to_dict() for t in taints]},
        {"op": "replace", "path": "/spec/taints", "value": [t.to_dict() for t in keep]},
    ]
    await client.patch(Node, node, patch, patch_type=PatchType.JSON)
    return True
