"""One exchange end to end: read the OIDC token afresh, then trade it at the token service."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from ..errors import IdTokenError
from ..lite.names import DEFAULT_EXCHANGE_TIMEOUT
from . import sts
from .idsources import IdTokenSource, explained
from .sts import Issued


@dataclass(slots=True)
class Exchanger:
    """The ``fetch`` callable a TokenProvider calls for each refresh."""

    session: aiohttp.ClientSession
    auth_url: str
    identity: str
    id_tokens: IdTokenSource
    timeout: float = DEFAULT_EXCHANGE_TIMEOUT
    # Told the OIDC token's expiry (Unix time, None when not a JWT) at every read, for metrics.
    on_id_token: Callable[[float | None], None] | None = field(default=None, repr=False)

    async def __call__(self, audience: str) -> Issued:
        try:
            id_token = await self.id_tokens.read()
        except IdTokenError as exc:
            raise explained(self.id_tokens, exc) from None
        if self.on_id_token is not None:
            self.on_id_token(id_token.expiry)
        return await sts.exchange(
            self.session, self.auth_url, audience, self.identity, id_token.value, timeout=self.timeout
        )
