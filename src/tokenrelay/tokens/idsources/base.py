"""The one interface every OIDC token source implements, and what it is built from.

A source is a class (google-auth's ``SubjectTokenSupplier``, Vault Agent's auto-auth methods): it
owns how it is built from the settings (``build``), whether the environment looks like its platform
(``detect``, for ``auto``), how it reads a token (``read``), what it says about itself
(``description``) and what to do when it fails (``fix``). ``registry.SOURCES`` is the one table that
names them; nothing else switches on a source's name.

A failure's message says what went wrong; the source states its fix once, in ``fix`` (``renewal``
for a token that expired), and ``explained`` is the one place that joins the two into the line a
user reads (the sidecar's log and /v1/status, ``tokenrelay exec``, the credential helpers' direct
exchange). The doctor shows them apart.

A source declares the secrets it sends its platform (``secrets``: an identity header, a request
token, a signed URL's query); ``unsaid`` is the one place that takes them out of anything quoted back
from that platform, so an endpoint that echoes its request cannot put them in a failure line.

Standard library only at import (aiohttp is named for the type checker): run's settings read the table.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

from ...errors import ConfigError, IdTokenError, IdTokenExpired
from ...lite import extras
from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT, where
from ...lite.redact import without

if TYPE_CHECKING:
    import aiohttp

# A metadata server on the link-local network answers in milliseconds or not at all: off the
# platform, a connection attempt must fail in about a second, not hang for the exchange's timeout.
METADATA_CONNECT_TIMEOUT = 1.0
# How long a CI job is assumed to run when the platform does not say: a token that cannot be minted
# anew and has less than this left is reported (warned once in the log, and by the doctor).
JOB_HORIZON = 3600.0


@dataclass(frozen=True, slots=True)
class IdToken:
    """An OIDC token as read, with its expiry when it is a JWT."""

    value: str = field(repr=False)
    expiry: float | None  # Unix time


def checked(raw: str, where: str, wall: Callable[[], float] = time.time) -> IdToken:
    """``raw`` as an IdToken; IdTokenError when it is empty or an expired JWT."""
    from ...lite.oidccheck import checked as checked_token  # (datetime): run's settings read this module

    return IdToken(*checked_token(raw, where, wall))


class IdTokenSource(Protocol):
    """What the exchanger reads through: every ``Source``, or a test's own reader."""

    description: str

    async def read(self) -> IdToken: ...

    def fix(self) -> str: ...

    def renewal(self) -> str: ...

    def secrets(self) -> tuple[str, ...]: ...


def unsaid(source: IdTokenSource, text: str) -> str:
    """``text`` without the secrets ``source`` sends its platform: the one place they are taken out."""
    return without(text, source.secrets())


def signed_query(url: str) -> tuple[str, ...]:
    """The secrets of a signed URL: its query, whole and each long value (a signature, a token), which
    an echo may quote decoded or reordered."""
    from urllib.parse import parse_qsl, urlsplit

    query = urlsplit(url).query
    # short values (``api-version=2.0``) are not secret, and taking them out would garble the line
    return (query, *(value for _, value in parse_qsl(query) if len(value) >= 16)) if query else ()


def explained(source: IdTokenSource, error: IdTokenError) -> IdTokenError:
    """``error`` as the user reads it: what went wrong (without the source's ``secrets``), then what
    to do about it (the source's ``renewal`` for a token that expired, else its ``fix``)."""
    expired = isinstance(error, IdTokenExpired)
    todo = source.renewal() if expired else source.fix()
    # a platform's own sentence, then ours: "x; fix", not "x.; fix"
    said = unsaid(source, error.message).removesuffix(".")
    told = (IdTokenExpired if expired else IdTokenError)(f"{said}; {todo}")
    told.retryable, told.retry_after = error.retryable, error.retry_after
    return told


@dataclass(frozen=True, slots=True)
class SourceInputs:
    """Everything a source may be built from: the settings it reads, the environment, the clock.

    ``daemon.source_inputs`` makes it from the settings; tests make it directly.
    """

    environ: Mapping[str, str] = field(repr=False)
    audience: str  # what a source that mints asks for: --id-token-audience, else the --auth-url
    id_token_file: str = ""
    id_token_env: str | None = None
    # Every other setting a source lists in its ``options`` that is set, by option name (e.g.
    # ``azure_service_connection_id``): a new source's setting needs no field here, nor wiring.
    settings: Mapping[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT  # total, of one read that asks the platform
    connect_timeout: float = METADATA_CONNECT_TIMEOUT  # of a metadata server's connection
    session: aiohttp.ClientSession | None = field(default=None, repr=False)  # None: one per request
    wall: Callable[[], float] = field(default=time.time, repr=False)
    # How a message names a setting: `tokenrelay run`'s flag and variable; the helpers' variable.
    spell: Callable[[str], str] = field(default=where, repr=False)


class Source(abc.ABC):
    """Where the platform's OIDC token comes from: one subclass per ``--id-token-source`` value."""

    __slots__ = ()

    name: ClassVar[str]  # the --id-token-source value
    platform: ClassVar[str]  # for people: "GitHub Actions", "a file"
    # True when every read asks the platform to mint a new token for the --id-token-audience.
    mints: ClassVar[bool] = False
    # True when the token is set once for the job (a CI variable): nothing renews it, so exchanges
    # work only while it lives. A file or a minting source is kept fresh by its platform.
    fixed: ClassVar[bool] = False
    # True when ``auto`` can only tell by asking (a metadata server): it tries a read, with short
    # timeouts, after every source that its markers in the environment name.
    probes: ClassVar[bool] = False
    # The settings beyond the audience that this source reads (config refuses the others with it;
    # SourceInputs carries them), and those it cannot do without.
    options: ClassVar[tuple[str, ...]] = ()
    required: ClassVar[tuple[str, ...]] = ()
    # What the platform must provide for ``build`` to succeed: the doctor's fix when it does not.
    setup: ClassVar[str] = "choose the --id-token-source of the platform tokenrelay runs on"
    # What this source imports at its first read and an extra of tokenrelay's installs: the module,
    # its distribution and the extra, e.g. ("botocore", "botocore", "aws"). None: nothing beyond the package.
    needs: ClassVar[tuple[str, str, str] | None] = None

    description: str  # where this one reads, for logs, /v1/status and the doctor; never a secret

    @classmethod
    @abc.abstractmethod
    def build(cls, inputs: SourceInputs) -> Source:
        """The source, from the settings; ConfigError naming what is missing."""

    @classmethod
    def missing(cls) -> str | None:
        """The command that installs what this source ``needs`` when it is not installed, else None."""
        if cls.needs is None:
            return None
        module, _, extra = cls.needs
        return extras.missing(module, extra)

    @classmethod
    def require(cls) -> None:
        """ConfigError naming the command that installs what this source ``needs``, when it is missing."""
        command = cls.missing()
        if command is not None:
            assert cls.needs is not None
            raise ConfigError(f"the {cls.name} OIDC token source needs {cls.needs[1]}: {command}")

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        """Why ``auto`` would choose this source here (its platform's own markers), else None."""
        return None

    @classmethod
    def detect(cls, inputs: SourceInputs) -> tuple[str, Source] | None:
        """For ``auto``: why this source fits here and the source, else None. Cheap: no network.
        ConfigError when the markers say this platform but its inputs are missing."""
        why = cls.marker(inputs.environ)
        return None if why is None else (why, cls.build(inputs))

    @abc.abstractmethod
    async def read(self) -> IdToken:
        """The current OIDC token, read or minted afresh; IdTokenError saying what went wrong (and
        not what to do: ``explained`` appends ``fix``, or ``renewal`` to IdTokenExpired)."""

    @abc.abstractmethod
    def fix(self) -> str:
        """What to do when ``read`` fails: the flag, variable or setting to change. Appended to every
        failure of ``read`` by ``explained``; the doctor's fix column."""

    def secrets(self) -> tuple[str, ...]:
        """What this source sends its platform that must never be shown: taken out of every failure
        (``unsaid``). A source whose requests carry a credential declares it here."""
        return ()

    def choice(self) -> tuple[Source, str | None]:
        """The source that reads, and why it was chosen when it was detected (None: it was named)."""
        return self, None

    def renewal(self) -> str:
        """What to do when the token read is expired or past its renewal: appended to an expired
        token's error by ``explained``; the doctor's fix for ``oidc.expiry``."""
        return "fetch a fresh token: whatever sets it has stopped renewing it"

    def horizon(self, now: float) -> float:
        """How much longer, from ``now``, a job here is likely to run, in seconds."""
        return JOB_HORIZON

    def shortfall(self, expiry: float | None, now: float) -> str | None:
        """Why a token of this source expiring at ``expiry`` will not last the job, else None. Only a
        ``fixed`` source can fall short: the others hand out a fresh token at every exchange."""
        if not self.fixed or expiry is None:
            return None
        end = now + self.horizon(now)
        if expiry >= end:
            return None
        from ...lite.timestamps import format_timestamp

        return (
            f"the OIDC token in {self.description} expires at {format_timestamp(expiry)}, in "
            f"{max(expiry - now, 0):.0f}s, before the job is likely to end ({format_timestamp(end)}); "
            f"{self.platform} sets it once and tokenrelay cannot mint another, so exchanges fail after it"
        )
