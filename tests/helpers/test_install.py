"""How the helpers are installed: plain scripts on the environment's own interpreter, no launcher cost."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..support.helpers import script


@pytest.mark.parametrize(
    ("name", "module"),
    [("docker-credential-tokenrelay", "docker"), ("git-credential-tokenrelay", "git")],
)
def test_helpers_are_plain_scripts_on_this_interpreter(name: str, module: str) -> None:
    """Each helper on PATH runs this environment's python (the one pip wrote into ``tokenrelay``)
    and calls its module's main, importing nothing but sys, then leaves through exit_now: its text is
    pinned because every line of it costs start-up time on every pull and fetch."""
    lines = Path(script(name)).read_text().splitlines()
    assert lines[0] == "#!/bin/sh"
    launcher = Path(script(name)).with_name("tokenrelay").read_text().splitlines()[0]
    interpreter = Path(launcher[2:].strip())
    assert interpreter.parent == Path(sys.executable).parent
    assert interpreter.name.startswith("python")
    code = [line.strip() for line in lines[2:] if line.strip() and not line.startswith("#")]
    assert code[0] == "import sys"
    assert code[-3:] == [
        "from tokenrelay.helpers import exit_now",
        f"from tokenrelay.helpers.{module} import main",
        "exit_now(main())",
    ]
    imports = {line.split()[1] for line in code if line.startswith(("import ", "from "))}
    assert imports == {"sys", "tokenrelay", "site", "tokenrelay.helpers", f"tokenrelay.helpers.{module}"}


DISTLIB_LAUNCHER = """#!/bin/sh
'''exec' "{python}" "$0" "$@"
' '''"""


@pytest.mark.parametrize("launcher", ["#!{python}", DISTLIB_LAUNCHER])
def test_helper_runs_the_launchers_interpreter_without_site(tmp_path: Path, launcher: str) -> None:
    """The helper's /bin/sh line runs the interpreter named by the ``tokenrelay`` script beside it,
    in either form pip writes (a plain ``#!`` line, or distlib's /bin/sh one for long paths), with
    -S (no ``site``), -P, and the helper's own path and arguments."""
    seen = tmp_path / "argv"
    fake = tmp_path / "python"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{seen}"\n')
    fake.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    helper = bin_dir / "docker-credential-tokenrelay"
    shutil.copy(script("docker-credential-tokenrelay"), helper)
    (bin_dir / "tokenrelay").write_text(launcher.format(python=fake) + "\nimport sys\n")
    subprocess.run([str(helper), "get"], check=True)
    assert seen.read_text().splitlines() == ["-S", "-P", str(helper), "get"]


def test_helper_started_through_a_symlink_finds_its_interpreter(tmp_path: Path) -> None:
    """A helper symlinked onto PATH from a venv still runs that venv's python and answers."""
    link = tmp_path / "docker-credential-tokenrelay"
    link.symlink_to(script("docker-credential-tokenrelay"))
    result = subprocess.run([str(link), "version"], capture_output=True, text=True, check=True)
    assert result.stdout.startswith("docker-credential-tokenrelay (tokenrelay) ")


def test_a_client_that_stops_reading_gets_status_1_and_no_traceback(tmp_path: Path) -> None:
    """A helper whose stdout nobody reads any more (a broken pipe) exits 1, not 0, and prints nothing
    on stderr: no traceback, no "Exception ignored" from the interpreter's shutdown."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [script("docker-credential-tokenrelay"), "version"],
            stdin=subprocess.DEVNULL,
            stdout=write_end,
            stderr=subprocess.PIPE,
            env={**os.environ, "HOME": str(tmp_path)},
            check=False,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (result.returncode, result.stderr) == (1, b"")


def test_tokenrelay_is_a_plain_script_whose_go_auth_skips_the_cli() -> None:
    """``tokenrelay`` is a plain script on this environment's python (no console-script wrapper and its
    ``import re``): ``tokenrelay go-auth``, go's GOAUTH command, goes straight to the helper and leaves
    through exit_now; everything else goes to ``cli.main``."""
    lines = Path(script("tokenrelay")).read_text().splitlines()
    assert Path(lines[0][2:].strip()).parent == Path(sys.executable).parent
    code = [line.strip() for line in lines[1:] if line.strip() and not line.strip().startswith("#")]
    assert code[:2] == ["import sys", 'if sys.argv[1:2] == ["go-auth"]:']
    assert "exit_now(go_auth(sys.argv[2:]))" in code
    assert code[-2:] == ["from tokenrelay.cli import main", "sys.exit(main())"]
