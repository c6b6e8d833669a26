"""docs/credential-helpers.md stays in step with the code: its config blocks parse and match it."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import yaml

from tokenrelay.helpers.hosts import load
from tokenrelay.helpers.kubelet import API_VERSION, IDENTITY_ANNOTATION

DOC = Path(__file__).resolve().parents[2] / "docs" / "credential-helpers.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_kubelet_config_matches_the_provider() -> None:
    """The documented CredentialProviderConfig names the API, the annotation and the ServiceAccount cache."""
    configs = [
        doc for doc in map(yaml.safe_load, blocks("yaml")) if doc.get("kind") == "CredentialProviderConfig"
    ]
    [provider] = configs[0]["providers"]
    assert provider["apiVersion"] == API_VERSION
    assert provider["args"] == ["kubelet-credential-provider"]
    assert provider["tokenAttributes"]["cacheType"] == "ServiceAccount"
    assert provider["tokenAttributes"]["optionalServiceAccountAnnotationKeys"] == [IDENTITY_ANNOTATION]
    env = {item["name"]: item["value"] for item in provider["env"]}
    assert load(env)[0].netloc == "registry.example.com"
    accounts = [doc for doc in map(yaml.safe_load, blocks("yaml")) if doc.get("kind") == "ServiceAccount"]
    assert IDENTITY_ANNOTATION in accounts[0]["metadata"]["annotations"]


def test_docker_config_and_toml_hosts_parse(tmp_path: Path) -> None:
    """The documented config.json uses credHelpers -> tokenrelay; the TOML hosts load."""
    [docker_config] = [json.loads(block) for block in blocks("json")]
    assert set(docker_config["credHelpers"].values()) == {"tokenrelay"}
    [toml_block] = [block for block in blocks("toml") if block.startswith("hosts")]
    config = tmp_path / "tokenrelay.toml"
    config.write_text(toml_block)
    assert [host.audience for host in load({"TOKENRELAY_CONFIG": str(config)})][-1] == "registry.local"
    assert tomllib.loads(toml_block)["hosts"]
