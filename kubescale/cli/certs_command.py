"""``kubescale certs``: a CA and a serving certificate for a Service, as upstream's gencerts.sh.

Writes ``caCert.pem``, ``caKey.pem``, ``serverCert.pem``, ``serverKey.pem`` (the names of
upstream VPA's Secret keys and flag defaults) into ``--out`` and prints the base64 caBundle on
stdout. With ``--ca-cert``/``--ca-key`` an existing CA signs a new serving certificate (rotation
of the leaf without changing the caBundle).
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from kubescale.base.clock import RealClock
from kubescale.certs.authority import (
    CertificateError,
    KeyPair,
    ca_bundle,
    generate_ca,
    issue_serving_certificate,
    load_key_pair,
    service_dns_names,
    write_key_pairs,
)
from kubescale.kube.api_paths import is_dns1123_subdomain


def _positive_days(text: str) -> int:
    try:
        days = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of days {text!r}") from None
    if days < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 day, got {days}")
    return days


def _valid_san(name: str) -> bool:
    """An IP address, or a DNS name: RFC 1123 labels of at most 63 characters (any case),
    optionally ``*.`` first."""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        pass
    else:
        return True
    host = name.lower().removeprefix("*.")
    return is_dns1123_subdomain(host) and all(len(label) <= 63 for label in host.split("."))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--service", required=True, help="Service name, e.g. kubescale")
    parser.add_argument("--namespace", required=True, help="Service namespace, e.g. kube-system")
    parser.add_argument("--out", type=Path, required=True, help="directory to write the PEM files")
    parser.add_argument(
        "--san",
        action="append",
        default=[],
        metavar="NAME_OR_IP",
        help="extra subject alternative name (DNS name or IP); repeatable",
    )
    parser.add_argument(
        "--days",
        type=_positive_days,
        default=365,
        help="serving certificate validity in days (default: %(default)s)",
    )
    parser.add_argument(
        "--ca-days",
        type=_positive_days,
        default=3650,
        help="CA validity in days (default: %(default)s)",
    )
    parser.add_argument(
        "--key-type",
        choices=("rsa", "ecdsa"),
        default="rsa",
        help="RSA 2048 or ECDSA P-256 keys (default: %(default)s)",
    )
    parser.add_argument("--ca-cert", type=Path, help="existing CA certificate to sign with")
    parser.add_argument("--ca-key", type=Path, help="existing CA private key to sign with")


def run(args: argparse.Namespace) -> int:
    prog = "kubescale certs"
    try:
        names = service_dns_names(args.service, args.namespace)
    except ValueError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return 2
    for san in args.san:
        if not _valid_san(san):
            sys.stderr.write(
                f"{prog}: error: --san {san!r}: not a DNS name (RFC 1123, '*.' allowed first) "
                "or an IP address\n"
            )
            return 2
    names += [san for san in args.san if san not in names]
    if (args.ca_cert is None) != (args.ca_key is None):
        sys.stderr.write(f"{prog}: error: --ca-cert and --ca-key go together\n")
        return 2
    now = RealClock().now()
    ca: KeyPair
    try:
        if args.ca_cert is not None:
            ca = load_key_pair(args.ca_cert, args.ca_key)
        else:
            ca = generate_ca(
                common_name=f"{args.service}_webhook_ca",
                now=now,
                days=args.ca_days,
                key_type=args.key_type,
            )
        server = issue_serving_certificate(
            ca=ca, names=names, now=now, days=args.days, key_type=args.key_type
        )
        write_key_pairs(args.out, ca=ca, server=server)
    except (CertificateError, ValueError, OSError) as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return 1
    sys.stdout.write(ca_bundle(ca.cert_pem) + "\n")
    return 0
