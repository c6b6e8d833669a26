"""--token-file: what a tool reading the file sees."""

from __future__ import annotations

import logging
import stat
import threading
from pathlib import Path

import pytest

from tokenrelay.errors import SinkError
from tokenrelay.lite.files import write_atomic
from tokenrelay.serving.sinks import FileSink
from tokenrelay.tokens.sts import Issued
from tokenrelay.tokens.token import Token


def token(value: str, audience: str = "https://api.example.test") -> Token:
    return Token(
        value=value, audience=audience, received_at=0.0, lifetime=3600.0, refresh_at=1800.0, expire_wall=0.0
    )


def test_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    """A reader polling the file while it is rewritten many times only ever reads a whole token."""
    path = tmp_path / "token"
    # Distinct lengths, so that a torn or truncated read cannot pass for a written value.
    values = [f"{i:04d}" + "x" * (i * 37 % 4000) for i in range(300)]
    written = set(values)
    write_atomic(path, values[0].encode(), 0o600)
    done = threading.Event()
    seen: list[str] = []
    bad: list[int] = []

    def reader() -> None:
        while not done.is_set():
            text = path.read_text()
            seen.append(text)
            if text not in written:
                bad.append(len(text))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for value in values[1:]:
            write_atomic(path, value.encode(), 0o600)
    finally:
        done.set()
        thread.join()
    assert bad == [], f"partial reads of lengths {bad[:5]}"
    assert len(seen) > 10
    assert path.read_text() == values[-1]
    assert [p.name for p in tmp_path.iterdir()] == ["token"], "no temporary file is left behind"


def test_mode_is_applied_on_every_write(tmp_path: Path) -> None:
    """The configured mode replaces whatever mode the file had, whatever the umask."""
    path = tmp_path / "token"
    path.write_text("old")
    path.chmod(0o644)
    sink = FileSink(str(path), "https://api.example.test", 0o600)
    sink.write(token("t1-value"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    sink.mode = 0o640
    sink.write(token("t2-value"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_text() == "t2-value"


def test_file_holds_the_bare_token(tmp_path: Path) -> None:
    """The file holds exactly the token, no newline, like a projected service-account token."""
    path = tmp_path / "sub" / "dir" / "token"
    FileSink(str(path), "aud").write(token("abc.def.ghi", "aud"))
    assert path.read_bytes() == b"abc.def.ghi"


def test_sink_writes_only_its_audience(tmp_path: Path) -> None:
    """A sink for one audience ignores refreshes of the others."""
    path = tmp_path / "token"
    sink = FileSink(str(path), "registry.example.test")
    sink.exchanged(token("api-token"), duration=0.1, issued=Issued("api-token"))
    assert not path.exists()
    sink.exchanged(token("reg-token", "registry.example.test"), duration=0.1, issued=Issued("reg-token"))
    assert path.read_text() == "reg-token"


def test_write_failure_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A sink that cannot write logs the path and the cause, and never breaks the refresh."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    sink = FileSink(str(blocker / "token"), "aud")
    with caplog.at_level(logging.ERROR, logger="tokenrelay.sinks"):
        sink.exchanged(token("secret-value", "aud"), duration=0.1, issued=Issued("secret-value"))
    assert "token file not written" in caplog.text
    assert "secret-value" not in caplog.text
    with pytest.raises(SinkError, match=r"cannot write the token file .*/file/token \(--token-file\)"):
        sink.write(token("secret-value", "aud"))
