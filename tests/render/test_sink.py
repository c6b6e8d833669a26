"""A --render at work on real files: written at every exchange for its hosts, atomically, with its mode
and 0700 parents; a symbolic link refused; a write failure one error line and a metric with the old
file whole; a clean stop takes tokenrelay's entries out."""

from __future__ import annotations

import errno
import logging
import os
import stat
import subprocess
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tokenrelay.errors import SinkError
from tokenrelay.helpers.hosts import parse_spec
from tokenrelay.lite import files
from tokenrelay.render import RenderSink, parse
from tokenrelay.render.dockerconfig import DockerConfig
from tokenrelay.render.format import Entry
from tokenrelay.render.table import Render
from tokenrelay.serving.sinks import FileSink
from tokenrelay.sidecar.metrics import Metrics
from tokenrelay.tokens.sts import Issued
from tokenrelay.tokens.token import Token

AUD = "registry.example.test"
HOSTS = [parse_spec("registry.example.test"), parse_spec(f"127.0.0.1:5000={AUD}")]


def token(value: str, audience: str = AUD) -> Token:
    return Token(
        value=value, audience=audience, received_at=0.0, lifetime=3600.0, refresh_at=1800.0, expire_wall=0.0
    )


def exchange(sink: RenderSink, value: str, audience: str = AUD) -> None:
    sink.exchanged(token(value, audience), duration=0.1, issued=Issued(value))


def test_each_exchange_rewrites_the_file_at_once(tmp_path: Path) -> None:
    """The exchange's own callback writes the file: no refresh leaves an old token behind."""
    path = tmp_path / ".npmrc"
    sink = RenderSink(parse(f"npmrc={path}"), HOSTS)
    exchange(sink, "first-token")
    assert "//127.0.0.1:5000/:_authToken=first-token\n" in path.read_text()
    exchange(sink, "second-token")
    assert "first-token" not in path.read_text()
    assert "//registry.example.test/:_authToken=second-token\n" in path.read_text()
    exchange(sink, "api-token", "https://api.example.test")
    assert "api-token" not in path.read_text()


def test_mode_and_parent_directories(tmp_path: Path) -> None:
    """The file gets --render-mode (0600 by default) whatever it had; missing parents are made 0700."""
    path = tmp_path / "a" / "b" / ".netrc"
    sink = RenderSink(parse(f"netrc={path}"), HOSTS)
    old = os.umask(0)
    try:
        exchange(sink, "tok")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "a").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700
    sink.mode = 0o640
    exchange(sink, "tok2")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_symbolic_link_at_the_path_is_refused(tmp_path: Path) -> None:
    """A link at the render's path is neither followed nor replaced: the write fails naming the link."""
    target = tmp_path / "elsewhere"
    target.write_text("someone else's file\n")
    link = tmp_path / ".netrc"
    link.symlink_to(target)
    sink = RenderSink(parse(f"netrc={link}"), HOSTS)
    with pytest.raises(SinkError, match="is a symbolic link; name the file itself"):
        sink.write_tokens({AUD: token("secret-value")})
    assert link.is_symlink()
    assert target.read_text() == "someone else's file\n"


def test_the_token_file_refuses_a_symbolic_link_too(tmp_path: Path) -> None:
    """--token-file and --render share the one refusal."""
    target = tmp_path / "elsewhere"
    target.write_text("x")
    link = tmp_path / "token"
    link.symlink_to(target)
    with pytest.raises(SinkError, match="symbolic link"):
        FileSink(str(link), AUD).write(token("secret-value"))
    assert target.read_text() == "x"


def test_a_full_disk_is_one_error_line_and_a_metric_and_the_old_file_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """ENOSPC mid-write: one error line naming the file (never the token), the failure counted, the
    file as it was; the next exchange, with room again, writes it."""
    path = tmp_path / "config.json"
    registry = CollectorRegistry()
    metrics = Metrics(registry, [AUD])
    sink = RenderSink(parse(f"docker-config={path}"), HOSTS, report=metrics.render)
    exchange(sink, "good-token")
    before = path.read_bytes()

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(files, "os", types.SimpleNamespace(**{**vars(os), "write": full}))
    with caplog.at_level(logging.ERROR, logger="tokenrelay.render"):
        exchange(sink, "secret-value")
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "No space left on device" in errors[0].__dict__["error"]
    assert "secret-value" not in caplog.text
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"], "no temporary file left"
    labels = {"format": "docker-config", "path": str(path)}
    assert registry.get_sample_value("tokenrelay_render_writes_total", {**labels, "result": "failure"}) == 1
    monkeypatch.undo()
    exchange(sink, "new-token")
    assert registry.get_sample_value("tokenrelay_render_writes_total", {**labels, "result": "success"}) == 2
    assert "secret-value" not in path.read_text()


def test_a_file_of_the_wrong_format_is_left_alone(tmp_path: Path) -> None:
    """A config.json that is not JSON is reported, not overwritten."""
    path = tmp_path / "config.json"
    path.write_text("not json\n")
    sink = RenderSink(parse(f"docker-config={path}"), HOSTS)
    with pytest.raises(SinkError, match=r"cannot render docker-config into .*config.json \(--render\)"):
        sink.write_tokens({AUD: token("tok")})
    assert path.read_text() == "not json\n"


def test_a_clean_stop_takes_out_only_tokenrelays_entries(tmp_path: Path) -> None:
    """The user's file keeps its bytes; a file tokenrelay made is removed; an unwritten sink touches
    nothing."""
    users, ours = tmp_path / ".netrc", tmp_path / "made" / ".npmrc"
    users.write_text("machine example.org login me password mine\n")
    sinks = [RenderSink(parse(f"netrc={users}"), HOSTS), RenderSink(parse(f"npmrc={ours}"), HOSTS)]
    for sink in sinks:
        exchange(sink, "tok")
    assert "tok" in users.read_text()
    for sink in sinks:
        sink.clear()
    assert users.read_text() == "machine example.org login me password mine\n"
    assert not ours.exists()
    untouched = tmp_path / "never"
    RenderSink(parse(f"netrc={untouched}"), HOSTS).clear()
    assert not untouched.exists()


async def test_sighup_applies_a_new_render_mode(tmp_path: Path) -> None:
    """--render-mode is re-read on SIGHUP: the refresh it starts rewrites the file with the new mode."""
    from tokenrelay.sidecar.reloader import Reloader
    from tokenrelay.sidecar.settings import parse_args
    from tokenrelay.testing import FakeTokenService
    from tokenrelay.tokens.provider import TokenProvider, TokenProviders

    from ..support.waiting import eventually

    path = tmp_path / ".netrc"
    argv = ["--auth-url=https://a.example", "--api-url=https://api.example", "--identity=o"]
    argv += [f"--hosts={AUD}", f"--render=netrc={path}"]
    sink = RenderSink(parse(f"netrc={path}"), HOSTS)
    service = FakeTokenService()

    async def fetch(audience: str) -> Issued:
        return Issued(service.mint(audience))

    providers = TokenProviders([TokenProvider(AUD, fetch, observers=[sink])])
    await providers.get(AUD)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    reload = Reloader(
        parse_args(argv, {}), lambda: parse_args([*argv, "--render-mode=0640"], {}), providers, [], [sink]
    )
    reload()
    await eventually(lambda: len(service.issued) == 2, "the refresh SIGHUP starts")
    await eventually(lambda: service.issued[1] in path.read_text(), "the new token in the file")
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    await providers.stop()


# A user's own entry for a host tokenrelay renders, in each format that names entries by host.
USERS_OWN = {
    "maven": (
        "settings.xml",
        '<?xml version="1.0" encoding="UTF-8"?>\n<settings>\n  <servers>\n    <server>\n'
        "      <id>registry.example.test</id>\n      <username>me</username>\n"
        "      <password>my-own-password</password>\n    </server>\n  </servers>\n</settings>\n",
    ),
    "docker-config": (
        "config.json",
        '{\n  "auths": {\n    "registry.example.test": {"auth": "bWU6bXktb3duLXBhc3N3b3Jk"}\n  }\n}\n',
    ),
}


@pytest.mark.parametrize("name", list(USERS_OWN))
def test_a_users_own_entry_for_a_rendered_host_survives_the_run_and_comes_back_at_a_clean_stop(
    tmp_path: Path, name: str
) -> None:
    """The user's entry for a rendered host gives way to tokenrelay's while it runs (the file holds
    one entry for the host), kept meanwhile in a 0600 file beside the render; a clean stop gives the
    user's file back byte for byte and removes that file."""
    filename, user = USERS_OWN[name]
    path = tmp_path / filename
    path.write_text(user)
    sink = RenderSink(parse(f"{name}={path}"), HOSTS)
    exchange(sink, "tok")
    assert "bXktb3duLXBhc3N3b3Jk" not in path.read_text() and "my-own-password" not in path.read_text()
    assert sink.render.format.tokens(path.read_text())["registry.example.test"] == "tok"
    kept = path.with_name(filename + ".tokenrelay-aside")
    mode = stat.S_IMODE(kept.stat().st_mode) if kept.exists() else None
    exchange(sink, "tok2")
    sink.clear()
    assert path.read_text() == user
    assert mode == 0o600
    assert not kept.exists()


@pytest.mark.parametrize("name", list(USERS_OWN))
def test_after_a_crash_the_next_start_still_gives_the_users_entry_back(tmp_path: Path, name: str) -> None:
    """A run that dies without a clean stop leaves tokenrelay's stale entry in the file; the next run
    does not take that for the user's, and its clean stop gives the user's own entry back."""
    filename, user = USERS_OWN[name]
    path = tmp_path / filename
    path.write_text(user)
    exchange(RenderSink(parse(f"{name}={path}"), HOSTS), "before-the-crash")  # never cleared
    again = RenderSink(parse(f"{name}={path}"), HOSTS)
    exchange(again, "after-the-crash")
    again.clear()
    assert path.read_text() == user
    assert not path.with_name(filename + ".tokenrelay-aside").exists()


@pytest.mark.parametrize("name", list(USERS_OWN))
def test_a_run_that_never_got_a_token_after_a_crash_still_gives_the_users_entry_back(
    tmp_path: Path, name: str
) -> None:
    """After a crash, a run whose exchanges all fail (nothing written) still puts the user's entry
    back at its clean stop, and takes the crashed run's stale entry out."""
    filename, user = USERS_OWN[name]
    path = tmp_path / filename
    path.write_text(user)
    exchange(RenderSink(parse(f"{name}={path}"), HOSTS), "before-the-crash")  # never cleared
    RenderSink(parse(f"{name}={path}"), HOSTS).clear()
    assert path.read_text() == user


@pytest.mark.parametrize(
    ("spec", "skeleton"),
    [
        ("docker-config=config.json", '{\n\t"auths": {}\n}\n'),
        ("maven=settings.xml", None),
        ("npmrc=.npmrc", ""),
        ("netrc=.netrc", ""),
    ],
)
def test_a_users_file_that_is_only_a_skeleton_survives_a_clean_stop(
    tmp_path: Path, spec: str, skeleton: str | None
) -> None:
    """A file the user had before, even one holding nothing but what tokenrelay would create (an
    empty file, ``{"auths": {}}``, a bare settings.xml), is theirs: a clean stop leaves it as it was."""
    from tokenrelay.render.maven import NEW_FILE

    name, _, filename = spec.partition("=")
    path = tmp_path / filename
    text = NEW_FILE if skeleton is None else skeleton
    path.write_text(text)
    sink = RenderSink(parse(f"{name}={path}"), HOSTS)
    exchange(sink, "tok")
    assert path.read_text() != text
    sink.clear()
    assert path.exists() and path.read_text() == text


HANG = 60.0  # seconds: only a guard against a hung test, never a measure


class PausedDockerConfig(DockerConfig):
    """docker-config that stops in the middle of a read-modify-write (file and aside file read, the
    new text not yet written) until the test lets it go."""

    def __init__(self) -> None:
        self.inside, self.go = threading.Event(), threading.Event()

    def render(
        self,
        existing: str | None,
        owned: Sequence[str],
        entries: Sequence[Entry],
        aside: Mapping[str, str] | None = None,
    ) -> str | None:
        if entries:
            self.inside.set()
            self.go.wait(HANG)
        return super().render(existing, owned, entries, aside)


def test_two_relays_on_one_file_never_lose_the_users_entry(tmp_path: Path) -> None:
    """Two relays rendering one config.json: one's clean stop, run while the other is between reading
    the file and writing it, waits its turn, and the user's entry is back after both clean stops."""
    filename, user = USERS_OWN["docker-config"]
    path = tmp_path / filename
    path.write_text(user)
    waiting = threading.Event()  # set when the first relay waits for the lock, or is done
    first = RenderSink(parse(f"docker-config={path}"), HOSTS, sleep=lambda _: waiting.set())
    exchange(first, "first-token")
    paused = PausedDockerConfig()
    second = RenderSink(Render("docker-config", paused, path), HOSTS)
    writing = threading.Thread(target=exchange, args=(second, "second-token"))
    writing.start()
    assert paused.inside.wait(HANG), "the second relay never began its write"

    def stop() -> None:
        first.clear()
        waiting.set()

    stopping = threading.Thread(target=stop)
    stopping.start()
    assert waiting.wait(HANG), "the first relay's clean stop neither waited nor ended"
    paused.go.set()
    writing.join()
    stopping.join()
    second.clear()
    assert path.read_text() == user
    assert not path.with_name(filename + ".tokenrelay-aside").exists()
    assert not path.with_name(filename + ".tokenrelay-lock").exists()


def test_a_lock_held_too_long_is_an_error_naming_the_lock_file(tmp_path: Path) -> None:
    """A render whose lock another process holds over 10 s is not written: the error names the lock
    file and the file stays as it was; the next refresh, with the lock free, writes it."""
    filename, user = USERS_OWN["docker-config"]
    path = tmp_path / filename
    path.write_text(user)
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    sink = RenderSink(parse(f"docker-config={path}"), HOSTS, clock=lambda: now[0], sleep=sleep)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path) + ".tokenrelay-lock"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(SinkError) as caught:
            sink.write_tokens({AUD: token("tok")})
    finally:
        holder.kill()
        holder.wait()
    assert f"{path}.tokenrelay-lock for over 10 s" in str(caught.value)
    assert path.read_text() == user
    sink.write_tokens({AUD: token("tok")})
    assert sink.render.format.tokens(path.read_text())["registry.example.test"] == "tok"


# Another process that takes a render's lock and keeps it until killed.
HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(600)
"""
