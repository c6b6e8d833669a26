"""The options ``tokenrelay exec`` has beyond ``tokenrelay run``'s, declared once as run's table
(``sidecar.settings.OPTIONS``) declares run's: flags, environment names and the generated reference
(docs/exec.md) come from here.
Every option of run applies to exec as it is (--hosts, the hosts that get a token, is run's too:
its --render files write them); these only say what the command gets."""

from __future__ import annotations

from ..options import Option
from .targets import ALL, TARGETS

EXEC_OPTIONS: tuple[Option, ...] = (
    Option(
        "configure",
        "Set these clients up, in the command's environment only, to take their credentials from "
        "tokenrelay for the --hosts (comma-separated, repeatable; `all` for every one).",
        kind="list",
        repeatable=True,
        default=(),
        choices=(*TARGETS, ALL),
        metavar="TARGET[,TARGET...]",
    ),
    Option(
        "export_token",
        "Also put the API token in the command's environment variable VAR. That copy is the token "
        "held when the command starts and is not refreshed: it goes stale while tokenrelay keeps "
        "the socket's fresh.",
        metavar="VAR",
    ),
)
