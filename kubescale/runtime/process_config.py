"""The process's own flags (TLS server, health address, logs, leader election) and the typed,
validated settings built from them; ``kubescale serve`` adds every component's flags
(:mod:`kubescale.cli.serve_config`).

Flag names and defaults are upstream VPA admission-controller's where upstream has the flag
(``--port 8000``, ``--address :8944``, ``--tls-cert-file``, ``--tls-private-key``,
``--client-ca-file``,
 ``--min-tls-version``, ``--tls-ciphers``, ``--reload-cert``, ``--kubeconfig``).

Two deliberate differences, both so that upstream's own Deployment manifests work unchanged:
- ``--client-ca-file`` has upstream's default path and meaning (the CA bundle of the serving
  certificate, published as the webhook's ``caBundle``); verifying *client* certificates against
  it is opt-in with ``--require-client-cert``. Turning it on by default would refuse
  kube-apiserver, which presents no client certificate unless configured to.
- ``--reload-cert`` defaults to true: rotating a mounted Secret should never need a restart.
"""

from __future__ import annotations

import argparse
import ipaddress
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from kubescale.base.coordination import (
    COORDINATION_VALUES,
    DEFAULT_COORDINATION,
    Coordination,
    parse_coordination,
)
from kubescale.base.flag_types import (
    parse_address,
    parse_bool,
    parse_port,
    positive_duration,
)
from kubescale.base.logs import LOG_LEVELS, LogFormat
from kubescale.certs.tls_ciphers import go_cipher_suites_to_openssl
from kubescale.kube.api_paths import is_dns1123_label, is_dns1123_subdomain
from kubescale.kube.lease_record import validate_timing
from kubescale.runtime.server_limits import (
    LimitsError,
    ServerLimits,
    add_server_limit_arguments,
    server_limits_from_args,
)
from kubescale.runtime.upstream_flags import add_upstream_arguments, upstream_flags_from_args

MIN_TLS_VERSIONS = {"tls1_2": ssl.TLSVersion.TLSv1_2, "tls1_3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True, kw_only=True)
class ProcessConfig:
    """The process's settings, validated once at start."""

    bind_address: str | None
    port: int
    metrics_host: str | None
    metrics_port: int
    tls_cert_file: Path
    tls_private_key: Path
    client_ca_file: Path
    require_client_cert: bool
    min_tls_version: ssl.TLSVersion
    tls_ciphers: str | None
    reload_cert: bool
    cert_reload_interval: float
    kubeconfig: Path | None
    log_level: str
    log_format: LogFormat
    graceful_shutdown_timeout: float
    leader_elect: bool
    leader_elect_lease_duration: float
    leader_elect_renew_deadline: float
    leader_elect_retry_period: float
    leader_elect_resource_name: str
    leader_elect_resource_namespace: str
    kube_api_qps: float = 0.0
    """``--kube-api-qps``: the client's token bucket (0: no limit)."""
    kube_api_burst: int = 0
    ignored_upstream_flags: tuple[str, ...] = ()
    """Upstream common flags given but without effect here, to log once at start."""
    limits: ServerLimits = field(default_factory=ServerLimits)
    """Deadlines, connection cap and body budget of the TLS server."""
    coordination: Coordination = DEFAULT_COORDINATION
    """How the systems coordinate (:mod:`kubescale.base.coordination`)."""
    extender_client_ca_file: Path | None = None
    """``--extender-client-ca-file``: the TLS server asks clients for a certificate, and the
    scheduler extender's routes accept only those issued by this CA
    (:mod:`kubescale.certs.client_identity`); ``None``: no client authentication there."""
    tls_secret_name: str = ""
    """``--tls-secret-name``: the self-managed certificates' Secret (empty: files mounted)."""
    tls_secret_service: str = "vpa-webhook"


def add_process_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the process's flags on ``parser``."""
    tls = parser.add_argument_group("TLS server (webhook and scheduler extender)")
    tls.add_argument(
        "--port",
        type=parse_port,
        default=8000,
        help="HTTPS port of the webhook/extender server (default: %(default)s)",
    )
    tls.add_argument(
        "--bind-address",
        default="",
        help="IP address the HTTPS server listens on; empty for all (default: all)",
    )
    tls.add_argument(
        "--tls-cert-file",
        type=Path,
        default=Path("/etc/tls-certs/serverCert.pem"),
        help="serving certificate PEM (default: %(default)s)",
    )
    tls.add_argument(
        "--tls-private-key",
        type=Path,
        default=Path("/etc/tls-certs/serverKey.pem"),
        help="serving private key PEM (default: %(default)s)",
    )
    tls.add_argument(
        "--client-ca-file",
        type=Path,
        default=Path("/etc/tls-certs/caCert.pem"),
        help="CA bundle of the serving certificate (the webhook caBundle); also the "
        "CA client certificates are verified against with --require-client-cert "
        "(default: %(default)s)",
    )
    tls.add_argument(
        "--require-client-cert",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="refuse clients without a certificate signed by --client-ca-file (default: false)",
    )
    tls.add_argument(
        "--extender-client-ca-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="CA bundle of client certificates: the scheduler extender's routes answer 403 "
        "to clients without a certificate issued by it (kube-scheduler's extender "
        "tlsConfig certFile/keyFile); the webhook still accepts clients without one "
        "(default: off)",
    )
    tls.add_argument(
        "--min-tls-version",
        choices=sorted(MIN_TLS_VERSIONS),
        default="tls1_2",
        help="lowest TLS version accepted (default: %(default)s)",
    )
    tls.add_argument(
        "--tls-ciphers",
        default="",
        help="comma or colon separated Go cipher suite names for TLS 1.2 "
        "(default: OpenSSL's secure defaults)",
    )
    tls.add_argument(
        "--reload-cert",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="reload the certificate, key and CA when their files change (default: true)",
    )
    tls.add_argument(
        "--tls-secret-name",
        default="",
        metavar="NAME",
        help="self-managed certificates: keep a CA and serving certificate in this Secret of "
        "--leader-elect-resource-namespace, created at start when missing and renewed before "
        "expiry, and write them to the --tls-cert-file/--tls-private-key/--client-ca-file "
        "paths (default: off, the files are mounted)",
    )
    tls.add_argument(
        "--tls-secret-service",
        default="vpa-webhook",
        metavar="NAME",
        help="with --tls-secret-name: the Service whose DNS names the serving certificate "
        "carries (default: %(default)s)",
    )
    tls.add_argument(
        "--cert-reload-interval",
        type=positive_duration,
        default=10.0,
        metavar="DURATION",
        help="how often certificate files are checked for changes (default: 10s)",
    )
    add_server_limit_arguments(tls)

    ops = parser.add_argument_group("operations")
    ops.add_argument(
        "--address",
        default=":8944",
        help="plain HTTP address for /metrics, /healthz, /readyz (default: %(default)s)",
    )
    ops.add_argument(
        "--kubeconfig", default="", help="kubeconfig file; empty for in-cluster configuration"
    )
    ops.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        default=None,
        help="(default: info, or debug with --v 4 and more)",
    )
    ops.add_argument(
        "--log-format",
        "--logging-format",
        dest="log_format",
        choices=("text", "json"),
        default="text",
        help="(default: %(default)s)",
    )
    ops.add_argument(
        "--graceful-shutdown-timeout",
        type=positive_duration,
        default=25.0,
        metavar="DURATION",
        help="after SIGTERM, how long loops may take to finish their iteration (default: 25s)",
    )

    suite = parser.add_argument_group("the suite")
    suite.add_argument(
        "--coordination",
        choices=COORDINATION_VALUES,
        default=DEFAULT_COORDINATION.value,
        help="one-brain: the systems share one disruption budget and one view of the requests "
        "(VPA aware of the HPA, the cluster autoscaler of the VPA, the descheduler checks the "
        "fit); separate: upstream's behaviour, each system on its own (default: %(default)s)",
    )

    election = parser.add_argument_group(
        "leader election (gates the control loops only; every replica serves the webhook and "
        "the extender)"
    )
    election.add_argument(
        "--leader-elect",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="run the control loops only on the replica holding the Lease (default: true)",
    )
    election.add_argument(
        "--leader-elect-lease-duration",
        type=positive_duration,
        default=15.0,
        metavar="DURATION",
        help="how long a non-leader waits after the last observed renewal "
        "before taking over (default: 15s)",
    )
    election.add_argument(
        "--leader-elect-renew-deadline",
        type=positive_duration,
        default=10.0,
        metavar="DURATION",
        help="how long the leader retries renewing before it gives up (default: 10s)",
    )
    election.add_argument(
        "--leader-elect-retry-period",
        type=positive_duration,
        default=2.0,
        metavar="DURATION",
        help="wait between acquire/renew tries (default: 2s)",
    )
    election.add_argument(
        "--leader-elect-resource-lock",
        choices=("leases",),
        default="leases",
        help="lock object kind (default: %(default)s)",
    )
    election.add_argument(
        "--leader-elect-resource-name",
        default="kubescale",
        help="Lease name (default: %(default)s)",
    )
    election.add_argument(
        "--leader-elect-resource-namespace",
        default="kube-system",
        help="Lease namespace (default: %(default)s)",
    )
    add_upstream_arguments(parser)


class ConfigError(ValueError):
    """A flag value that parsed but does not make sense; the message names the flag."""


def process_config_from_args(args: argparse.Namespace) -> ProcessConfig:
    """Build and cross-check the settings; raises :class:`ConfigError` naming the flag."""
    try:
        metrics_host, metrics_port = parse_address(args.address)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--address: {exc}") from None
    try:
        ciphers = go_cipher_suites_to_openssl(args.tls_ciphers) if args.tls_ciphers else None
    except ValueError as exc:
        raise ConfigError(f"--tls-ciphers: {exc}") from None
    bind = args.bind_address.strip() or None
    if bind is not None:
        try:
            ipaddress.ip_address(bind)
        except ValueError:
            raise ConfigError(f"--bind-address: invalid IP address {bind!r}") from None
    if (
        args.port != 0
        and args.port == metrics_port
        and (bind is None or metrics_host is None or bind == metrics_host)
    ):
        raise ConfigError(f"--port and --address both use port {args.port}")
    try:
        validate_timing(
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        )
    except ValueError as exc:
        message = str(exc)
        for setting in ("lease_duration", "renew_deadline", "retry_period"):
            message = message.replace(setting, "--leader-elect-" + setting.replace("_", "-"))
        raise ConfigError(message) from None
    upstream = upstream_flags_from_args(args)
    if not is_dns1123_subdomain(args.leader_elect_resource_name):
        raise ConfigError(
            f"--leader-elect-resource-name: {args.leader_elect_resource_name!r} is not a valid "
            "Lease name (a DNS-1123 subdomain)"
        )
    if not is_dns1123_label(args.leader_elect_resource_namespace):
        raise ConfigError(
            f"--leader-elect-resource-namespace: {args.leader_elect_resource_namespace!r} is not "
            "a valid namespace (a DNS-1123 label)"
        )
    for flag, value in (
        ("--tls-secret-name", args.tls_secret_name),
        ("--tls-secret-service", args.tls_secret_service),
    ):
        if value and not is_dns1123_label(value):
            raise ConfigError(f"{flag}: {value!r} is not a valid name (a DNS-1123 label)")
    try:
        limits = server_limits_from_args(args)
    except LimitsError as exc:
        raise ConfigError(str(exc)) from None
    return ProcessConfig(
        bind_address=bind,
        port=args.port,
        metrics_host=metrics_host,
        metrics_port=metrics_port,
        tls_cert_file=args.tls_cert_file,
        tls_private_key=args.tls_private_key,
        client_ca_file=args.client_ca_file,
        require_client_cert=args.require_client_cert,
        min_tls_version=MIN_TLS_VERSIONS[args.min_tls_version],
        tls_ciphers=ciphers,
        reload_cert=args.reload_cert,
        cert_reload_interval=args.cert_reload_interval,
        kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
        log_level=upstream.log_level(args.log_level) or "info",
        log_format=args.log_format,
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        leader_elect=args.leader_elect,
        leader_elect_lease_duration=args.leader_elect_lease_duration,
        leader_elect_renew_deadline=args.leader_elect_renew_deadline,
        leader_elect_retry_period=args.leader_elect_retry_period,
        leader_elect_resource_name=args.leader_elect_resource_name,
        leader_elect_resource_namespace=args.leader_elect_resource_namespace,
        kube_api_qps=upstream.kube_api_qps,
        kube_api_burst=upstream.kube_api_burst,
        ignored_upstream_flags=upstream.ignored,
        limits=limits,
        coordination=parse_coordination(args.coordination),
        extender_client_ca_file=args.extender_client_ca_file,
        tls_secret_name=args.tls_secret_name,
        tls_secret_service=args.tls_secret_service,
    )
