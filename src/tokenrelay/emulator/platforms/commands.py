"""Stand-ins for the platforms' own token commands, asking a running emulator.

``tokenrelay emulate buildkite-agent oidc request-token --audience AUD`` does what the Buildkite
agent does: ``POST $BUILDKITE_AGENT_ENDPOINT/jobs/$BUILDKITE_JOB_ID/oidc/tokens`` with
``Authorization: Token $BUILDKITE_AGENT_ACCESS_TOKEN``, and prints the token.
``tokenrelay emulate circleci run oidc get --claims '{"aud": "AUD"}'`` asks the emulator's CircleCI
endpoint (at ``$TOKENRELAY_EMULATOR_URL``). A script on ``PATH`` named for the real command that
runs one of these is what the tests, and anyone trying a set-up offline, put in front of tokenrelay.
Failures are one line on stderr and exit status 1, as the real commands do. Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from ..address import DEFAULT_LISTEN, URL_ENV


def _post(url: str, body: dict[str, object], headers: dict[str, str]) -> str:
    request = urllib.request.Request(  # noqa: S310 - the user's own emulator URL
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        token: str = json.loads(response.read())["token"]
        return token


def _fail(command: str, message: str) -> int:
    sys.stderr.write(f"{command}: fatal: {message}\n")
    return 1


def _option(words: Sequence[str], name: str) -> str | None:
    for i, word in enumerate(words):
        if word == name and i + 1 < len(words):
            return words[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return None


def buildkite_agent(words: Sequence[str]) -> int:
    """``buildkite-agent oidc request-token [--audience AUD]``."""
    if list(words[:2]) != ["oidc", "request-token"]:
        return _fail("buildkite-agent", "this stand-in knows only `oidc request-token`")
    access = os.environ.get("BUILDKITE_AGENT_ACCESS_TOKEN")
    if not access:
        return _fail("buildkite-agent", "BUILDKITE_AGENT_ACCESS_TOKEN is not set: run inside a job")
    emulator = os.environ.get(URL_ENV, f"http://{DEFAULT_LISTEN}")
    endpoint = os.environ.get("BUILDKITE_AGENT_ENDPOINT") or emulator + "/platforms/buildkite/v3"
    job = os.environ.get("BUILDKITE_JOB_ID", "0190f2c4-7a3e-4b8e-9d2c-5f1a6b7c8d9e")
    audience = _option(words, "--audience")
    body: dict[str, object] = {"audience": audience} if audience else {}
    return _print(
        "buildkite-agent",
        lambda: _post(
            f"{endpoint.rstrip('/')}/jobs/{job}/oidc/tokens", body, {"Authorization": f"Token {access}"}
        ),
    )


def circleci(words: Sequence[str]) -> int:
    """``circleci run oidc get [--claims JSON]``."""
    if list(words[:3]) != ["run", "oidc", "get"]:
        return _fail("circleci", "this stand-in knows only `run oidc get`")
    raw = _option(words, "--claims")
    try:
        claims = json.loads(raw) if raw else {}
    except ValueError:
        return _fail("circleci", "--claims is not JSON")
    emulator = os.environ.get(URL_ENV, f"http://{DEFAULT_LISTEN}")
    return _print(
        "circleci", lambda: _post(emulator.rstrip("/") + "/platforms/circleci/oidc", {"claims": claims}, {})
    )


def _print(command: str, fetch: Callable[[], str]) -> int:
    try:
        token = fetch()
    except urllib.error.HTTPError as exc:
        return _fail(command, f"the endpoint answered HTTP {exc.code}")
    except (urllib.error.URLError, OSError, ValueError, KeyError) as exc:
        return _fail(command, f"cannot reach the emulator: {exc}")
    sys.stdout.write(token + "\n")
    return 0


STAND_INS: dict[str, Callable[[Sequence[str]], int]] = {
    "buildkite-agent": buildkite_agent,
    "circleci": circleci,
}
