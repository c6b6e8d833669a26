"""Check an AWS Signature Version 4 the way AWS does, so the emulator's STS refuses what AWS refuses.

Standard library only, and independent of botocore: the aws source signs with botocore, and this
recomputes the signature from the request as received (canonical request, string to sign, the
derived key) per AWS's published algorithm:
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
Only the ``Authorization`` header form is taken (the SDKs' form for STS); the refusals carry AWS's
own codes and words. Unlike AWS, the request's time is not held to within 15 minutes of the
emulator's clock: tests move that clock by hours while botocore signs with the real one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote

ALGORITHM = "AWS4-HMAC-SHA256"


class Refusal(Exception):
    """AWS's error code, HTTP status and message for a request whose signature does not hold."""

    def __init__(self, code: str, message: str, status: int = 403) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.status = code, message, status


@dataclass(frozen=True, slots=True)
class Signed:
    """What a verified signature says: who signed, for which region and service."""

    access_key: str
    region: str
    service: str
    session_token: str | None = field(default=None, repr=False)


def verify(
    method: str,
    path: str,
    query: str,
    headers: Mapping[str, str],
    body: bytes,
    secret_for: Mapping[str, str],
) -> Signed:
    """The signer, when the request's signature is the one its key's secret gives; else Refusal.

    ``headers`` is case-insensitive (aiohttp's); ``secret_for`` maps access key ids to secrets.
    """
    authorization = headers.get("Authorization", "")
    if not authorization:
        raise Refusal("MissingAuthenticationToken", "Request is missing Authentication Token")
    scheme, _, rest = authorization.partition(" ")
    parts = dict(part.strip().partition("=")[::2] for part in rest.split(","))
    try:
        credential, signed_names, signature = (
            parts["Credential"],
            parts["SignedHeaders"],
            parts["Signature"],
        )
        access_key, day, region, service, terminator = credential.split("/")
    except (KeyError, ValueError):
        raise Refusal(
            "IncompleteSignature",
            f"Authorization header requires 'Credential', 'SignedHeaders' and 'Signature': {scheme}",
            400,
        ) from None
    if scheme != ALGORITHM or terminator != "aws4_request":
        raise Refusal("IncompleteSignature", f"Unsupported AWS 'algorithm': '{scheme}'", 400)
    secret = secret_for.get(access_key)
    if secret is None:
        raise Refusal("InvalidClientTokenId", "The security token included in the request is invalid.")
    stamp = headers.get("X-Amz-Date", "")
    if not stamp.startswith(day):
        raise Refusal("IncompleteSignature", "Date in Credential scope does not match YYYYMMDD from ISO-8601")
    names = signed_names.split(";")
    if "host" not in names:
        raise Refusal("IncompleteSignature", "'Host' must be a 'SignedHeader' in the AWS Authorization.", 400)
    canonical = "\n".join(
        [
            method,
            quote(path, safe="/-_.~") or "/",
            _canonical_query(query),
            "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in names),
            signed_names,
            headers.get("X-Amz-Content-Sha256") or hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    key = f"AWS4{secret}".encode()
    for part in (day, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, signature):
        raise Refusal(
            "SignatureDoesNotMatch",
            "The request signature we calculated does not match the signature you provided. Check your "
            "AWS Secret Access Key and signing method. Consult the service documentation for details.",
        )
    return Signed(access_key, region, service, headers.get("X-Amz-Security-Token"))


def _canonical_query(query: str) -> str:
    pairs = sorted(
        (quote(name, safe="-_.~"), quote(value, safe="-_.~"))
        for name, value in parse_qsl(query, keep_blank_values=True)
    )
    return "&".join(f"{name}={value}" for name, value in pairs)
