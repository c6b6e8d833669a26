"""Azure Pipelines: the job's OIDC endpoint mints a token for a service connection at every exchange.

``POST $SYSTEM_OIDCREQUESTURI?api-version=7.1&serviceConnectionId=ID`` with the job's
``SYSTEM_ACCESSTOKEN`` answers ``{"oidcToken": ...}``; its audience is Entra ID's fixed
``api://AzureADTokenExchange`` and its subject ``sc://ORG/PROJECT/CONNECTION``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...errors import ConfigError
from ...lite.names import DEFAULT_EXCHANGE_TIMEOUT, where
from . import httpfetch
from .base import IdToken, Source, SourceInputs, checked, signed_query

if TYPE_CHECKING:
    import aiohttp

URL_VARIABLE = "SYSTEM_OIDCREQUESTURI"
TOKEN_VARIABLE = "SYSTEM_ACCESSTOKEN"
CONNECTION_VARIABLE = "AZURESUBSCRIPTION_SERVICE_CONNECTION_ID"
CONNECTION_SETTING = where("azure_service_connection_id")
API_VERSION = "7.1"


@dataclass(slots=True)
class AzurePipelinesSource(Source):
    """Azure Pipelines' ``oidctoken`` endpoint, for one service connection."""

    name = "azure-pipelines"
    platform = "Azure Pipelines"
    mints = True
    options = ("azure_service_connection_id",)
    setup = (
        f"map the job's access token into the step (`env: {TOKEN_VARIABLE}: $(System.AccessToken)`) "
        f"and name the workload-identity service connection with {CONNECTION_SETTING}"
    )

    session: aiohttp.ClientSession | None
    request_url: str = field(repr=False)
    access_token: str = field(repr=False)
    connection: str
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    wall: Callable[[], float] = time.time
    description: str = ""

    def __post_init__(self) -> None:
        self.description = (
            f"Azure Pipelines' OIDC endpoint ({URL_VARIABLE}) for service connection {self.connection}"
        )

    @classmethod
    def build(cls, inputs: SourceInputs) -> AzurePipelinesSource:
        env = inputs.environ
        missing = [name for name in (URL_VARIABLE, TOKEN_VARIABLE) if not env.get(name)]
        if missing:
            raise ConfigError(f"--id-token-source azure-pipelines needs {' and '.join(missing)}; {cls.setup}")
        connection = inputs.settings.get("azure_service_connection_id") or env.get(CONNECTION_VARIABLE)
        if not connection:
            raise ConfigError(
                f"--id-token-source azure-pipelines needs the service connection's id: {CONNECTION_SETTING}, "
                f"else {CONNECTION_VARIABLE} (set by the AzureCLI@2 and AzurePowerShell tasks)"
            )
        return cls(
            inputs.session, env[URL_VARIABLE], env[TOKEN_VARIABLE], connection, inputs.timeout, inputs.wall
        )

    @classmethod
    def marker(cls, environ: Mapping[str, str]) -> str | None:
        if environ.get("TF_BUILD", "").lower() == "true" and environ.get(URL_VARIABLE):
            return f"TF_BUILD=True and {URL_VARIABLE} is set"
        return None

    async def read(self) -> IdToken:
        body = await httpfetch.fetch(
            self.session,
            "POST",
            self.request_url,
            what=self.description,
            params={"api-version": API_VERSION, "serviceConnectionId": self.connection},
            headers={
                "Authorization": f"Bearer {self.access_token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
            timeout=self.timeout,
        )
        return checked(httpfetch.json_field(body, "oidcToken", self.description), self.description, self.wall)

    def secrets(self) -> tuple[str, ...]:
        return (self.access_token, *signed_query(self.request_url))

    def fix(self) -> str:
        return self.setup
