"""A tiny certificate authority for the webhook and scheduler-extender serving certificates.

This is the Python equivalent of upstream VPA's ``gencerts.sh`` (kubernetes/autoscaler:
``vertical-pod-autoscaler/pkg/admission-controller/gencerts.sh``): one self-signed CA, one
serving certificate for the Service DNS names, and the four PEM files the admission controller
mounts from the ``vpa-tls-certs`` Secret (``caCert.pem``, ``caKey.pem``, ``serverCert.pem``,
``serverKey.pem``).

Unlike ``gencerts.sh``, the certificates made here are shaped for *strict* verifiers, because the
kube-apiserver is not the only client: our own Python tests and tools (Python 3.13's
``create_default_context()`` sets ``ssl.VERIFY_X509_STRICT``) and pyca/cryptography's web-PKI
``PolicyBuilder`` reject the upstream CA (it has no keyUsage and a non-critical basicConstraints).
The contract:

* CA: basicConstraints ``CA:TRUE, pathlen:0`` (critical); keyUsage ``keyCertSign, cRLSign,
  digitalSignature`` (critical); subjectKeyIdentifier; authorityKeyIdentifier (its own key id,
  as ``openssl req -x509`` writes it).
* Leaf: basicConstraints ``CA:FALSE`` (critical); keyUsage ``digitalSignature`` (+
  ``keyEncipherment`` for RSA keys only) (critical); extendedKeyUsage ``serverAuth, clientAuth``;
  subjectAltName with every requested name (IP literals as iPAddress, the rest as dNSName; SANs
  are what Go and strict verifiers match, the CN is decoration); subjectKeyIdentifier;
  authorityKeyIdentifier taken from the CA's subjectKeyIdentifier.
* Random 159-bit serials, SHA-256 signatures, ``not_valid_before = now - 5 minutes`` so a peer
  whose clock is slightly behind still accepts a freshly minted certificate.

Nothing here reads the clock (``now`` is always passed in) and nothing touches the filesystem
except :func:`write_key_pairs` and :func:`load_key_pair`.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Final, Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import (
    CertificateIssuerPrivateKeyTypes,
    PrivateKeyTypes,
)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_CERT_FILE",
    "CA_KEY_FILE",
    "CLOCK_SKEW_ALLOWANCE",
    "SERVER_CERT_FILE",
    "SERVER_KEY_FILE",
    "CertificateError",
    "KeyPair",
    "KeyType",
    "ca_bundle",
    "generate_ca",
    "issue_serving_certificate",
    "load_key_pair",
    "service_dns_names",
    "validate_key_pair",
    "write_atomically",
    "write_key_pairs",
]

KeyType = Literal["rsa", "ecdsa"]
"""``rsa``: RSA (2048 bits unless ``key_size`` says otherwise); ``ecdsa``: ECDSA on P-256."""

CA_CERT_FILE: Final = "caCert.pem"
CA_KEY_FILE: Final = "caKey.pem"
SERVER_CERT_FILE: Final = "serverCert.pem"
SERVER_KEY_FILE: Final = "serverKey.pem"
"""File names (and Secret keys) as upstream VPA's ``--client-ca-file``/``--tls-cert-file``/
``--tls-private-key`` defaults and its ``vpa-tls-certs`` Secret use them."""

CLOCK_SKEW_ALLOWANCE: Final = timedelta(minutes=5)
"""How far before ``now`` every certificate's validity starts."""

_MIN_RSA_KEY_SIZE: Final = 2048
_MAX_COMMON_NAME_LENGTH: Final = 64  # RFC 5280 ub-common-name
_DNS_1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_1123_LABEL_MAX_LENGTH: Final = 63
_CERT_FILE_MODE: Final = 0o644
_KEY_FILE_MODE: Final = 0o600


class CertificateError(ValueError):
    """A certificate or key (file) is unreadable, malformed, or the two do not belong together."""


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate (possibly followed by its chain) and the PEM private key for it.

    ``key_pem`` is unencrypted PKCS#8, which Go's ``tls.LoadX509KeyPair``, OpenSSL and
    ``ssl.SSLContext.load_cert_chain`` all read.
    """

    cert_pem: bytes
    key_pem: bytes

    @property
    def certificate(self) -> x509.Certificate:
        """The first certificate in ``cert_pem`` (the leaf, for a chain)."""
        return x509.load_pem_x509_certificate(self.cert_pem)


def generate_ca(
    *,
    common_name: str,
    now: datetime,
    days: int,
    key_type: KeyType = "rsa",
    key_size: int = 2048,
) -> KeyPair:
    """Make a self-signed CA that may sign leaf certificates only (``pathlen:0``)."""
    _check_now(now)
    _check_days(days)
    key = _generate_key(key_type=key_type, key_size=key_size)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW_ALLOWANCE)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
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
        .add_extension(ski, critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
        )
        .sign(private_key=key, algorithm=hashes.SHA256())
    )
    return KeyPair(cert_pem=_certificate_pem(certificate), key_pem=_private_key_pem(key))


def issue_serving_certificate(
    *,
    ca: KeyPair,
    names: Sequence[str],
    now: datetime,
    days: int,
    key_type: KeyType = "rsa",
    common_name: str | None = None,
    key_size: int = 2048,
) -> KeyPair:
    """Make a fresh key and a TLS serving (and client) certificate for ``names``, signed by ``ca``.

    ``names`` are DNS names and/or IP addresses; each becomes a subjectAltName entry (an entry
    that parses as an IP address becomes an iPAddress SAN). ``common_name`` defaults to
    ``names[0]``; if that default is longer than the 64 characters X.509 allows in a CN, the
    subject is left empty and the SAN extension is marked critical, as RFC 5280 requires.
    The validity ends at ``now + days`` even if the CA expires earlier: keep the CA longer-lived.
    """
    _check_now(now)
    _check_days(days)
    if isinstance(names, str):
        raise TypeError("names must be a sequence of names, not a single string")
    if not names:
        raise ValueError("names must contain at least one DNS name or IP address")
    sans = _subject_alt_names(names)

    ca_cert = _first_certificate(ca.cert_pem, source="CA certificate")
    ca_key = _issuer_key(ca.key_pem)
    if not _same_public_key(ca_cert, ca_key):
        raise CertificateError("CA private key does not match the CA certificate's public key")
    try:
        ca_constraints = ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        ca_constraints = None
    if ca_constraints is None or not ca_constraints.ca:
        raise CertificateError("the CA certificate is not a CA (basicConstraints CA:TRUE missing)")
    try:
        ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        aki = x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski)
    except x509.ExtensionNotFound:
        aki = x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key())

    if common_name is None and len(names[0]) <= _MAX_COMMON_NAME_LENGTH:
        common_name = names[0]
    subject = x509.Name(
        [] if common_name is None else [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )

    key = _generate_key(key_type=key_type, key_size=key_size)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - CLOCK_SKEW_ALLOWANCE)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=isinstance(key, rsa.RSAPrivateKey),
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectAlternativeName(sans), critical=common_name is None)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(aki, critical=False)
        .sign(private_key=ca_key, algorithm=hashes.SHA256())
    )
    return KeyPair(cert_pem=_certificate_pem(certificate), key_pem=_private_key_pem(key))


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names a Service is reached by in-cluster, shortest first.

    The kube-apiserver calls a webhook at ``<service>.<namespace>.svc``; the other forms cover
    clients that use search paths or the fully qualified ``cluster.local`` name.
    """
    for what, value in (("service", service), ("namespace", namespace)):
        if not _is_dns_1123_label(value):
            raise ValueError(
                f"{what} name {value!r} is not a DNS-1123 label (lowercase letters, digits and "
                f"'-', starting and ending with a letter or digit, at most "
                f"{_DNS_1123_LABEL_MAX_LENGTH} characters)"
            )
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def ca_bundle(ca_cert_pem: bytes) -> str:
    """``clientConfig.caBundle`` for a webhook configuration: base64 of the CA's PEM."""
    return base64.b64encode(ca_cert_pem).decode("ascii")


def write_key_pairs(out_dir: Path, *, ca: KeyPair, server: KeyPair) -> dict[str, Path]:
    """Write the four PEM files into ``out_dir`` (created if missing); return them by file name.

    Every file is replaced atomically (a temporary file in the same directory, fsynced, then
    ``os.replace``), so a reader never sees a half-written file. Keys are ``0o600``,
    certificates ``0o644``. The server key is written before the server certificate; a reader
    polling in between may see a new key with the old certificate and must retry (as
    :class:`kubescale.certs.reloading.ServerTLS` does).
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    files = (
        (CA_CERT_FILE, ca.cert_pem, _CERT_FILE_MODE),
        (CA_KEY_FILE, ca.key_pem, _KEY_FILE_MODE),
        (SERVER_KEY_FILE, server.key_pem, _KEY_FILE_MODE),
        (SERVER_CERT_FILE, server.cert_pem, _CERT_FILE_MODE),
    )
    written: dict[str, Path] = {}
    for name, data, mode in files:
        path = out_dir / name
        write_atomically(path, data, mode=mode)
        written[name] = path
    return written


def load_key_pair(cert_file: Path, key_file: Path) -> KeyPair:
    """Read a certificate and its private key from PEM files and check they belong together.

    Raises :class:`CertificateError` naming the offending file if a file cannot be read, does
    not parse, or the key is not the one the certificate was issued for.
    """
    return validate_key_pair(
        _read(cert_file), _read(key_file), cert_source=str(cert_file), key_source=str(key_file)
    )


def validate_key_pair(
    cert_pem: bytes,
    key_pem: bytes,
    *,
    cert_source: str = "certificate",
    key_source: str = "private key",
) -> KeyPair:
    """Check PEM bytes: the certificate and key parse and the key matches the certificate.

    ``cert_source``/``key_source`` name where the bytes came from in error messages.
    """
    certificate = _first_certificate(cert_pem, source=cert_source)
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(
            f"{key_source}: not a usable unencrypted PEM private key: {exc}"
        ) from exc
    if not _same_public_key(certificate, key):
        raise CertificateError(
            f"{key_source}: private key does not match the public key of the certificate in "
            f"{cert_source}"
        )
    return KeyPair(cert_pem=cert_pem, key_pem=key_pem)


def _check_now(now: datetime) -> None:
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("now must be a timezone-aware datetime")


def _check_days(days: int) -> None:
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")


def _generate_key(*, key_type: KeyType, key_size: int) -> CertificateIssuerPrivateKeyTypes:
    if key_type == "rsa":
        if key_size < _MIN_RSA_KEY_SIZE:
            raise ValueError(f"key_size must be at least {_MIN_RSA_KEY_SIZE} bits, got {key_size}")
        return rsa.generate_private_key(public_exponent=65537, key_size=key_size)
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"key_type must be 'rsa' or 'ecdsa', got {key_type!r}")


def _subject_alt_names(names: Sequence[str]) -> list[x509.GeneralName]:
    sans: list[x509.GeneralName] = []
    seen: set[str] = set()
    for name in names:
        if not name:
            raise ValueError("names must not contain empty strings")
        if name in seen:
            continue
        seen.add(name)
        try:
            address = ipaddress.ip_address(name)
        except ValueError:
            sans.append(x509.DNSName(name))
        else:
            sans.append(x509.IPAddress(address))
    return sans


def _is_dns_1123_label(value: str) -> bool:
    return len(value) <= _DNS_1123_LABEL_MAX_LENGTH and _DNS_1123_LABEL.fullmatch(value) is not None


def _first_certificate(pem: bytes, *, source: str) -> x509.Certificate:
    try:
        certificates = x509.load_pem_x509_certificates(pem)
    except ValueError as exc:
        raise CertificateError(f"{source}: not a PEM certificate: {exc}") from exc
    return certificates[0]


def _issuer_key(key_pem: bytes) -> CertificateIssuerPrivateKeyTypes:
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"CA private key: not a usable unencrypted PEM key: {exc}") from exc
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise CertificateError(f"CA private key: unsupported key type {type(key).__name__}")
    return key


def _same_public_key(certificate: x509.Certificate, key: PrivateKeyTypes) -> bool:
    der, spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return key.public_key().public_bytes(der, spki) == certificate.public_key().public_bytes(
        der, spki
    )


def _certificate_pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def _private_key_pem(key: CertificateIssuerPrivateKeyTypes) -> bytes:
    return key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CertificateError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def write_atomically(path: Path, data: bytes, *, mode: int) -> None:
    fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise
