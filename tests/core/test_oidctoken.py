"""The OIDC token's checks, as the sidecar's sources and the helpers' direct exchange both apply them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenrelay.errors import IdTokenError, IdTokenExpired
from tokenrelay.lite.oidccheck import checked, read_id_token_file
from tokenrelay.testing import make_jwt

NOW = 1_800_000_000.0


def _now() -> float:
    return NOW


def test_checked_strips_and_takes_a_jwts_expiry() -> None:
    """A JWT keeps its ``exp``; an opaque token is accepted with no expiry; whitespace is dropped."""
    jwt = make_jwt({"exp": NOW + 60})
    assert checked(f" {jwt}\n", "here", _now) == (jwt, NOW + 60)
    assert checked("opaque\n", "here", _now) == ("opaque", None)


def test_checked_refuses_an_empty_token_saying_where() -> None:
    """An empty or blank token is refused, naming where it was read."""
    with pytest.raises(IdTokenError, match=r"^the OIDC token in env X \(named by Y\) is empty$"):
        checked(" \n", "env X (named by Y)", _now)


def test_checked_refuses_an_expired_jwt_without_quoting_it() -> None:
    """A JWT whose ``exp`` has passed is refused as expired, with its expiry time, never the token."""
    jwt = make_jwt({"exp": 1_000_000_000})
    with pytest.raises(
        IdTokenExpired, match="^the OIDC token in here expired at 2001-09-09T01:46:40.000Z$"
    ) as caught:
        checked(jwt, "here", _now)
    assert jwt.split(".")[1] not in str(caught.value)


def test_file_is_read_and_checked(tmp_path: Path) -> None:
    """A token file is read, stripped, and checked against the injected wall clock."""
    path = tmp_path / "token"
    path.write_text(make_jwt({"exp": NOW - 1}))
    with pytest.raises(IdTokenError, match=f"the OIDC token in file {path} expired"):
        read_id_token_file(str(path), _now)
    path.write_text("opaque\n")
    assert read_id_token_file(str(path), _now) == ("opaque", None)


def test_missing_file_says_where_it_looked(tmp_path: Path) -> None:
    """A missing file is one line naming the path (the file source's fix follows it, see test_idtoken)."""
    path = tmp_path / "absent"
    with pytest.raises(IdTokenError) as caught:
        read_id_token_file(str(path), _now)
    assert str(caught.value) == f"no OIDC token file at {path}"


def test_directory_says_it_is_one(tmp_path: Path) -> None:
    """A directory (the volume, not the file in it) is refused as a directory, not as a missing file."""
    with pytest.raises(IdTokenError, match=r"is a directory, not a file$"):
        read_id_token_file(str(tmp_path), _now)


@pytest.mark.parametrize(
    ("content", "message"),
    [(b"x" * (64 * 1024 + 1), "is over 64 KiB: not a token"), (b"t\xc3\xa9", "is not ASCII text")],
)
def test_file_that_cannot_be_a_token_is_refused(tmp_path: Path, content: bytes, message: str) -> None:
    """A file over 64 KiB or not ASCII is refused before anything is sent."""
    path = tmp_path / "token"
    path.write_bytes(content)
    with pytest.raises(IdTokenError, match=f"^the OIDC token file {path} {message}$"):
        read_id_token_file(str(path), _now)
