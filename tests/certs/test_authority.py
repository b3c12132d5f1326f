"""The CA and serving certificates from ``kubescale.certs.authority`` are what strict verifiers
accept.

Chains are checked with pyca/cryptography's web-PKI verifier and, through an in-memory TLS
handshake, with OpenSSL under ``VERIFY_X509_STRICT`` (what Python 3.13's default client context
uses). Keys are generated once per module and key type.
"""

from __future__ import annotations

import base64
import ipaddress
import ssl
import stat
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509 import DNSName, IPAddress
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.certs.authority import (
    CertificateError,
    KeyPair,
    KeyType,
    ca_bundle,
    generate_ca,
    issue_serving_certificate,
    load_key_pair,
    service_dns_names,
    write_key_pairs,
)
from kubescale.cli.main import main

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SERVICE = "vpa-webhook"
NAMESPACE = "kube-system"
SERVICE_NAMES = service_dns_names(SERVICE, NAMESPACE)
EXTRA_IP = "10.96.0.42"
EXTRA_IPV6 = "fd00::42"

_E = TypeVar("_E", bound=x509.ExtensionType)


@dataclass(frozen=True)
class Chain:
    key_type: KeyType
    ca: KeyPair
    leaf: KeyPair


@pytest.fixture(scope="module", params=["rsa", "ecdsa"])
def chain(request: pytest.FixtureRequest) -> Chain:
    key_type: KeyType = request.param
    ca = generate_ca(common_name="kubescale-ca", now=NOW, days=3650, key_type=key_type)
    leaf = issue_serving_certificate(
        ca=ca,
        names=[*SERVICE_NAMES, EXTRA_IP, EXTRA_IPV6],
        now=NOW,
        days=365,
        key_type=key_type,
    )
    return Chain(key_type=key_type, ca=ca, leaf=leaf)


@pytest.fixture(scope="module")
def ecdsa_ca() -> KeyPair:
    return generate_ca(common_name="throwaway-ca", now=NOW, days=30, key_type="ecdsa")


def verify_server(chain: Chain, subject: DNSName | IPAddress, *, at: datetime = NOW) -> None:
    verifier = (
        PolicyBuilder().store(Store([chain.ca.certificate])).time(at).build_server_verifier(subject)
    )
    verifier.verify(chain.leaf.certificate, [])


def openssl_strict_handshake(
    *, ca: KeyPair, leaf: KeyPair, server_hostname: str, directory: Path
) -> ssl.SSLObject:
    """A full TLS handshake over memory BIOs with a strict, CA-only client; returns the client."""
    cert_file, key_file = directory / "leaf.pem", directory / "leaf.key"
    cert_file.write_bytes(leaf.cert_pem)
    key_file.write_bytes(leaf.key_pem)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    client_context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_context.load_verify_locations(cadata=ca.cert_pem.decode("ascii"))
    client_context.verify_flags |= ssl.VERIFY_X509_STRICT

    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    from_server, from_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, from_client, server_hostname=server_hostname)
    server = server_context.wrap_bio(to_server, from_server, server_side=True)
    finished: set[str] = set()
    for _ in range(10):
        for label, side in (("client", client), ("server", server)):
            if label in finished:
                continue
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
            else:
                finished.add(label)
        to_server.write(from_client.read())
        to_client.write(from_server.read())
        if finished == {"client", "server"}:
            return client
    raise AssertionError("handshake did not finish")


def extension(certificate: x509.Certificate, kind: type[_E]) -> x509.Extension[_E]:
    return certificate.extensions.get_extension_for_class(kind)


# --- service names -------------------------------------------------------------------------


def test_service_dns_names_are_the_in_cluster_forms() -> None:
    assert SERVICE_NAMES == [
        "vpa-webhook",
        "vpa-webhook.kube-system",
        "vpa-webhook.kube-system.svc",
        "vpa-webhook.kube-system.svc.cluster.local",
    ]


@pytest.mark.parametrize(
    ("service", "namespace", "bad"),
    [
        ("Webhook", "default", "service name 'Webhook'"),
        ("web_hook", "default", "service name 'web_hook'"),
        ("-webhook", "default", "service name '-webhook'"),
        ("webhook", "", "namespace name ''"),
        ("webhook", "kube.system", "namespace name 'kube.system'"),
        ("webhook", "a" * 64, "namespace name 'aaaa"),
    ],
)
def test_service_dns_names_reject_invalid_labels(service: str, namespace: str, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        service_dns_names(service, namespace)


DNS_1123_LABELS = st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")


@given(service=DNS_1123_LABELS, namespace=DNS_1123_LABELS)
def test_service_dns_names_for_any_valid_labels(service: str, namespace: str) -> None:
    names = service_dns_names(service, namespace)
    assert names[0] == service
    assert names[1:] == [
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]
    assert all(len(label) <= 63 for name in names for label in name.split("."))


@given(
    service=DNS_1123_LABELS,
    bad=st.text(min_size=1, max_size=70).filter(
        lambda s: len(s) > 63 or not all(c.isascii() and (c.isalnum() or c == "-") for c in s)
    ),
)
def test_service_dns_names_rejects_any_invalid_namespace(service: str, bad: str) -> None:
    with pytest.raises(ValueError, match="namespace name"):
        service_dns_names(service, bad)


@settings(max_examples=20, deadline=None)
@given(service=DNS_1123_LABELS, namespace=DNS_1123_LABELS)
def test_issued_certificate_verifies_for_any_service(
    ecdsa_ca: KeyPair, service: str, namespace: str
) -> None:
    names = service_dns_names(service, namespace)
    leaf = issue_serving_certificate(ca=ecdsa_ca, names=names, now=NOW, days=1, key_type="ecdsa")
    chain = Chain(key_type="ecdsa", ca=ecdsa_ca, leaf=leaf)
    verify_server(chain, DNSName(names[2]))
    verify_server(chain, DNSName(names[3]))


# --- chain verification ----------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVICE_NAMES)
def test_chain_verifies_for_each_service_name(chain: Chain, name: str) -> None:
    verify_server(chain, DNSName(name))


@pytest.mark.parametrize("address", [EXTRA_IP, EXTRA_IPV6])
def test_chain_verifies_for_ip_sans(chain: Chain, address: str) -> None:
    verify_server(chain, IPAddress(ipaddress.ip_address(address)))


@pytest.mark.parametrize(
    "subject",
    [
        DNSName("other-webhook.kube-system.svc"),
        DNSName("vpa-webhook.default.svc"),
        IPAddress(ipaddress.ip_address("10.96.0.43")),
    ],
    ids=["other-service", "other-namespace", "other-ip"],
)
def test_chain_rejects_a_name_not_in_the_sans(chain: Chain, subject: DNSName | IPAddress) -> None:
    with pytest.raises(VerificationError):
        verify_server(chain, subject)


def test_validity_window_allows_clock_skew_and_ends_after_days(chain: Chain) -> None:
    leaf = chain.leaf.certificate
    assert leaf.not_valid_before_utc == NOW - timedelta(minutes=5)
    assert leaf.not_valid_after_utc == NOW + timedelta(days=365)
    assert chain.ca.certificate.not_valid_after_utc == NOW + timedelta(days=3650)
    verify_server(chain, DNSName(SERVICE_NAMES[2]), at=NOW - timedelta(minutes=4))
    with pytest.raises(VerificationError):
        verify_server(chain, DNSName(SERVICE_NAMES[2]), at=NOW + timedelta(days=366))


def test_openssl_strict_verification_accepts_the_chain(chain: Chain, tmp_path: Path) -> None:
    client = openssl_strict_handshake(
        ca=chain.ca, leaf=chain.leaf, server_hostname=SERVICE_NAMES[2], directory=tmp_path
    )
    peer = client.getpeercert(binary_form=True)
    assert peer is not None
    assert x509.load_der_x509_certificate(peer).serial_number == (
        chain.leaf.certificate.serial_number
    )


def test_openssl_strict_verification_rejects_a_wrong_name(chain: Chain, tmp_path: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        openssl_strict_handshake(
            ca=chain.ca, leaf=chain.leaf, server_hostname="evil.example", directory=tmp_path
        )


# --- extensions ------------------------------------------------------------------------------


def test_ca_extensions(chain: Chain) -> None:
    ca = chain.ca.certificate
    assert ca.subject == ca.issuer
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubescale-ca"
    assert ca.version is x509.Version.v3
    assert ca.signature_hash_algorithm is not None
    assert ca.signature_hash_algorithm.name == "sha256"

    constraints = extension(ca, x509.BasicConstraints)
    assert constraints.critical
    assert constraints.value.ca
    assert constraints.value.path_length == 0

    usage = extension(ca, x509.KeyUsage)
    assert usage.critical
    assert usage.value.key_cert_sign
    assert usage.value.crl_sign
    assert usage.value.digital_signature
    assert not usage.value.key_encipherment

    ski = extension(ca, x509.SubjectKeyIdentifier)
    assert not ski.critical
    assert ski.value == x509.SubjectKeyIdentifier.from_public_key(ca.public_key())
    assert extension(ca, x509.AuthorityKeyIdentifier).value.key_identifier == ski.value.digest

    if chain.key_type == "rsa":
        public_key = ca.public_key()
        assert isinstance(public_key, rsa.RSAPublicKey)
        assert public_key.key_size == 2048
    else:
        public_key_ec = ca.public_key()
        assert isinstance(public_key_ec, ec.EllipticCurvePublicKey)
        assert isinstance(public_key_ec.curve, ec.SECP256R1)


def test_leaf_extensions(chain: Chain) -> None:
    leaf = chain.leaf.certificate
    ca = chain.ca.certificate
    assert leaf.issuer == ca.subject
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == SERVICE
    assert leaf.signature_hash_algorithm is not None
    assert leaf.signature_hash_algorithm.name == "sha256"

    constraints = extension(leaf, x509.BasicConstraints)
    assert constraints.critical
    assert not constraints.value.ca

    usage = extension(leaf, x509.KeyUsage)
    assert usage.critical
    assert usage.value.digital_signature
    assert usage.value.key_encipherment is (chain.key_type == "rsa")
    assert not usage.value.key_cert_sign
    assert not usage.value.crl_sign

    eku = extension(leaf, x509.ExtendedKeyUsage)
    assert list(eku.value) == [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]

    san = extension(leaf, x509.SubjectAlternativeName)
    assert not san.critical
    assert san.value.get_values_for_type(x509.DNSName) == SERVICE_NAMES
    assert san.value.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address(EXTRA_IP),
        ipaddress.ip_address(EXTRA_IPV6),
    ]

    ski = extension(leaf, x509.SubjectKeyIdentifier)
    assert ski.value == x509.SubjectKeyIdentifier.from_public_key(leaf.public_key())
    aki = extension(leaf, x509.AuthorityKeyIdentifier)
    assert not aki.critical
    assert aki.value.key_identifier == extension(ca, x509.SubjectKeyIdentifier).value.digest

    leaf.verify_directly_issued_by(ca)


def test_common_name_can_be_given(ecdsa_ca: KeyPair) -> None:
    leaf = issue_serving_certificate(
        ca=ecdsa_ca,
        names=["a.example", "b.example"],
        now=NOW,
        days=1,
        key_type="ecdsa",
        common_name="custom",
    ).certificate
    assert leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "custom"


def test_overlong_first_name_gives_empty_subject_and_critical_san(
    ecdsa_ca: KeyPair, tmp_path: Path
) -> None:
    long_name = service_dns_names("a" * 40, "b" * 40)[3]
    assert len(long_name) > 64
    leaf = issue_serving_certificate(
        ca=ecdsa_ca, names=[long_name], now=NOW, days=1, key_type="ecdsa"
    )
    assert len(leaf.certificate.subject) == 0
    assert extension(leaf.certificate, x509.SubjectAlternativeName).critical
    verify_server(Chain(key_type="ecdsa", ca=ecdsa_ca, leaf=leaf), DNSName(long_name))


def test_serials_are_random(ecdsa_ca: KeyPair) -> None:
    serials = {
        issue_serving_certificate(
            ca=ecdsa_ca, names=["x.example"], now=NOW, days=1, key_type="ecdsa"
        ).certificate.serial_number
        for _ in range(5)
    }
    assert len(serials) == 5
    assert all(0 < serial < 2**159 for serial in serials)


# --- argument validation ---------------------------------------------------------------------


@pytest.mark.parametrize("days", [0, -1])
def test_days_must_be_at_least_one(ecdsa_ca: KeyPair, days: int) -> None:
    with pytest.raises(ValueError, match="days"):
        generate_ca(common_name="ca", now=NOW, days=days, key_type="ecdsa")
    with pytest.raises(ValueError, match="days"):
        issue_serving_certificate(
            ca=ecdsa_ca, names=["x.example"], now=NOW, days=days, key_type="ecdsa"
        )


def test_names_are_required(ecdsa_ca: KeyPair) -> None:
    with pytest.raises(ValueError, match="names"):
        issue_serving_certificate(ca=ecdsa_ca, names=[], now=NOW, days=1, key_type="ecdsa")
    with pytest.raises(TypeError, match="names"):
        issue_serving_certificate(ca=ecdsa_ca, names="x.example", now=NOW, days=1)


def test_naive_now_is_rejected() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        generate_ca(common_name="ca", now=datetime(2026, 1, 1), days=1, key_type="ecdsa")


def test_small_rsa_keys_are_rejected() -> None:
    with pytest.raises(ValueError, match="key_size"):
        generate_ca(common_name="ca", now=NOW, days=1, key_type="rsa", key_size=1024)


def test_a_leaf_cannot_issue_certificates(ecdsa_ca: KeyPair) -> None:
    leaf = issue_serving_certificate(
        ca=ecdsa_ca, names=["x.example"], now=NOW, days=1, key_type="ecdsa"
    )
    with pytest.raises(CertificateError, match="not a CA"):
        issue_serving_certificate(ca=leaf, names=["y.example"], now=NOW, days=1)


# --- caBundle, files -------------------------------------------------------------------------


def test_ca_bundle_is_base64_of_the_pem(ecdsa_ca: KeyPair) -> None:
    bundle = ca_bundle(ecdsa_ca.cert_pem)
    assert base64.b64decode(bundle, validate=True) == ecdsa_ca.cert_pem
    assert bundle.isascii()


@pytest.fixture(scope="module")
def ecdsa_leaf(ecdsa_ca: KeyPair) -> KeyPair:
    return issue_serving_certificate(
        ca=ecdsa_ca, names=SERVICE_NAMES, now=NOW, days=1, key_type="ecdsa"
    )


def test_write_key_pairs_names_modes_and_contents(
    ecdsa_ca: KeyPair, ecdsa_leaf: KeyPair, tmp_path: Path
) -> None:
    out_dir = tmp_path / "nested" / "tls"
    written = write_key_pairs(out_dir, ca=ecdsa_ca, server=ecdsa_leaf)

    assert written == {
        "caCert.pem": out_dir / "caCert.pem",
        "caKey.pem": out_dir / "caKey.pem",
        "serverCert.pem": out_dir / "serverCert.pem",
        "serverKey.pem": out_dir / "serverKey.pem",
    }
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(written)  # no temp files left
    modes = {name: stat.S_IMODE(path.stat().st_mode) for name, path in written.items()}
    assert modes == {
        "caCert.pem": 0o644,
        "caKey.pem": 0o600,
        "serverCert.pem": 0o644,
        "serverKey.pem": 0o600,
    }
    assert written["caCert.pem"].read_bytes() == ecdsa_ca.cert_pem
    assert written["caKey.pem"].read_bytes() == ecdsa_ca.key_pem
    assert written["serverCert.pem"].read_bytes() == ecdsa_leaf.cert_pem
    assert written["serverKey.pem"].read_bytes() == ecdsa_leaf.key_pem


def test_write_key_pairs_replaces_existing_files(
    ecdsa_ca: KeyPair, ecdsa_leaf: KeyPair, tmp_path: Path
) -> None:
    write_key_pairs(tmp_path, ca=ecdsa_ca, server=ecdsa_leaf)
    inode_before = (tmp_path / "serverCert.pem").stat().st_ino
    newer = issue_serving_certificate(
        ca=ecdsa_ca, names=SERVICE_NAMES, now=NOW, days=2, key_type="ecdsa"
    )
    write_key_pairs(tmp_path, ca=ecdsa_ca, server=newer)
    assert (tmp_path / "serverCert.pem").read_bytes() == newer.cert_pem
    assert (tmp_path / "serverCert.pem").stat().st_ino != inode_before  # replaced, not rewritten
    assert len(list(tmp_path.iterdir())) == 4


def test_load_key_pair_round_trip(ecdsa_ca: KeyPair, ecdsa_leaf: KeyPair, tmp_path: Path) -> None:
    written = write_key_pairs(tmp_path, ca=ecdsa_ca, server=ecdsa_leaf)
    loaded = load_key_pair(written["serverCert.pem"], written["serverKey.pem"])
    assert loaded == ecdsa_leaf
    assert load_key_pair(written["caCert.pem"], written["caKey.pem"]) == ecdsa_ca


def test_load_key_pair_rejects_a_mismatched_key(
    ecdsa_ca: KeyPair, ecdsa_leaf: KeyPair, tmp_path: Path
) -> None:
    written = write_key_pairs(tmp_path, ca=ecdsa_ca, server=ecdsa_leaf)
    with pytest.raises(CertificateError, match=r"caKey\.pem: private key does not match") as info:
        load_key_pair(written["serverCert.pem"], written["caKey.pem"])
    assert "serverCert.pem" in str(info.value)


@pytest.mark.parametrize(
    "case",
    [
        ("serverCert.pem", b"garbage", r"serverCert\.pem: not a PEM certificate"),
        ("serverKey.pem", b"garbage", r"serverKey\.pem: not a usable unencrypted PEM private key"),
        ("serverCert.pem", None, r"serverCert\.pem: cannot read"),
    ],
    ids=["garbage-cert", "garbage-key", "missing-cert"],
)
def test_load_key_pair_names_the_broken_file(
    ecdsa_ca: KeyPair,
    ecdsa_leaf: KeyPair,
    tmp_path: Path,
    case: tuple[str, bytes | None, str],
) -> None:
    corrupt, content, message = case
    written = write_key_pairs(tmp_path, ca=ecdsa_ca, server=ecdsa_leaf)
    if content is None:
        written[corrupt].unlink()
    else:
        written[corrupt].write_bytes(content)
    with pytest.raises(CertificateError, match=message):
        load_key_pair(written["serverCert.pem"], written["serverKey.pem"])
    assert issubclass(CertificateError, ValueError)


@pytest.mark.parametrize("san", ["bad name!", "-leading.example", "a..b", "x" * 64 + ".io"])
def test_certs_refuses_a_san_that_is_no_dns_name_or_ip(
    san: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "certs"
    argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", str(out)]
    assert main([*argv, f"--san={san}"]) == 2
    assert capsys.readouterr().err == (
        f"kubescale certs: error: --san {san!r}: not a DNS name (RFC 1123, '*.' allowed first) "
        "or an IP address\n"
    )
    assert not out.exists()


@pytest.mark.parametrize("san", ["*.example.com", "Kubescale.Example.com", "10.0.0.1", "::1"])
def test_certs_takes_dns_names_wildcards_and_ips(san: str, tmp_path: Path) -> None:
    out = tmp_path / "certs"
    argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", str(out)]
    assert main([*argv, "--san", san, "--key-type", "ecdsa"]) == 0
    assert (out / "serverCert.pem").exists()
