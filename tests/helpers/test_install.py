"""How the helpers are installed: plain scripts on the environment's own interpreter, no launcher cost."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .conftest import script


@pytest.mark.parametrize(
    ("name", "module"),
    [("docker-credential-tokenrelay", "docker"), ("git-credential-tokenrelay", "git")],
)
def test_helpers_are_plain_scripts_on_this_interpreter(name: str, module: str) -> None:
    """Each helper on PATH runs this environment's python and calls its module's main, with no re import."""
    lines = Path(script(name)).read_text().splitlines()
    assert lines[0].startswith("#!")
    interpreter = Path(lines[0][2:].strip())
    assert interpreter.parent == Path(sys.executable).parent
    assert interpreter.name.startswith("python")
    code = [line for line in lines[1:] if line.strip() and not line.startswith("#")]
    assert code == ["import sys", f"from tokenrelay.helpers.{module} import main", "sys.exit(main())"]
