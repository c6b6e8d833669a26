"""Google Cloud: the metadata server mints an ID token for our audience at every exchange.

``GET http://$GCE_METADATA_HOST/computeMetadata/v1/instance/service-accounts/default/identity
?audience=AUD&format=full`` with ``Metadata-Flavor: Google`` (Compute Engine, GKE with workload
identity, Cloud Run, Cloud Functions, App Engine). ``GCE_METADATA_HOST`` is google-auth's own
override, so a test server or the emulator stands in for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from . import httpfetch
from .base import METADATA_CONNECT_TIMEOUT, IdToken, Source, SourceInputs, checked

if TYPE_CHECKING:
    import aiohttp

HOST_VARIABLE = "GCE_METADATA_HOST"
DEFAULT_HOST = "metadata.google.internal"
IDENTITY_PATH = "/computeMetadata/v1/instance/service-accounts/default/identity"


@dataclass(slots=True)
class GcpSource(Source):
    """The GCP metadata server's identity endpoint, for the default service account."""

    name = "gcp"
    platform = "Google Cloud"
    mints = True
    probes = True
    setup = "run on Google Cloud with a service account attached (or set GCE_METADATA_HOST)"

    session: aiohttp.ClientSession | None
    host: str
    audience: str
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    connect_timeout: float = METADATA_CONNECT_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = ""

    def __post_init__(self) -> None:
        self.description = f"the GCP metadata server at {self.host}"

    @classmethod
    def build(cls, inputs: SourceInputs) -> GcpSource:
        host = inputs.environ.get(HOST_VARIABLE) or DEFAULT_HOST
        return cls(inputs.session, host, inputs.audience, inputs.timeout, inputs.connect_timeout, inputs.wall)

    async def read(self) -> IdToken:
        body = await httpfetch.fetch(
            self.session,
            "GET",
            f"http://{self.host}{IDENTITY_PATH}",
            what=self.description,
            params={"audience": self.audience, "format": "full"},
            headers={"Metadata-Flavor": "Google"},
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
        )
        try:
            text = body.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        return checked(text, self.description, self.wall)

    def fix(self) -> str:
        return (
            "give the instance (or the GKE workload, through workload identity) a service account; "
            f"off Google Cloud, point {HOST_VARIABLE} at a metadata server"
        )
