"""``git-credential-tokenrelay``: the git credential-helper protocol.

git runs ``git-credential-tokenrelay get`` with ``key=value`` lines on stdin (``protocol``, ``host``
with its port, ``path``, ``capability[]``) ending at a blank line or EOF. For a configured host the
answer is ``username=_token``, ``password=<token>`` and ``password_expiry_utc`` (git >= 2.41 drops
the credential when it has expired); when git announced ``capability[]=authtype`` (git >= 2.46) it is
``authtype=Bearer`` and ``credential=<token>`` instead, marked ephemeral so no storing helper keeps
it. A host that is not configured gets nothing, and git asks its next helper. ``store`` and
``erase`` are accepted and ignored; unknown actions are ignored, as git asks of helpers.
Errors go to stderr (git shows them) with exit status 1.
"""

import sys

from ..lite import environ as process_environ
from . import USERNAME, Credential, credential_error, failure_line, run_main
from .hosts import load, match
from .source import fetcher

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TextIO

    from ..errors import InputError

MAX_INPUT = 1 << 20


def parse(text: str) -> dict[str, list[str]]:
    """git's ``key=value`` lines up to the first blank line: each key with its values in order."""
    if len(text) > MAX_INPUT:
        raise _input_error("over 1 MiB of input")
    attributes: dict[str, list[str]] = {}
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line:
            break
        key, sep, value = line.partition("=")
        if not sep or not key or "\0" in line:
            raise _input_error(f"line {number} is not key=value")
        attributes.setdefault(key, []).append(value)
    return attributes


def _input_error(message: str) -> "InputError":
    # errors is imported only when git's input is wrong: a successful run never loads it.
    from ..errors import InputError

    return InputError(message)


def answer(attributes: "Mapping[str, list[str]]", credential: Credential) -> str:
    """The lines to print for a configured host."""
    token = credential.token
    if any(c in token for c in "\r\n\0"):
        raise credential_error("the token has a line break in it, which git's protocol cannot carry")
    expires = credential.expiry()
    expiry = [f"password_expiry_utc={int(expires)}"] if expires is not None else []
    if "authtype" in attributes.get("capability[]", []):
        lines = ["capability[]=authtype", "authtype=Bearer", f"credential={token}", "ephemeral=1", *expiry]
    else:
        lines = [f"username={USERNAME}", f"password={token}", *expiry]
    return "\n".join(lines) + "\n"


def _first(attributes: "Mapping[str, list[str]]", key: str) -> str:
    values = attributes.get(key)
    return values[-1] if values else ""


def handle(
    action: str,
    stdin: "TextIO",
    stdout: "TextIO",
    *,
    environ: "Mapping[str, str] | None" = None,
    fetch: "Callable[[str], Credential] | None" = None,
    stderr: "TextIO | None" = None,
) -> int:
    """Run one protocol action; the exit status. Never raises, never prints a traceback."""
    env = process_environ() if environ is None else environ
    err = stderr if stderr is not None else sys.stderr
    try:
        text = stdin.read(MAX_INPUT + 1)
        if action != "get":
            return 0
        attributes = parse(text)
        host_text, protocol = _first(attributes, "host"), _first(attributes, "protocol").lower()
        if not host_text and _first(attributes, "url"):
            host_text, protocol = _first(attributes, "url"), ""
        if not host_text:
            return 0
        host = match(load(env), host_text, protocol or None)
        if host is None:
            return 0
        stdout.write(answer(attributes, (fetch or fetcher(env))(host.audience)))
        return 0
    except Exception as exc:  # git shows stderr to the user: one line, never a traceback
        err.write(
            failure_line(
                exc,
                unreadable="git sent input this helper cannot read",
                not_text="git sent input that is not UTF-8 text",
            )
        )
    return 1


def main() -> int:
    return run_main(handle)


if __name__ == "__main__":
    sys.exit(main())
