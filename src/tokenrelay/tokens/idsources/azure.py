"""Azure managed identity: a token for our audience (the ``resource``) at every exchange.

Where the platform sets ``IDENTITY_ENDPOINT`` and ``IDENTITY_HEADER`` (App Service, Container Apps,
Functions) that endpoint is asked (``api-version=2019-08-01``, header ``X-IDENTITY-HEADER``); else
the instance metadata service, ``http://169.254.169.254/metadata/identity/oauth2/token
?api-version=2018-02-01&resource=AUD`` with ``Metadata: true`` (azure-identity's
``AZURE_POD_IDENTITY_AUTHORITY_HOST`` overrides its address). ``AZURE_CLIENT_ID`` picks a
user-assigned identity. An Azure workload-identity pod's ``AZURE_FEDERATED_TOKEN_FILE`` is the
``file`` source, not this one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT
from . import httpfetch
from .base import METADATA_CONNECT_TIMEOUT, IdToken, Source, SourceInputs, checked

if TYPE_CHECKING:
    import aiohttp

IMDS = "http://169.254.169.254"
IMDS_VARIABLE = "AZURE_POD_IDENTITY_AUTHORITY_HOST"
IMDS_PATH = "/metadata/identity/oauth2/token"
ENDPOINT_VARIABLE, HEADER_VARIABLE = "IDENTITY_ENDPOINT", "IDENTITY_HEADER"
CLIENT_VARIABLE = "AZURE_CLIENT_ID"
SECRET_HEADER = "X-IDENTITY-HEADER"  # carries IDENTITY_HEADER, the endpoint's shared secret


@dataclass(slots=True)
class AzureSource(Source):
    """Azure's managed identity endpoint: App Service's, else IMDS."""

    name = "azure"
    platform = "Azure"
    mints = True
    probes = True
    setup = "assign a managed identity to the VM, scale set, App Service, Container App or Function"

    session: aiohttp.ClientSession | None
    url: str
    headers: Mapping[str, str] = field(repr=False)
    params: Mapping[str, str]
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    connect_timeout: float = METADATA_CONNECT_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = ""

    @classmethod
    def build(cls, inputs: SourceInputs) -> AzureSource:
        env = inputs.environ
        params = {"resource": inputs.audience}
        if env.get(CLIENT_VARIABLE):
            params["client_id"] = env[CLIENT_VARIABLE]
        endpoint, secret = env.get(ENDPOINT_VARIABLE), env.get(HEADER_VARIABLE)
        if endpoint and secret:
            where = f"Azure's managed identity endpoint ({ENDPOINT_VARIABLE})"
            headers = {SECRET_HEADER: secret}
            params["api-version"] = "2019-08-01"
            url = endpoint
        else:
            base = (env.get(IMDS_VARIABLE) or IMDS).rstrip("/")
            where = f"Azure's instance metadata service at {base}"
            headers = {"Metadata": "true"}
            params["api-version"] = "2018-02-01"
            url = base + IMDS_PATH
        return cls(
            inputs.session, url, headers, params, inputs.timeout, inputs.connect_timeout, inputs.wall, where
        )

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        if environ.get(ENDPOINT_VARIABLE) and environ.get(HEADER_VARIABLE):
            return (
                f"{ENDPOINT_VARIABLE} and {HEADER_VARIABLE} are set (App Service, Container Apps, Functions)"
            )
        return None

    async def read(self) -> IdToken:
        body = await httpfetch.fetch(
            self.session,
            "GET",
            self.url,
            what=self.description,
            params=self.params,
            headers={**self.headers, "Accept": "application/json"},
            timeout=self.timeout,
            connect_timeout=self.connect_timeout,
        )
        return checked(
            httpfetch.json_field(body, "access_token", self.description), self.description, self.wall
        )

    def secrets(self) -> tuple[str, ...]:
        return tuple(value for name, value in self.headers.items() if name == SECRET_HEADER)

    def fix(self) -> str:
        return (
            f"{self.setup}; with several, name the one to use in {CLIENT_VARIABLE}. In an Azure "
            "workload-identity pod use --id-token-source file with "
            "--id-token-file $AZURE_FEDERATED_TOKEN_FILE"
        )
