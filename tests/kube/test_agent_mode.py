"""`tokenrelay.dev/mode: agent`: the webhook and `tokenrelay inject` add no container, only the
pod's projected token, the node agent's socket directory and the variables the clients read."""

from __future__ import annotations

import copy
import subprocess
from typing import Any

import pytest
import yaml

from tokenrelay.errors import InjectionRefused
from tokenrelay.kube import admission, mutation, options

from ..support.kube import FIXTURES, INJECTOR, REPO, cli, patched, strip_injection, validate, webhook

EXAMPLE = REPO / "deploy" / "agent" / "example" / "app.yaml"
UID = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4/7c4a8d09ca3762af"
TOKEN_PATH = f"{mutation.TOKEN_DIR}/{mutation.TOKEN_FILE}"
SIDECAR_ONLY = {row.name for row in options.TABLE if row.sidecar_only}
# The real-world pods whose annotations say nothing about the sidecar: in agent mode they are injectable.
AGENT_FIXTURES = [
    name
    for name, f in FIXTURES.items()
    if not f.get("injected") and not SIDECAR_ONLY & set(f["pod"]["metadata"].get("annotations", {}))
]


def agent_pod(**annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "annotations": {options.IDENTITY: UID, options.MODE: "agent", **annotations},
        },
        "spec": {
            "initContainers": [{"name": "migrate", "image": "registry.example.com/migrate:1"}],
            "containers": [
                {"name": "app", "image": "registry.example.com/app:1"},
                {
                    "name": "worker",
                    "image": "registry.example.com/worker:1",
                    "env": [{"name": "A", "value": "1"}],
                },
            ],
        },
    }


def containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]


def test_agent_mode_is_a_row_of_the_annotation_table() -> None:
    """tokenrelay.dev/mode is one row of options.TABLE, sidecar by default, agent or sidecar only."""
    row = options.ANNOTATIONS[options.MODE]
    assert (row.default, row.choices) == ("sidecar", ("sidecar", "agent"))
    assert options.parse({options.IDENTITY: UID}).mode == "sidecar"


@pytest.mark.parametrize("name", AGENT_FIXTURES)
def test_agent_mode_adds_no_container_and_only_adds(name: str) -> None:
    """On every real-world pod, agent mode adds no container (0 bytes of memory per pod), only adds,
    and the injected pod validates against the 1.29-1.32 schemas."""
    pod = copy.deepcopy(FIXTURES[name]["pod"])
    pod["metadata"].setdefault("annotations", {})[options.MODE] = "agent"
    response, result = webhook(copy.deepcopy(pod), FIXTURES[name]["namespace"])
    assert result == admission.INJECTED
    after = patched(pod, response)
    assert [c["name"] for c in containers(after)] == [c["name"] for c in containers(pod)]
    assert strip_injection(after) == pod
    newer = FIXTURES[name].get("newerThanSchema", [])
    if not newer:
        validate(after)


def test_every_container_gets_the_socket_the_token_and_the_identity() -> None:
    """Init and app containers alike see the agent's socket directory read-only, the pod's projected
    token, and the three variables that point the clients at them."""
    pod = agent_pod()
    mutation.apply(pod, mutation.mutate(pod, INJECTOR).ops)
    for container in containers(pod):
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env[mutation.SOCKET_ENV] == "/var/run/tokenrelay-agent/agent.sock"
        assert env[mutation.AGENT_TOKEN_FILE_ENV] == TOKEN_PATH
        assert env[mutation.IDENTITY_ENV] == UID
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        assert mounts["/var/run/tokenrelay-agent"]["readOnly"] is True
        assert mounts[mutation.TOKEN_DIR]["readOnly"] is True
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes[mutation.AGENT_VOLUME]["hostPath"] == {
        "path": "/var/run/tokenrelay-agent",
        "type": "Directory",
    }
    projection = volumes[mutation.TOKEN_VOLUME]["projected"]["sources"][0]["serviceAccountToken"]
    assert projection["audience"] == INJECTOR.auth_url


def test_agent_mode_with_the_proxy_is_refused_naming_the_fix() -> None:
    """proxy: on (and token files) need the sidecar: the refusal says to remove them or pick the sidecar."""
    pod = agent_pod(**{options.PROXY: "on", options.TOKEN_FILES: "api-token"})
    with pytest.raises(InjectionRefused) as refused:
        mutation.mutate(pod, INJECTOR)
    message = str(refused.value)
    assert "tokenrelay.dev/proxy: on needs the sidecar" in message
    assert "tokenrelay.dev/token-files needs the sidecar" in message
    assert "or set tokenrelay.dev/mode: sidecar" in message


def test_sidecar_settings_in_agent_mode_are_refused_not_ignored() -> None:
    """An annotation that only configures the sidecar is refused in agent mode rather than lost."""
    pod = agent_pod(**{options.MEMORY_LIMIT: "1Gi", options.IMAGE: "mirror.example.com/tokenrelay:1"})
    with pytest.raises(
        InjectionRefused, match="tokenrelay.dev/memory-limit, tokenrelay.dev/image would configure"
    ):
        mutation.mutate(pod, INJECTOR)


def test_an_unknown_mode_is_refused_naming_the_choices() -> None:
    """A mode other than sidecar or agent is refused, listing both."""
    with pytest.raises(InjectionRefused, match="'daemonset' is not one of sidecar, agent"):
        mutation.mutate(agent_pod(**{options.MODE: "daemonset"}), INJECTOR)


def test_agent_mode_does_not_need_native_sidecars() -> None:
    """A cluster older than 1.29 is refused the sidecar (native sidecars) but not agent mode."""
    old = mutation.Injector(INJECTOR.auth_url, INJECTOR.api_url, INJECTOR.image, kube_version=(1, 28))
    assert mutation.mutate(agent_pod(), old).result == "injected"
    with pytest.raises(InjectionRefused, match="1.29"):
        mutation.mutate(agent_pod(**{options.MODE: "sidecar"}), old)


def test_a_mount_on_the_agents_directory_is_refused() -> None:
    """A container already mounting something where the agent's socket goes is told to move it."""
    pod = agent_pod()
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "x", "mountPath": "/var/run/tokenrelay-agent/"}]
    with pytest.raises(InjectionRefused, match="container app already mounts x at /var/run/tokenrelay-agent"):
        mutation.mutate(pod, INJECTOR)


def injected_example() -> list[dict[str, Any]]:
    done = subprocess.run(
        [cli(), "inject", "-f", str(EXAMPLE), "--auth-url", INJECTOR.auth_url, "--api-url", INJECTOR.api_url],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def test_inject_adds_no_container_to_the_agent_example() -> None:
    """`tokenrelay inject` on deploy/agent/example leaves the Deployment's one container alone: no
    sidecar, no init container, no added resources requests."""
    deployment = next(d for d in injected_example() if d["kind"] == "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    assert "initContainers" not in spec
    assert [c["name"] for c in spec["containers"]] == ["reports"]
    assert spec["containers"][0]["resources"] == {
        "requests": {"cpu": "50m", "memory": "64Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    }
    validate(deployment)


def test_the_docs_show_the_injected_pod_as_inject_makes_it() -> None:
    """docs/agent.md's injected pod spec (the "memory per pod: 0" claim) is `tokenrelay inject`'s output
    for deploy/agent/example, whole."""
    text = (REPO / "docs" / "agent.md").read_text()
    marker = "<!-- the injected pod spec: tests/kube/test_agent_mode.py checks it is inject's output -->"
    block = text[text.index(marker) :].split("```yaml\n", 1)[1].split("```", 1)[0]
    deployment = next(d for d in injected_example() if d["kind"] == "Deployment")
    assert yaml.safe_load(block) == deployment["spec"]["template"]["spec"]
