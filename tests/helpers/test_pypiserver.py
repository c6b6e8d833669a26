"""pip against the real pypiserver, which answers 403 (not 401) to wrong credentials.

pip asks the keyring only after a 401. With ``_token@`` in the index URL (what pip's ``subprocess``
provider needs, to know which username to ask for) pip first sends ``_token`` with an empty password,
pypiserver answers 403, and pip never asks: docs/credential-helpers.md says so and shows the form that
works, the ``import`` provider with the plain URL (no credentials, 401, then the backend answers).
"""

from __future__ import annotations

import base64
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import pytest

from ..support.helpers import Stack, TokenCheck, run, tiny_wheel

pytestmark = pytest.mark.e2e


class Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """No access log on the test's stderr."""


@pytest.fixture(scope="module")
def index(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WSGIServer, TokenCheck]]:
    """pypiserver with one wheel, every page behind Basic ``_token:<the index audience's token>``."""
    root = tmp_path_factory.mktemp("pypiserver")
    name, wheel = tiny_wheel()
    (root / name).write_bytes(wheel)
    check = TokenCheck(stack.service, audience=stack.index.netloc)

    def auther(user: str, password: str) -> bool:
        return check.basic_ok("Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # its bottle imports cgi
        import pypiserver

    app = pypiserver.app(
        roots=[str(root)], authenticate=["download", "list"], password_file=".", auther=auther
    )
    server = make_server("127.0.0.1", 0, app, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server, check
    server.shutdown()
    thread.join(10)


def pip_download(
    index: tuple[WSGIServer, TokenCheck], env: dict[str, str], dest: Path, provider: str, user: str
) -> tuple[int, str]:
    netloc = f"127.0.0.1:{index[0].server_port}"
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-cache-dir",
        f"--keyring-provider={provider}",
        f"--index-url=http://{user}{netloc}/simple/",
        f"--dest={dest}",
        "tinypkg==1.0",
    ]
    # pypiserver's netloc gets the index server's audience: the sidecar keeps a token for that.
    client = env | {"TOKENRELAY_HOSTS": f"{netloc}={index[1].audience}"}
    result = run(argv, client, timeout=120)
    return result.returncode, result.stdout + result.stderr


def test_pip_import_provider_with_the_plain_url_gets_in(
    stack: Stack, index: tuple[WSGIServer, TokenCheck], client_env: dict[str, str], tmp_path: Path
) -> None:
    """The documented form for 403 indexes: no username in the URL, ``import`` provider: pip downloads."""
    accepted = len(index[1].accepted)
    status, output = pip_download(index, client_env, tmp_path, "import", user="")
    assert status == 0, output
    assert (tmp_path / "tinypkg-1.0-py3-none-any.whl").exists()
    assert set(index[1].accepted[accepted:]) == {stack.current(stack.index.netloc)}


def test_pip_subprocess_provider_with_token_user_is_refused_by_a_403_index(
    index: tuple[WSGIServer, TokenCheck], client_env: dict[str, str], tmp_path: Path
) -> None:
    """What the docs warn of: ``_token@`` in the URL gets pypiserver's 403, and pip never asks the keyring."""
    accepted, refused = len(index[1].accepted), index[1].refused
    status, output = pip_download(index, client_env, tmp_path, "subprocess", user="_token@")
    assert status != 0
    assert "No matching distribution found for tinypkg==1.0" in output  # pip hides the 403 itself
    assert index[1].accepted[accepted:] == []
    assert index[1].refused > refused  # pypiserver did see _token with an empty password
