"""``tokenrelay go-auth``: a ``GOAUTH`` command for the go command (Go 1.24 and later).

``GOAUTH='command tokenrelay go-auth'`` makes ``go`` run it once with no argument before its first
HTTPS fetch, and again with the URL as the argument (the server's 4xx answer on stdin) when a
server refuses. It answers, for every configured host (``TOKENRELAY_HOSTS``, or only the one the URL
names), credential sets in go's format::

    https://goproxy.example.com/

    Authorization: Basic base64(_token:TOKEN)

A URL on no configured host gets an empty answer, and go carries on without credentials. go attaches
GOAUTH headers to HTTPS requests only, so a host is offered as ``https://``. Failures are one line on
stderr and exit status 1 (go shows it with ``-x``). Standard library only: ``binascii`` for the
base64, no ``json``, no ``re``.
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

MAX_INPUT = 1 << 20


def handle(
    action: str,
    stdin: "TextIO",
    stdout: "TextIO",
    *,
    environ: "Mapping[str, str] | None" = None,
    fetch: "Callable[[str], Credential] | None" = None,
    stderr: "TextIO | None" = None,
) -> int:
    """Answer go: ``action`` is the URL go asks about, or empty for the first call. Never raises."""
    env = process_environ() if environ is None else environ
    err = stderr if stderr is not None else sys.stderr
    try:
        hosts = load(env)
        if action:
            stdin.read(MAX_INPUT)  # the refusal go sends: nothing in it changes the answer
            host = match(hosts, action)
            hosts = () if host is None else (host,)
        get = fetch or fetcher(env)
        by_audience: dict[str, list[str]] = {}
        for host in hosts:
            by_audience.setdefault(host.audience, []).append(host.netloc)
        stdout.write(
            "".join(credential_set(netlocs, get(audience).token) for audience, netlocs in by_audience.items())
        )
        return 0
    except Exception as exc:  # go logs stderr with -x: one line, never a traceback
        err.write(
            failure_line(
                exc,
                unreadable="go sent input this command cannot read",
                not_text="go sent input that is not UTF-8 text",
            )
        )
    return 1


def credential_set(netlocs: "list[str]", token: str) -> str:
    """One of go's credential sets: the hosts' URLs, a blank line, the header, a blank line."""
    from binascii import b2a_base64

    if any(c in token for c in "\r\n\0"):
        from . import credential_error

        raise credential_error("the token has a line break in it, which a header cannot carry")
    basic = b2a_base64(f"{USERNAME}:{token}".encode(), newline=False).decode()
    urls = "".join(f"https://{netloc}/\n" for netloc in netlocs)
    return f"{urls}\nAuthorization: Basic {basic}\n\n"


def main(argv: "list[str] | None" = None) -> int:
    """``tokenrelay go-auth [URL]``: ``argv`` is what follows ``go-auth``."""
    words = sys.argv[2:] if argv is None else argv
    return run_main(handle, words[0] if words else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
