"""Flag value parsers, as upstream's Go flags spell values."""

from __future__ import annotations

import argparse

import pytest

from kubescale.base.flag_types import parse_address, parse_bool, parse_port
from kubescale.base.go_time import parse_duration
from kubescale.certs.tls_ciphers import go_cipher_suites_to_openssl


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("10s", 10.0),
        ("1m", 60.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("0", 0.0),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        ("-1s", -1.0),
        ("100us", 1e-4),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "10x", "1m-3s", "ten seconds"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":8944", (None, 8944)),
        ("0.0.0.0:8944", ("0.0.0.0", 8944)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:9000", ("::1", 9000)),
        ("localhost:80", ("localhost", 80)),
    ],
)
def test_addresses(text: str, expected: tuple[str | None, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("8944", "want host:port"),
        (":99999", "out of range"),
        ("::1:80", "brackets"),
        ("[nope]:80", "not an IPv6"),
        (":x", "invalid port"),
    ],
)
def test_bad_addresses(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_address(text)


def test_bool_and_port() -> None:
    assert parse_bool("true")
    assert parse_bool("1")
    assert parse_bool("T")
    assert not parse_bool("false")
    assert not parse_bool("0")
    with pytest.raises(argparse.ArgumentTypeError, match="invalid boolean"):
        parse_bool("maybe")
    assert parse_port("8000") == 8000
    with pytest.raises(argparse.ArgumentTypeError):
        parse_port("-1")


def test_go_cipher_names_map_to_openssl() -> None:
    assert (
        go_cipher_suites_to_openssl(
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305:"
            "TLS_AES_128_GCM_SHA256"
        )
        == "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305"
    )
    assert go_cipher_suites_to_openssl("TLS_AES_256_GCM_SHA384") is None
    with pytest.raises(ValueError, match="unknown cipher suite 'TLS_NOPE'"):
        go_cipher_suites_to_openssl("TLS_NOPE")
    with pytest.raises(ValueError, match="insecure"):
        go_cipher_suites_to_openssl("TLS_RSA_WITH_RC4_128_SHA")
