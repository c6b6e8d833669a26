"""``docker-credential-tokenrelay``: the Docker credential-helper protocol (docker, skopeo, podman, buildah).

``get`` reads a server string on stdin (``registry.example.com``, ``127.0.0.1:5000`` or
``https://index.docker.io/v1/``) and answers ``{"ServerURL", "Username": "_token", "Secret"}`` for a
configured host. Every other host gets exactly ``credentials not found in native keychain``, the one
error after which docker and skopeo carry on anonymously; any other error is fatal for them, so it
is kept for real failures. Errors go to stdout with exit status 1, as the protocol wants, and to
stderr as well: the docker CLI discards a helper's stdout error and pulls anonymously, so stderr,
which it passes through, is the only place its user sees why.
``store`` and ``erase`` accept and ignore their input: nothing is stored, every token is fetched.

``get`` imports neither ``json`` nor ``re`` (``json`` imports it, with ``enum`` and ``functools``):
together they cost more than the rest of its run, so its one JSON object is written by hand.
"""

import sys

from ..lite import environ as process_environ
from . import USERNAME, Credential, failure_line, run_main
from .hosts import load, match
from .source import fetcher

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import TextIO

NOT_FOUND = "credentials not found in native keychain"
MAX_INPUT = 64 * 1024
PROG = "docker-credential-tokenrelay"


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
    try:
        if action == "get":
            return _get(stdin.read(MAX_INPUT + 1), stdout, env, fetch or fetcher(env), stderr)
        if action in ("store", "erase"):
            stdin.read()
            return 0
        if action == "list":
            import json

            hosts = load(env)
            json.dump({host.netloc: USERNAME for host in hosts}, stdout)
            stdout.write("\n")
            return 0
        if action == "version":
            from .._version import __version__

            stdout.write(f"{PROG} (tokenrelay) {__version__}\n")
            return 0
        usage = f"{PROG} get|store|erase|list|version"
        return _fail(f"tokenrelay: unknown action {action!r}; usage: {usage}\n", stdout, stderr)
    except Exception as exc:  # the client shows our stdout as the error: one line, never a traceback
        line = failure_line(
            exc,
            unreadable="the client sent input this helper cannot read",
            not_text="stdin is not UTF-8 text; it should be a server such as registry.example.com",
        )
        return _fail(line, stdout, stderr)


def _fail(line: str, stdout: "TextIO", stderr: "TextIO | None") -> int:
    """Report a failure where every client looks: stdout (the protocol) and stderr (the docker CLI)."""
    stdout.write(line)
    if stderr is not None:
        stderr.write(line)
    return 1


def _get(
    server_text: str,
    stdout: "TextIO",
    env: "Mapping[str, str]",
    fetch: "Callable[[str], Credential]",
    stderr: "TextIO | None",
) -> int:
    server = server_text.strip()
    if not server or len(server_text) > MAX_INPUT:
        got = "nothing" if not server else "over 64 KiB"
        return _fail(
            f"tokenrelay: expected a server such as registry.example.com on stdin, got {got}\n",
            stdout,
            stderr,
        )
    hosts = load(env)
    host = match(hosts, server)
    if host is None:
        if not hosts and stderr is not None:
            stderr.write("tokenrelay: no hosts configured; set TOKENRELAY_HOSTS, e.g. registry.example.com\n")
        stdout.write(NOT_FOUND + "\n")
        return 1
    stdout.write(answer(server, fetch(host.audience).token))
    return 0


def answer(server: str, token: str) -> str:
    """``get``'s output line, byte for byte what ``json.dumps`` of the same object gives."""
    return (
        f'{{"ServerURL": {json_string(server)}, "Username": {json_string(USERNAME)}, '
        f'"Secret": {json_string(token)}}}\n'
    )


def json_string(text: str) -> str:
    """``text`` as a JSON string, exactly as ``json.dumps(text)`` writes it: ASCII only, so the
    output is the same whatever encoding stdout has."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return f'"{text}"'  # a host name or a token: nothing to escape, no table to build on every run
    escaped = text.translate(_escapes())
    if not escaped.isascii():
        escaped = "".join(c if c < "\x80" else _escape_wide(ord(c)) for c in escaped)
    return f'"{escaped}"'


def _escapes() -> dict[int, str]:
    """What json.dumps escapes within ASCII: its short forms, else \\u00XX for controls and DEL."""
    table = {code: f"\\u{code:04x}" for code in (*range(0x20), 0x7F)}
    table.update({ord('"'): '\\"', ord("\\"): "\\\\", 8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"})
    return table


def _escape_wide(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # beyond the BMP: a UTF-16 surrogate pair, as JSON requires
    return f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}"


def main() -> int:
    return run_main(handle)


if __name__ == "__main__":
    sys.exit(main())
