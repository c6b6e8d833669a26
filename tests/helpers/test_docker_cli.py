"""The real docker CLI (28, no engine needed for ``docker manifest inspect``) shows the helper's reason.

docker discards a credential helper's stdout error and carries on anonymously, so the registry's
``unauthorized`` is all it reports; the helper's stderr line, which docker passes through, is what
tells the user why.
"""

from __future__ import annotations

import pytest

from ..support.helpers import Stack, docker_config, require, run

pytestmark = pytest.mark.e2e


def manifest_inspect(stack: Stack, env: dict[str, str]) -> tuple[int, list[str]]:
    docker = require("docker")
    docker_config(env, {stack.registry.netloc: "tokenrelay"})
    result = run([docker, "manifest", "inspect", "--insecure", f"{stack.registry.netloc}/demo/app:v1"], env)
    return result.returncode, result.stderr.splitlines()


def test_docker_manifest_inspect_names_a_stopped_sidecar(stack: Stack, client_env: dict[str, str]) -> None:
    """With no sidecar on the socket, docker prints the helper's one line before the registry's refusal."""
    env = {**client_env, "TOKENRELAY_SOCKET": f"{client_env['HOME']}/run/none.sock"}
    status, lines = manifest_inspect(stack, env)
    assert status == 1
    ours = [line for line in lines if line.startswith("tokenrelay: ")]
    assert ours, lines
    assert ours[0] == (
        f"tokenrelay: no tokenrelay sidecar is listening at {env['TOKENRELAY_SOCKET']}: start `tokenrelay "
        "run`, or point --socket / TOKENRELAY_SOCKET at its socket; or set TOKENRELAY_AUTH_URL, "
        "TOKENRELAY_IDENTITY and TOKENRELAY_ID_TOKEN_FILE (or TOKENRELAY_ID_TOKEN_ENV) to exchange "
        "without a sidecar"
    )
    assert "unauthorized" in lines[-1]


def test_docker_manifest_inspect_names_an_audience_the_sidecar_lacks(
    stack: Stack, client_env: dict[str, str]
) -> None:
    """A host whose audience the sidecar does not keep: docker shows the sidecar's refusal, not just 401."""
    env = {**client_env, "TOKENRELAY_HOSTS": f"{stack.registry.netloc}=unkept.example"}
    status, lines = manifest_inspect(stack, env)
    assert status == 1
    ours = [line for line in lines if line.startswith("tokenrelay: ")]
    assert ours, lines
    assert ours[0] == (
        f"tokenrelay: the tokenrelay sidecar at {stack.socket} has no token: audience 'unkept.example' "
        "is not configured; start tokenrelay run with --audience unkept.example (env TOKENRELAY_AUDIENCE) "
        "to keep a token for it"
    )
    assert "unauthorized" in lines[-1]
