"""Credential helpers for docker, skopeo, podman, git, pip and kubelet.

Each helper module is a pure ``handle(...) -> exit status`` plus a ``main()`` that wires the real
standard streams. The ``get`` paths import only the standard library: these run once per pull or
fetch, so their start-up time is the user's waiting time.
"""

import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the helpers' start-up
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol, TextIO

    class Handle(Protocol):
        def __call__(
            self,
            action: str,
            stdin: TextIO,
            stdout: TextIO,
            *,
            environ: Mapping[str, str] | None = None,
            stderr: TextIO | None = None,
        ) -> int: ...


def failure_line(exc: Exception, *, unreadable: str, not_text: str) -> str:
    """The one line a helper prints when ``handle`` fails, the same ladder for every helper: what the
    client sent that cannot be read, what to fix, or an internal error (never a traceback).

    ``unreadable`` says who sent what (``git sent input this helper cannot read``); ``not_text`` is
    the line for input that is not UTF-8.
    """
    from ..errors import CredentialError, InputError, RequestError

    if isinstance(exc, UnicodeDecodeError):
        return f"tokenrelay: {not_text}\n"
    if isinstance(exc, InputError | RequestError):
        return f"tokenrelay: {unreadable}: {exc}\n"
    if isinstance(exc, CredentialError):  # HostsError included
        return f"tokenrelay: {exc}\n"
    return f"tokenrelay: internal error ({type(exc).__name__}); please report it\n"


def run_main(handle: "Handle") -> int:
    """A helper executable: ``argv[1]`` is the action, the real streams are wired to ``handle``.

    Here, in the package every helper imports anyway, so that sharing it costs no import.
    """
    try:
        return handle(sys.argv[1] if len(sys.argv) > 1 else "", sys.stdin, sys.stdout, stderr=sys.stderr)
    except BrokenPipeError:  # the client stopped reading: nothing left to tell it
        return 1
    except KeyboardInterrupt:
        return 130
