"""Flags of the VPA admission webhook in ``kubescale serve``, and the settings built from them.

Names and defaults are upstream VPA admission-controller's (``config/config.go``, ``main.go``,
``common/flags.go``): ``--register-webhook`` (true), ``--webhook-service`` (``vpa-webhook``),
``--register-by-url``/``--webhook-address``/``--webhook-port``, ``--webhook-timeout-seconds``
(30), ``--webhook-failure-policy-fail`` (false → ``Ignore``), ``--webhook-labels``
(``k1:v1,k2:v2``), ``--status-lease-name``/``-namespace``/``-update-interval``,
``--vpa-object-namespace``/``--ignored-vpa-object-namespaces`` (mutually exclusive) and
``--feature-gates`` for the VPA gates ``InPlace``, ``PerVPAConfig`` and ``CPUStartupBoost`` (all
alpha, off by default).

kubescale's additions:

- ``--webhook auto|true|false``: whether ``serve`` runs the webhook at all. ``auto`` (default)
  runs it when there is a cluster to talk to: in a pod (``KUBERNETES_SERVICE_HOST`` set) or with
  an explicit ``--kubeconfig``; so ``kubescale serve`` on a workstation never registers a webhook
  in whatever cluster ``~/.kube/config`` happens to point at.
- ``--webhook-service-namespace``: the Service's namespace. Upstream reads it from the
  ``NAMESPACE`` environment variable only; the flag defaults to that, else ``kube-system``.
- ``--cap-to-largest-node`` and ``--avoid-hpa-conflict``: the two steps beyond upstream, both
  off by default (see :mod:`kubescale.webhook.admission_routes`).

Differences in how values are checked: upstream logs a malformed ``--webhook-labels`` and
registers without labels; here it is a start-up error, like every other bad flag, as is an
unknown feature gate (component-base's ``--feature-gates`` refuses those too).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from kubescale.base.flag_types import FlagValueError, add_bool_flag, positive_duration
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.controllers.vpa.api.vpa_flags import (
    VPA_FEATURE_GATES,
    add_feature_gates_argument,
    add_vpa_namespace_arguments,
    parse_feature_gates,
    vpa_namespaces,
)
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.webhook.vpa_spec_rules import CPU_STARTUP_BOOST_GATE

__all__ = [
    "DEFAULT_STATUS_LEASE_NAME",
    "DEFAULT_WEBHOOK_SERVICE",
    "WebhookConfigError",
    "WebhookMode",
    "WebhookSettings",
    "add_webhook_arguments",
    "parse_webhook_labels",
    "webhook_settings_from_args",
]

WebhookMode = Literal["auto", "true", "false"]

DEFAULT_WEBHOOK_SERVICE: Final = "vpa-webhook"
DEFAULT_STATUS_LEASE_NAME: Final = "vpa-admission-controller"
FALLBACK_NAMESPACE: Final = "kube-system"
NAMESPACE_ENV: Final = "NAMESPACE"
MAX_WEBHOOK_TIMEOUT_SECONDS: Final = 30
"""kube-apiserver's validation: ``timeoutSeconds`` must be in 1..30."""


class WebhookConfigError(FlagValueError):
    """A webhook flag value that parsed but does not make sense; the message names the flag."""


@dataclass(frozen=True, kw_only=True)
class WebhookSettings:
    """The webhook's settings, validated once at start."""

    mode: WebhookMode = "auto"
    register_webhook: bool = True
    service_name: str = DEFAULT_WEBHOOK_SERVICE
    service_namespace: str = FALLBACK_NAMESPACE
    register_by_url: bool = False
    webhook_address: str = ""
    webhook_port: str = ""
    timeout_seconds: int = 30
    failure_policy_fail: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    vpa_object_namespace: str = ""
    ignored_vpa_object_namespaces: tuple[str, ...] = ()
    status_lease_name: str = DEFAULT_STATUS_LEASE_NAME
    status_lease_namespace: str = FALLBACK_NAMESPACE
    status_lease_update_interval: float = 10.0
    cap_to_largest_node: bool = False
    avoid_hpa_conflict: bool = False
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(VPA_FEATURE_GATES))
    max_allowed_cpu_boost: Quantity | None = None
    """``--max-allowed-cpu-boost``: the most CPU a startup boost gives (``None``: no cap)."""

    @property
    def startup_boost(self) -> StartupBoostSettings | None:
        """The CPU startup boost's settings, ``None`` unless the ``CPUStartupBoost`` gate is on."""
        if not self.feature_gates.get(CPU_STARTUP_BOOST_GATE, False):
            return None
        return StartupBoostSettings(max_allowed_cpu_boost=self.max_allowed_cpu_boost)

    @property
    def url(self) -> str:
        """``clientConfig.url`` with ``--register-by-url``: ``<address>:<port>`` as upstream."""
        return f"{self.webhook_address}:{self.webhook_port}"


def add_webhook_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the webhook flags on ``parser`` (one argument group)."""
    group = parser.add_argument_group("VPA admission webhook (upstream admission-controller flags)")
    group.add_argument(
        "--webhook",
        choices=("auto", "true", "false"),
        default="auto",
        help="serve the VPA admission webhook: auto = when in a cluster or given --kubeconfig "
        "(default: %(default)s)",
    )
    add_bool_flag(
        group, "--register-webhook", True, "create the MutatingWebhookConfiguration at start"
    )
    group.add_argument(
        "--webhook-service",
        default=DEFAULT_WEBHOOK_SERVICE,
        help="Service the webhook is registered under (default: %(default)s)",
    )
    group.add_argument(
        "--webhook-service-namespace",
        default="",
        help="namespace of that Service (default: $NAMESPACE, else kube-system)",
    )
    add_bool_flag(
        group, "--register-by-url", False, "register <webhook-address>:<webhook-port> as URL"
    )
    group.add_argument(
        "--webhook-address", default="", help="URL the webhook is registered under (by URL)"
    )
    group.add_argument("--webhook-port", default="", help="port appended to --webhook-address")
    group.add_argument(
        "--webhook-timeout-seconds",
        type=int,
        default=30,
        metavar="N",
        help="how long kube-apiserver waits for the webhook, 1-30 (default: %(default)s)",
    )
    add_bool_flag(
        group, "--webhook-failure-policy-fail", False, "failurePolicy Fail instead of Ignore"
    )
    group.add_argument(
        "--webhook-labels",
        default="",
        help="labels of the webhook configuration, key1:value1,key2:value2",
    )
    add_vpa_namespace_arguments(group)
    group.add_argument(
        "--status-lease-name",
        default=DEFAULT_STATUS_LEASE_NAME,
        help="Lease renewed to tell the updater the webhook runs (default: %(default)s)",
    )
    group.add_argument(
        "--status-lease-namespace",
        default="",
        help="namespace of that Lease (default: $NAMESPACE, else kube-system)",
    )
    group.add_argument(
        "--status-lease-update-interval",
        type=positive_duration,
        default=10.0,
        metavar="DURATION",
        help="how often the status Lease is renewed (default: 10s)",
    )
    add_bool_flag(
        group,
        "--cap-to-largest-node",
        False,
        "beyond upstream: scale requests down so the pod fits the largest Ready node",
    )
    add_bool_flag(
        group,
        "--avoid-hpa-conflict",
        False,
        "beyond upstream: leave resources an HPA on the same target scales on untouched",
    )
    group.add_argument(
        "--max-allowed-cpu-boost",
        default="",
        metavar="QUANTITY",
        help="the largest CPU request a startup boost may give (gate CPUStartupBoost; "
        "default: no cap)",
    )
    add_feature_gates_argument(group)


def _max_allowed_cpu_boost(text: str) -> Quantity | None:
    if text.strip() == "":
        return None
    try:
        quantity = Quantity.parse(text.strip())
    except QuantityError as error:
        raise WebhookConfigError(f"--max-allowed-cpu-boost: {error}") from error
    if quantity.sign() < 0:
        raise WebhookConfigError(f"--max-allowed-cpu-boost: {text!r} must not be negative")
    return quantity


def parse_webhook_labels(text: str) -> dict[str, str]:
    """``convertLabelsOrAnnotationsToMap``: ``"k1:v1,k2:v2"`` → ``{"k1": "v1", "k2": "v2"}``.

    Surrounding double quotes are trimmed, each pair is split at its first ``:``, keys and values
    are trimmed; a pair without ``:`` or with an empty key is an error.
    """
    labels: dict[str, str] = {}
    if text == "":
        return labels
    for pair in text.strip('"').split(","):
        key, sep, value = pair.partition(":")
        if not sep or not key.strip():
            raise WebhookConfigError(
                f"--webhook-labels: {pair!r} is invalid, the format should be: "
                "'key1:value1,key2:value2'"
            )
        labels[key.strip()] = value.strip()
    return labels


def webhook_settings_from_args(
    args: argparse.Namespace, *, environ: Mapping[str, str] | None = None
) -> WebhookSettings:
    """Build and cross-check the settings; raises :class:`WebhookConfigError` naming the flag."""
    env = os.environ if environ is None else environ
    namespace_default = env.get(NAMESPACE_ENV, "") or FALLBACK_NAMESPACE
    timeout = args.webhook_timeout_seconds
    if not 1 <= timeout <= MAX_WEBHOOK_TIMEOUT_SECONDS:
        raise WebhookConfigError(
            f"--webhook-timeout-seconds: {timeout} is out of range 1-{MAX_WEBHOOK_TIMEOUT_SECONDS}"
        )
    selected, ignored = vpa_namespaces(args)
    if args.register_by_url and args.register_webhook and not args.webhook_address:
        raise WebhookConfigError("--register-by-url needs --webhook-address")
    if not args.webhook_service.strip() and not args.register_by_url:
        raise WebhookConfigError("--webhook-service must not be empty")
    return WebhookSettings(
        mode=args.webhook,
        register_webhook=args.register_webhook,
        service_name=args.webhook_service.strip(),
        service_namespace=args.webhook_service_namespace.strip() or namespace_default,
        register_by_url=args.register_by_url,
        webhook_address=args.webhook_address,
        webhook_port=args.webhook_port,
        timeout_seconds=timeout,
        failure_policy_fail=args.webhook_failure_policy_fail,
        labels=parse_webhook_labels(args.webhook_labels),
        vpa_object_namespace=selected,
        ignored_vpa_object_namespaces=ignored,
        status_lease_name=args.status_lease_name,
        status_lease_namespace=args.status_lease_namespace.strip() or namespace_default,
        status_lease_update_interval=args.status_lease_update_interval,
        cap_to_largest_node=args.cap_to_largest_node,
        avoid_hpa_conflict=args.avoid_hpa_conflict,
        feature_gates=parse_feature_gates(args.feature_gates),
        max_allowed_cpu_boost=_max_allowed_cpu_boost(args.max_allowed_cpu_boost),
    )


SERVE_ONLY_FLAGS: Final = frozenset(
    {
        "register-webhook",
        "webhook-service",
        "webhook-service-namespace",
        "register-by-url",
        "webhook-address",
        "webhook-port",
    }
)
"""Flags a simulated run refuses (the registry entry, :mod:`kubescale.components`)."""
