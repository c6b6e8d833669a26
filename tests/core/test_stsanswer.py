"""The token service's answers, as the sidecar and the helpers' direct exchange both read them."""

from __future__ import annotations

import json

import pytest

from tokenrelay.errors import ExchangeError
from tokenrelay.lite import aip193
from tokenrelay.lite.stsanswer import (
    oversized,
    refusal,
    retry_after_seconds,
    stated_expiry,
    token_from,
)
from tokenrelay.testing import make_jwt

URL = "https://sts.example/sts/exchange"


def _refusal(
    status: int, raw: bytes = b"", *, location: str | None = None, retry_after: str | None = None
) -> ExchangeError:
    return refusal(
        status,
        raw,
        audience="aud",
        id_token="opaque-oidc",
        location=location,
        retry_after=retry_after,
        auth_url_setting="THE_SETTING",
        identity_setting="THE_IDENTITY",
    )


def _aip193(code: aip193.Code, message: str, reason: str = "NO_MATCH") -> bytes:
    return aip193.encode(code, message, reason, "sts.example")


def test_success_gives_the_token_and_ignores_unknown_fields() -> None:
    """A 200 answer yields its token and its stated expiry; unknown fields are ignored."""
    raw = json.dumps({"token": "t1", "expiry": 2_000_000_000, "extra": [1]}).encode()
    assert token_from(raw, URL) == ("t1", 2_000_000_000.0)
    assert token_from(b'{"token": "t2"}', URL) == ("t2", None)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"<html>proxy login</html>", "answered 200 with a body that is not JSON"),
        (b'{"tok": "x"}', 'answered 200 without a "token" string'),
        (b'["t1"]', 'answered 200 without a "token" string'),
        (b'{"token": "  "}', 'answered 200 without a "token" string'),
        (b'{"token": "a\\tb"}', "answered a token with whitespace in it"),
        (b'{"token": "a\\r\\nX-Evil: 1"}', "answered a token with whitespace in it"),
    ],
)
def test_success_without_a_usable_token_is_an_error_naming_the_url(raw: bytes, message: str) -> None:
    """A 200 that holds no usable token says what was wrong and where it came from."""
    with pytest.raises(ExchangeError, match=f"token service at {URL} {message}"):
        token_from(raw, URL)


@pytest.mark.parametrize(
    ("token", "shown"),
    [
        ("abc\x0bdef", "U+000B"),
        ("abc\x0cdef", "U+000C"),
        ("abc\x01def", "U+0001"),
        ("$(id)", "U+0024"),
        ("a<b&c", "U+003C"),
        ("ab=cd", "U+003D before its end"),
        ("tök", "U+00F6"),
    ],
)
def test_a_token_outside_rfc_6750s_b64token_is_refused_without_showing_it(token: str, shown: str) -> None:
    """A token holding a character no bearer token may hold (a control character, shell syntax, XML
    markup) is an error naming the character by code point, never the token."""
    raw = json.dumps({"token": f"secretpart{token}"}).encode()
    with pytest.raises(ExchangeError) as refused:
        token_from(raw, URL)
    assert f"answered a token holding {shown}, which no bearer token may hold" in refused.value.message
    assert "secretpart" not in refused.value.message
    assert refused.value.retryable


def test_every_b64token_is_taken() -> None:
    """Letters, digits, ``-._~+/`` and trailing ``=`` (JWTs, base64, opaque tokens) are all taken."""
    for token in ("eyJh.eyJi.c2ln", "A-Z_a~z.0+9/x==", "t1", "x" * 4000):
        assert token_from(json.dumps({"token": token}).encode(), URL) == (token, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1_900_000_000, 1_900_000_000.0),
        (1.5, 1.5),
        ("2026-11-21T12:00:00.000Z", 1_795_262_400.0),
        ("2026-11-21T12:00:00", None),
        ("tomorrow", None),
        (True, None),
        (None, None),
    ],
)
def test_stated_expiry_is_seconds_or_an_iso_timestamp(value: object, expected: float | None) -> None:
    """``expiry`` is used when it is a number or a zoned ISO 8601 timestamp, ignored otherwise."""
    assert stated_expiry(value) == expected


def test_aip193_refusal_reads_as_the_services_words() -> None:
    """A refusal carries the service's message, code name, reason and status; a 403 waits for someone
    to fix the identity's binding: not retryable, AIP-193 body or not (one predicate, as --once reads)."""
    error = _refusal(
        403, _aip193(aip193.Code.PERMISSION_DENIED, "identity does not match the token's subject")
    )
    assert str(error) == (
        "token service refused the exchange for audience aud: identity does not match the token's "
        "subject (PERMISSION_DENIED, reason NO_MATCH, HTTP 403)"
    )
    assert (error.status, error.code, error.reason, error.retryable) == (403, 7, "NO_MATCH", False)


@pytest.mark.parametrize("code", [aip193.Code.INVALID_ARGUMENT, aip193.Code.NOT_FOUND])
def test_configuration_refusals_are_not_retryable(code: aip193.Code) -> None:
    """INVALID_ARGUMENT and NOT_FOUND cannot succeed until someone changes the configuration."""
    assert not _refusal(400, _aip193(code, "no such identity")).retryable


def test_an_unknown_identity_names_the_callers_identity_setting() -> None:
    """NOT_FOUND on an exchange means no identity has the uid sent: the line names what sets it."""
    error = _refusal(404, _aip193(aip193.Code.NOT_FOUND, "Not found: identity 0/1", "NOT_FOUND"))
    assert str(error) == (
        "token service refused the exchange for audience aud: Not found: identity 0/1 "
        "(NOT_FOUND, reason NOT_FOUND, HTTP 404): check THE_IDENTITY, the uid of an identity the token "
        "service knows"
    )


@pytest.mark.parametrize(("status", "retryable"), [(502, True), (429, True), (401, False)])
def test_refusal_without_aip193_body_names_the_status(status: int, retryable: bool) -> None:
    """A bare error status is reported as such; server errors and 429 are worth retrying."""
    error = _refusal(status, b"Bad Gateway")
    assert str(error) == f"token service refused the exchange for audience aud: HTTP {status}"
    assert error.retryable is retryable


def test_refusal_keeps_the_oidc_token_and_any_jwt_out() -> None:
    """The OIDC token (opaque or not) and any JWT quoted in a refusal are replaced by [secure]."""
    leaked = make_jwt({"sub": "leak"})
    error = _refusal(401, _aip193(aip193.Code.UNAUTHENTICATED, f"bad opaque-oidc, also {leaked}"))
    assert "opaque-oidc" not in str(error) and leaked not in str(error)
    assert "bad [secure], also [secure]" in str(error)


def test_redirect_names_the_location_and_the_callers_setting() -> None:
    """A redirect is refused for good, saying where it pointed and what the reader should change."""
    error = _refusal(302, location="https://elsewhere.example/")
    assert str(error) == (
        "token service answered HTTP 302 redirecting to https://elsewhere.example/; not followed, "
        "since the OIDC token would go with it. Point THE_SETTING at the final address"
    )
    assert not error.retryable
    assert "(no Location)" in str(_refusal(307))


def test_refusal_honours_retry_after() -> None:
    """A refusal's Retry-After reaches the error, for the backoff to honour."""
    assert _refusal(503, retry_after="7").retry_after == 7.0
    assert _refusal(503).retry_after is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("Wed, 21 Oct 2015 07:28:30 GMT", 30.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),
        ("soon", None),
        ("", None),
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_an_http_date(value: str | None, expected: float | None) -> None:
    """Retry-After as seconds, or as a date counted from now (never negative); garbage is ignored."""
    now = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after_seconds(value, wall=lambda: now) == expected


def test_oversized_answer_names_the_limit() -> None:
    """An answer over 1 MiB is refused with the size when the headers announced it."""
    assert str(oversized(2_000_000)) == "token service answer is 2000000 bytes, over the 1 MiB limit"
    assert str(oversized()) == "token service answer is over the 1 MiB limit"


@pytest.mark.parametrize("status", [400, 401, 403, 404, 429, 500, 502, 503])
def test_retryable_depends_on_the_status_not_on_the_body_shape(status: int) -> None:
    """One answer to "may trying again help?": an AIP-193 body and a plain one with the same status agree."""
    plain = _refusal(status, b"nope")
    shaped = _refusal(status, _aip193(aip193.Code.PERMISSION_DENIED, "nope"))
    assert plain.retryable is shaped.retryable is (status >= 500 or status == 429)
