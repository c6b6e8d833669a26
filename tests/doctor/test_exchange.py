"""The doctor's settings, OIDC token and token-service checks, each broken on purpose against the
emulator (or the FakeTokenService where the emulator cannot misbehave that way)."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from tokenrelay.doctor import service
from tokenrelay.doctor.oidc import OidcToken
from tokenrelay.doctor.report import Check, Outcome
from tokenrelay.sidecar.settings import Settings
from tokenrelay.testing import FakeTokenService, loopback_certificates, make_jwt

from ..support.doctor import BIN, SUBJECT, Platform, doctor, finding


async def test_a_sound_set_up_passes_and_never_prints_a_token(
    platform: Platform, environ: dict[str, str]
) -> None:
    """With everything right the exchange checks pass, the claims are shown, and no token appears."""
    report = await doctor(platform.argv("--audience", "registry.example.test"), environ)
    for check_id in (
        "config.parse",
        "oidc.read",
        "oidc.jwt",
        "oidc.expiry",
        "oidc.audience",
        "service.reach",
        "service.clock",
        "service.exchange.0",
        "service.exchange.1",
    ):
        assert finding(report, check_id).outcome is Outcome.PASSED, report.text()
    assert "signature not checked" in finding(report, "oidc.jwt").message
    assert "team/builder" in finding(report, "oidc.kubernetes").message
    assert "registry.example.test works" in finding(report, "service.exchange.1").message
    shown = report.text() + report.json()
    assert all(token not in shown for token in platform.tokens)
    assert "eyJ" not in shown


async def test_a_missing_setting_names_its_flag(platform: Platform, environ: dict[str, str]) -> None:
    """Settings that do not load fail config.parse, naming the flag, variable and key to set."""
    argv = [a for a in platform.argv() if a not in ("--identity", platform.identity)]
    report = await doctor(argv, environ)
    check = finding(report, "config.parse")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and "--identity (env TOKENRELAY_IDENTITY, key 'identity'" in check.fix
    assert report.exit_status() == 1


async def test_an_identity_that_is_a_url_fails(platform: Platform, environ: dict[str, str]) -> None:
    """--identity given the issuer's URL instead of a uid fails config.identity, saying where the uid is."""
    argv = platform.argv()
    argv[argv.index(platform.identity)] = platform.url
    check = finding(await doctor(argv, environ), "config.identity")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and "uid" in check.fix and "--identity" in check.fix


async def test_a_missing_token_file_names_the_flag(platform: Platform, environ: dict[str, str]) -> None:
    """No OIDC token file: oidc.read fails, naming the projected volume and --id-token-file."""
    platform.token_file.unlink()
    report = await doctor(platform.argv(), environ)
    check = finding(report, "oidc.read")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and "--id-token-file" in check.fix and "projected" in check.fix
    assert finding(report, "service.exchange").outcome is Outcome.SKIPPED


async def test_a_token_that_is_not_a_jwt_fails(platform: Platform, environ: dict[str, str]) -> None:
    """A file holding something other than a JWT fails oidc.jwt, pointing at --id-token-file."""
    platform.token_file.write_text("not-a-jwt-at-all")
    check = finding(await doctor(platform.argv(), environ), "oidc.jwt")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and "--id-token-file" in check.fix


async def test_an_expired_token_says_who_stopped_renewing_it(
    platform: Platform, environ: dict[str, str]
) -> None:
    """An expired OIDC token fails oidc.expiry, naming kubelet's renewal and the subPath trap."""
    platform.token_file.write_text(
        make_jwt(
            {
                "iss": platform.url,
                "sub": SUBJECT,
                "aud": platform.url,
                "iat": int(time.time()) - 700,
                "exp": int(time.time()) - 100,
            }
        )
    )
    check = finding(await doctor(platform.argv(), environ), "oidc.expiry")
    assert check.outcome is Outcome.FAILED
    assert "expired" in check.message
    assert check.fix is not None and "subPath" in check.fix


async def test_a_token_past_its_renewal_point_warns(platform: Platform, environ: dict[str, str]) -> None:
    """A token past 80% of its life (kubelet would have replaced it) is a warning."""
    now = int(time.time())
    platform.token_file.write_text(
        make_jwt(
            {"iss": platform.url, "sub": SUBJECT, "aud": platform.url, "iat": now - 550, "exp": now + 50}
        )
    )
    check = finding(await doctor(platform.argv(), environ), "oidc.expiry")
    assert check.outcome is Outcome.WARNING
    assert "80%" in check.message


async def test_a_kubernetes_token_for_another_audience_names_the_volume_fix(
    platform: Platform, environ: dict[str, str]
) -> None:
    """A projected token minted for another audience warns, naming the serviceAccountToken audience."""
    now = int(time.time())
    claims = {
        "iss": platform.url,
        "sub": SUBJECT,
        "aud": ["https://kubernetes.default.svc"],
        "iat": now,
        "exp": now + 600,
        "kubernetes.io": {
            "namespace": "team",
            "serviceaccount": {"name": "builder", "uid": "u"},
            "pod": {"name": "builder-7d9", "uid": "p"},
        },
    }
    platform.token_file.write_text(make_jwt(claims))
    report = await doctor(platform.argv(), environ)
    check = finding(report, "oidc.audience")
    assert check.outcome is Outcome.WARNING
    assert check.fix is not None and f"audience: {platform.url}" in check.fix
    assert "team/builder (pod builder-7d9)" in finding(report, "oidc.kubernetes").message
    # unsigned: the token service refuses it, and the doctor says why in its own words
    refused = finding(report, "service.exchange.0")
    assert refused.outcome is Outcome.FAILED
    assert "signature" in refused.message and "iss=" in refused.message
    assert refused.fix is not None and "trusts" in refused.fix


async def test_a_claim_match_mismatch_gives_the_exact_values(
    platform: Platform, environ: dict[str, str]
) -> None:
    """A refused exchange quotes the service and gives the exact claimMatch that would match."""
    platform.write_token(subject="system:serviceaccount:team:other")
    report = await doctor(platform.argv(), environ)
    check = finding(report, "service.exchange.0")
    assert check.outcome is Outcome.FAILED
    assert "sub claim is not the claimMatch.subject" in check.message  # the emulator's own words
    assert "sub=system:serviceaccount:team:other" in check.message
    assert check.fix is not None
    assert f'{{"issuer": "{platform.url}", "subject": "system:serviceaccount:team:other"}}' in check.fix
    assert "annotate the service account team/other with tokenrelay.dev/identity" in check.fix


async def test_an_unknown_identity_names_the_flag(platform: Platform, environ: dict[str, str]) -> None:
    """An identity uid the token service does not know fails the exchange, naming --identity."""
    argv = platform.argv()
    argv[argv.index(platform.identity)] = platform.identity + "x"
    check = finding(await doctor(argv, environ), "service.exchange.0")
    assert check.outcome is Outcome.FAILED
    assert check.fix is not None and "--identity" in check.fix and "names no identity" in check.fix


async def test_an_unreachable_token_service_names_the_url_flag(
    platform: Platform, environ: dict[str, str]
) -> None:
    """A token service nobody listens on fails service.reach, naming --auth-url, and skips exchanges."""
    argv = platform.argv()
    argv[argv.index("--auth-url") + 1] = "http://127.0.0.1:9"
    report = await doctor(argv, environ)
    check = finding(report, "service.reach")
    assert check.outcome is Outcome.FAILED
    assert check.message == (
        "cannot reach the token service at http://127.0.0.1:9/sts/exchange (connection refused)"
    )
    assert check.fix is not None and "--auth-url" in check.fix
    assert finding(report, "service.exchange").outcome is Outcome.SKIPPED


async def test_a_skewed_clock_is_reported_with_the_fix(
    aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path, environ: dict[str, str]
) -> None:
    """A token service whose Date is ten minutes ahead fails service.clock, naming NTP."""
    service = FakeTokenService()

    async def ahead(request: web.Request) -> web.StreamResponse | None:
        return web.Response(status=400, headers={"Date": formatdate(time.time() + 600, usegmt=True)})

    service.behaviour = ahead
    server = await aiohttp_server(service.app())
    token = tmp_path / "t"
    now = int(time.time())
    token.write_text(make_jwt({"iss": "https://issuer.test", "sub": "ci", "iat": now, "exp": now + 600}))
    url = str(server.make_url("")).rstrip("/")
    argv = ["--auth-url", url, "--api-url", url, "--identity", "org/ci", "--id-token-file", str(token)]
    check = finding(await doctor(argv, environ), "service.clock")
    assert check.outcome is Outcome.FAILED
    assert "behind" in check.message
    assert check.fix is not None and "NTP" in check.fix


def test_the_command_prints_json_and_exits_1_on_a_failure(tmp_path: Path) -> None:
    """`tokenrelay doctor --json` prints the documented document and exits 1 when a check failed."""
    env = {"HOME": str(tmp_path), "PATH": str(BIN), "TOKENRELAY_SOCKET": str(tmp_path / "none.sock")}
    result = subprocess.run(
        [str(BIN / "tokenrelay"), "doctor", "--json"], env=env, capture_output=True, check=False, timeout=60
    )
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert set(document["summary"]) == {"passed", "failed", "warning", "skipped"}
    socket_check = next(c for c in document["checks"] if c["id"] == "sidecar.socket")
    assert socket_check["status"] == "failed" and "TOKENRELAY_SOCKET" in socket_check["fix"]


async def test_an_untrusted_certificate_names_the_ca_fix(
    aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path, environ: dict[str, str]
) -> None:
    """A token service whose certificate no trusted CA signed fails service.tls, naming SSL_CERT_FILE."""
    # signed by a CA that nothing trusts
    context = loopback_certificates(tmp_path).server_context()
    server = await aiohttp_server(FakeTokenService().app(), ssl=context)
    url = f"https://127.0.0.1:{server.port}"
    token = tmp_path / "t"
    token.write_text(make_jwt({"iss": "https://issuer.test", "sub": "ci", "exp": int(time.time()) + 600}))
    argv = ["--auth-url", url, "--api-url", url, "--identity", "org/ci", "--id-token-file", str(token)]
    report = await doctor(argv, environ)
    check = finding(report, "service.tls")
    assert check.outcome is Outcome.FAILED
    assert "does not verify" in check.message
    assert check.fix is not None and "SSL_CERT_FILE" in check.fix
    assert finding(report, "service.exchange").outcome is Outcome.SKIPPED


HANG = 60.0  # seconds: only a guard against a hung test, never a measure
NETRC = "machine 127.0.0.1 login me password from-a-file\ndefault login anyone password from-a-file\n"


async def test_a_netrc_naming_the_token_service_stops_no_exchange(
    platform: Platform, environ: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With NETRC naming a file with an entry for the token service's host (and a default one), the
    doctor's exchange still works: no credential from a file joins its requests."""
    (tmp_path / "netrc").write_text(NETRC)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    report = await doctor(platform.argv(), {**environ, "NETRC": str(tmp_path / "netrc")})
    assert finding(report, "service.exchange.0").outcome is Outcome.PASSED, report.text()


async def test_an_internal_error_in_the_exchange_is_shown_with_a_netrc_naming_its_host(
    aiohttp_server: Callable[..., Awaitable[TestServer]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exchange that stops on an internal error (here aiohttp's own, with a session that reads
    .netrc) fails with the error's class and words, and a warning names the .netrc entry for the
    token service's host; no token is shown."""
    server = await aiohttp_server(FakeTokenService().app())
    url = f"http://127.0.0.1:{server.port}"
    (tmp_path / "netrc").write_text(NETRC)
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))
    oidc = make_jwt({"iss": "https://issuer.test", "sub": "ci", "exp": int(time.time()) + 600})
    settings = Settings(auth_url=url, api_url=url, identity="org/ci", id_token_file=str(tmp_path / "t"))
    async with aiohttp.ClientSession(trust_env=True) as session:
        checks = await service.exchanges(
            settings, session, OidcToken(oidc, {}), (url,), {"NETRC": str(tmp_path / "netrc")}
        )
    crashed, netrc = checks
    assert crashed.outcome is Outcome.FAILED
    assert "internal error: ValueError: Cannot combine AUTHORIZATION header" in crashed.message
    assert netrc.id == "service.netrc" and netrc.outcome is Outcome.WARNING
    assert (
        f"NETRC={tmp_path}/netrc has a machine entry for the token service's host 127.0.0.1" in netrc.message
    )
    assert "eyJ" not in crashed.message + netrc.message + (netrc.fix or "")


async def crash_with_netrc(tmp_path: Path, netrc_path: Path) -> list[Check]:
    """The exchange checks against a closed session (an internal error), NETRC naming ``netrc_path``."""
    url = "http://127.0.0.1:9"  # never reached: the session is closed
    oidc = make_jwt({"iss": "https://issuer.test", "sub": "ci", "exp": int(time.time()) + 600})
    settings = Settings(auth_url=url, api_url=url, identity="org/ci", id_token_file=str(tmp_path / "t"))
    session = aiohttp.ClientSession()
    await session.close()
    return await service.exchanges(settings, session, OidcToken(oidc, {}), (url,), {"NETRC": str(netrc_path)})


def feed(fifo: Path) -> None:
    """Write a .netrc naming the token service's host into ``fifo`` once a reader opens it."""
    try:
        with fifo.open("w") as pipe:
            pipe.write(NETRC)
    except BrokenPipeError:
        pass  # the reader looked and went


async def test_a_fifo_at_netrc_is_a_warning_never_a_hang(tmp_path: Path) -> None:
    """With NETRC naming a FIFO, the doctor's .netrc check after an internal error warns that it is
    a named pipe, naming NETRC in the fix, and never opens it to wait for a writer."""
    fifo = tmp_path / "netrc"
    os.mkfifo(fifo)
    # a writer that would let a blocking reader through, with a .netrc the check must not see
    writer = threading.Thread(target=feed, args=(fifo,), daemon=True)
    writer.start()
    try:
        crashed, netrc = await crash_with_netrc(tmp_path, fifo)
    finally:
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer through, if still there
        writer.join(HANG)
        os.close(reader)
    assert crashed.outcome is Outcome.FAILED
    assert netrc.id == "service.netrc" and netrc.outcome is Outcome.WARNING
    assert f"NETRC={fifo} is a named pipe (FIFO), not a regular file" in netrc.message
    assert netrc.fix is not None and "point NETRC at a regular file" in netrc.fix


@pytest.mark.parametrize("kind", ["directory", "huge"])
async def test_a_directory_or_a_huge_file_at_netrc_is_a_warning(tmp_path: Path, kind: str) -> None:
    """A directory at NETRC, or a file over 1 MiB (even one naming the token service's host at its
    end), is a warning saying so, naming NETRC in the fix; the file is not parsed."""
    where = tmp_path / "netrc"
    if kind == "directory":
        where.mkdir()
    else:
        where.write_text("# padding\n" * (1 << 17) + NETRC)
    _, netrc = await crash_with_netrc(tmp_path, where)
    assert netrc.id == "service.netrc" and netrc.outcome is Outcome.WARNING
    said = "is a directory, not a regular file" if kind == "directory" else "is over 1 MiB"
    assert f"NETRC={where} {said}" in netrc.message
    assert netrc.fix is not None and "point NETRC at a regular file" in netrc.fix
    assert "from-a-file" not in netrc.message
