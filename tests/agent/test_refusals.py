"""The agent's refusals: one catalogue, the docs' table generated from it, every answer one of its
rows, and the request policy as ordered checks that a new member joins by registration alone."""

from __future__ import annotations

import re
import string
from dataclasses import replace

from aiohttp import web

from tokenrelay import docgen
from tokenrelay.agent import refusals
from tokenrelay.agent.checks import Asking, Checks
from tokenrelay.agent.refusals import CATALOGUE, Refusal
from tokenrelay.lite import aip193
from tokenrelay.testing import refusal

from ..support.agent import Answer, Pod
from ..support.chaos import down_503
from ..support.production import REPO
from .conftest import RigFactory

AGENT_DOC = REPO / "docs" / "agent.md"
SECTION = next(section for section in docgen.SECTIONS if section.name == "AGENT REFUSALS")


def _pattern(template: str) -> str:
    """A row's message template as a regular expression: each field any text."""
    parts = string.Formatter().parse(template)
    return "".join(re.escape(text) + (".+" if field is not None else "") for text, field, _, _ in parts)


def row_of(answer: Answer) -> Refusal:
    """The one catalogue row that ``answer`` is, checked for its status, code and Retry-After."""
    parsed = aip193.parse(answer.body)
    assert parsed is not None, answer.body
    code, message, reason = parsed
    rows = [row for row in CATALOGUE if row.reason == reason] or [refusals.EXCHANGE_REFUSED]
    matching = [row for row in rows if re.fullmatch(_pattern(row.template), message)]
    assert len(matching) == 1, (reason, message)
    row = matching[0]
    assert (answer.status, code) == (row.status, row.code), (reason, message)
    assert ("Retry-After" in answer.headers) == row.retry_after, reason
    return row


async def _refused(request: web.Request) -> web.StreamResponse | None:
    if request.query.get("aud") == "made-up.example":
        return refusal(aip193.Code.INVALID_ARGUMENT, "no such audience", 400, "AUDIENCE_UNKNOWN")
    return None


def test_the_docs_table_of_refusals_is_the_catalogue() -> None:
    """docs/agent.md holds the table of refusals generated from the catalogue, one row per entry."""
    text = AGENT_DOC.read_text()
    assert SECTION.begin in text and SECTION.end in text, "docs/agent.md has no table of refusals"
    shown = text[text.index(SECTION.begin) : text.index(SECTION.end) + len(SECTION.end)] + "\n"
    assert shown == SECTION.render(), "run: python -m tokenrelay.docgen --write docs/agent.md"
    rows = [line for line in shown.splitlines() if line.startswith("| `")]
    assert len(rows) == len(CATALOGUE)
    reasons = {row.reason for row in CATALOGUE}
    assert {"POD_TOKEN_MISSING", "POD_TOKEN_POD_GONE", "IDENTITY_MISSING", "POD_RATE_LIMITED"} <= reasons
    assert {"HEAD_TIMEOUT", "TOO_MANY_CONNECTIONS", "TOKEN_UNAVAILABLE", "EXCHANGE_REFUSED"} <= reasons


def test_every_row_says_what_to_do_and_no_two_rows_say_the_same() -> None:
    """Each row names a remedy, and no reason has two rows with the same message."""
    assert all(row.remedy for row in CATALOGUE)
    assert len({(row.reason, row.template) for row in CATALOGUE}) == len(CATALOGUE)


async def test_every_refusal_of_a_token_request_is_its_catalogue_row(rig_factory: RigFactory) -> None:
    """Each way a token request is refused (no token, not a JWT, another node's pod, a deleted pod,
    no identity, the service's refusal live and from memory, the service down, a pod or a
    connection asking too often) answers exactly as its catalogue row says."""
    rig = await rig_factory(max_requests_per_pod=1, pod_request_burst=2, max_requests_per_connection=100_000)
    rig.service.behaviour = _refused
    seen: list[str] = []

    async def expect(answer: Answer, row: Refusal) -> None:
        assert row_of(answer) is row, answer.body
        seen.append(answer.reason)

    web_1 = rig.start_pod(Pod("web-1", "web"))
    await expect(await rig.ask(web_1, token=""), refusals.MISSING)
    await expect(await rig.ask(web_1, token="not-a-jwt"), refusals.NOT_A_JWT)
    await expect(await rig.ask(web_1, identity=""), refusals.IDENTITY_MISSING)
    await expect(await rig.ask(web_1, audience="made-up.example"), refusals.EXCHANGE_REFUSED)
    remembered = await rig.ask(rig.start_pod(Pod("web-2", "web")), audience="made-up.example")
    await expect(remembered, refusals.EXCHANGE_REFUSED)
    assert remembered.reason == "AUDIENCE_UNKNOWN" and rig.service.calls == 1
    await expect(await rig.ask(web_1), refusals.POD_RATE_LIMITED)
    away = rig.start_pod(Pod("away-1", "web", node="another-node"))
    await expect(await rig.ask(away), refusals.OTHER_NODE)
    gone = rig.start_pod(Pod("gone-1", "web"))
    rig.delete_pod(gone)
    await expect(await rig.ask(gone), refusals.POD_GONE)
    rig.service.behaviour = down_503
    await expect(await rig.ask(rig.start_pod(Pod("db-1", "db"))), refusals.TOKEN_UNAVAILABLE)
    metrics = rig.node_agent.registry
    for reason in set(seen):
        assert metrics.get_sample_value("tokenrelay_agent_refusals_total", {"reason": reason}), reason


async def test_a_connection_asking_too_often_is_its_catalogue_row(rig_factory: RigFactory) -> None:
    """Past --max-requests-per-connection on one kept-alive connection: the RATE_LIMITED row."""
    rig = await rig_factory(max_requests_per_connection=1)
    pod = rig.start_pod(Pod("web-1", "web"))
    assert (await rig.ask(pod, identity="")).status == 400
    assert row_of(await rig.ask(pod, identity="")) is refusals.RATE_LIMITED


class _Weekdays:
    """A made-up policy: no identity called "weekend"."""

    async def __call__(self, asking: Asking) -> None:
        if asking.key is not None and asking.key.identity == "weekend":
            raise replace(refusals.IDENTITY_MISSING, reason="NOT_ON_WEEKENDS").refuse()


async def test_a_check_joins_the_policy_by_registration_alone(rig_factory: RigFactory) -> None:
    """A check added to the ordered policy list is applied after the ones before it, answered as
    its row says and counted by reason, with no change to the handler; other requests pass."""
    rig = await rig_factory()
    agent = rig.node_agent.agent
    assert agent is not None
    agent.checks = Checks(agent.checks.caller, (*agent.checks.policy, _Weekdays()))
    pod = rig.start_pod(Pod("web-1", "web"))
    refused = await rig.ask(pod, identity="weekend")
    assert (refused.status, refused.reason) == (400, "NOT_ON_WEEKENDS")
    assert (await rig.ask(pod, identity="")).reason == "IDENTITY_MISSING"  # the earlier check first
    assert (await rig.ask(pod)).status == 200
    count = rig.node_agent.registry.get_sample_value(
        "tokenrelay_agent_refusals_total", {"reason": "NOT_ON_WEEKENDS"}
    )
    assert count == 1
