"""The platform token file, rotated like kubelet's: symlink swap, before 80% of the token's life."""

from __future__ import annotations

from pathlib import Path

from tokenrelay.emulator import RotatingTokenFile
from tokenrelay.testing import FakeClock, make_jwt


def token_dirs(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("..2"))


async def test_rotation_swaps_the_symlink_at_80_percent(tmp_path: Path) -> None:
    """The token path keeps its name, points through ..data, and gets a new token at 80% of 100 s."""
    clock = FakeClock()
    issued: list[str] = []

    async def mint() -> str:
        token = make_jwt(
            {"jti": f"p{len(issued) + 1}", "iat": int(clock.wall()), "exp": int(clock.wall()) + 100}
        )
        issued.append(token)
        return token

    writer = RotatingTokenFile(tmp_path, mint, clock=clock, sleep=clock.sleep)
    await writer.start()
    try:
        path = writer.path
        assert path.is_symlink()
        assert str(path.readlink()) == "..data/token"
        assert (tmp_path / "..data").is_symlink()
        assert path.read_text() == issued[0]
        first_dir = (tmp_path / "..data").readlink()
        await clock.advance(79)
        assert path.read_text() == issued[0]
        await clock.advance(2)
        assert len(issued) == 2
        assert path.read_text() == issued[1]
        assert not (tmp_path / first_dir).exists()  # the old directory is removed
        assert token_dirs(tmp_path) == [str((tmp_path / "..data").readlink())]
        await clock.advance(80)
        assert path.read_text() == issued[2]
    finally:
        await writer.stop()


async def test_failed_mint_is_retried(tmp_path: Path) -> None:
    """A mint that fails is retried after a backoff; the old token stays in place meanwhile."""
    clock = FakeClock()
    calls = 0

    async def mint() -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ConnectionError("issuer down")
        return make_jwt({"jti": f"p{calls}", "iat": 0, "exp": 10})

    writer = RotatingTokenFile(tmp_path, mint, clock=clock, sleep=clock.sleep)
    await writer.start()
    try:
        await clock.advance(8.5, step=0.5)
        assert calls == 2
        assert writer.rotations == 1
        await clock.advance(1.5, step=0.5)
        assert calls == 3
        assert writer.rotations == 2
    finally:
        await writer.stop()
