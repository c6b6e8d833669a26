"""The webhook's own serving certificate: a private CA and a leaf it signs, renewed long before expiry.

The API server trusts the webhook through the ``caBundle`` of its MutatingWebhookConfiguration, so a
rotation must never serve a certificate the bundle does not yet vouch for. Hence two tiers:

* a CA (``ca_lifetime``, five years by default) whose certificates form the bundle. A new CA is made
  when the newest has less than a third of its life left, and is *added* to the bundle next to the
  old one, which stays there until it expires;
* a serving leaf (``leaf_lifetime``, 90 days) signed by the newest CA, renewed when a third of its
  life is left, and re-issued by a new CA only once that CA has been in the bundle for
  ``propagation`` (a day), so every API server has seen the bundle that trusts it.

``reconcile(data, now)`` is pure: it takes the Secret's data (PEM bytes by key) and the wall time
and returns the data to store, or None when nothing is due. The webhook's ``rotation`` applies it.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = 86400.0
CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"


@dataclass(frozen=True, slots=True)
class Policy:
    """Lifetimes, in seconds; renewal starts when a third of a certificate's life is left."""

    ca_lifetime: float = 5 * 365 * DAY
    leaf_lifetime: float = 90 * DAY
    propagation: float = DAY

    def __post_init__(self) -> None:
        if not self.propagation < self.leaf_lifetime / 3 <= self.ca_lifetime / 3:
            raise ValueError("need propagation < leaf_lifetime/3 <= ca_lifetime/3")


def _time(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _life_left(cert: x509.Certificate, now: float) -> float:
    return cert.not_valid_after_utc.timestamp() - now


def _lifetime(cert: x509.Certificate) -> float:
    return (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()


def make_ca(now: float, lifetime: float) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    # The start second in the name keeps successive CAs apart for a reader of the bundle.
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"tokenrelay webhook CA {int(now)}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_time(now))
        .not_valid_after(_time(now + lifetime))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def make_leaf(
    ca: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    dns_names: Sequence[str],
    now: float,
    lifetime: float,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    end = min(now + lifetime, ca.not_valid_after_utc.timestamp())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_time(now))
        .not_valid_after(_time(end))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def bundle(data: Mapping[str, bytes]) -> list[x509.Certificate]:
    """The CA certificates of the Secret's ``ca.crt``, newest first (empty if none or unreadable)."""
    try:
        return x509.load_pem_x509_certificates(data.get(CA_CERT) or b"")
    except ValueError:
        return []


def leaf(data: Mapping[str, bytes]) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(data.get(TLS_CERT) or b"")
    except ValueError:
        return None


def issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    """Whether ``ca`` signed ``cert`` (the signature checked, not just the names)."""
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # InvalidSignature, or ValueError/TypeError for a key of another type
        return False
    return True


def trusted(cert: x509.Certificate, cas: Sequence[x509.Certificate], now: float) -> bool:
    """Whether ``cert`` is valid at ``now`` and signed by a CA of ``cas`` that is valid too."""

    def valid(c: x509.Certificate) -> bool:
        return c.not_valid_before_utc.timestamp() <= now < c.not_valid_after_utc.timestamp()

    return valid(cert) and any(valid(ca) and issued_by(cert, ca) for ca in cas)


def reconcile(
    data: Mapping[str, bytes], now: float, dns_names: Sequence[str], policy: Policy = Policy()
) -> dict[str, bytes] | None:
    """The Secret data to store at wall time ``now``, or None when the stored data needs no change."""
    cas = [ca for ca in bundle(data) if _life_left(ca, now) > 0]
    try:
        ca_key = serialization.load_pem_private_key(data.get(CA_KEY) or b"", None)
    except ValueError:
        ca_key = None
    usable = (
        bool(cas)
        and isinstance(ca_key, ec.EllipticCurvePrivateKey)
        and cas[0].public_key() == ca_key.public_key()
    )
    changed = len(cas) != len(bundle(data))  # an expired CA leaves the bundle
    if not usable or _life_left(cas[0], now) < policy.ca_lifetime / 3:
        new_ca, new_key = make_ca(now, policy.ca_lifetime)
        # The old CAs stay trusted until they expire: the leaf they signed is still being served.
        cas = [new_ca, *cas]
        ca_key, changed = new_key, True
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    signer = cas[0]
    current = leaf(data)
    propagated = now - signer.not_valid_before_utc.timestamp() >= policy.propagation
    due = (
        current is None
        or not any(issued_by(current, ca) for ca in cas)
        or _life_left(current, now) < _lifetime(current) / 3
        or (propagated and not issued_by(current, signer))
        or _names(current) != list(dns_names)
    )
    if not due and not changed:
        return None
    out = {
        CA_CERT: b"".join(_pem(ca) for ca in cas),
        CA_KEY: _pem_key(ca_key),
        TLS_CERT: data.get(TLS_CERT, b""),
        TLS_KEY: data.get(TLS_KEY, b""),
    }
    if due:
        cert, key = make_leaf(signer, ca_key, dns_names, now, policy.leaf_lifetime)
        out[TLS_CERT], out[TLS_KEY] = _pem(cert), _pem_key(key)
    return out


def _names(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return san.get_values_for_type(x509.DNSName)
