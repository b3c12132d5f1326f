"""``descheduler/v1alpha2`` ``DeschedulerPolicy``: read from YAML as upstream reads it.

Upstream: ``pkg/api/v1alpha2/types.go``, ``pkg/descheduler/policyconfig.go``, defaults and
validation (reference §2 "Policy file"). The document::

    apiVersion: descheduler/v1alpha2
    kind: DeschedulerPolicy
    nodeSelector: "node=node1"              # label selector text
    maxNoOfPodsToEvictPerNode: 10           # limits: unset = unlimited
    maxNoOfPodsToEvictPerNamespace: 10
    maxNoOfPodsToEvictTotal: 50
    gracePeriodSeconds: 60                  # the Eviction's deleteOptions
    evictionFailureEventNotification: false
    metricsProviders: [{source: KubernetesMetrics}]  # or Prometheus with prometheus.url
    profiles:
    - name: default
      pluginConfig: [{name: <plugin>, args: {...}}]
      plugins: {deschedule: {enabled: [...]}, balance: {enabled: [...]},
                filter: {...}, preEvictionFilter: {...}}

Loading, in upstream's order:

1. every ``pluginConfig`` name must be a registered plugin (the ten strategies and
   ``DefaultEvictor``), each at most once per profile, its ``args`` decoded, defaulted and
   validated (:mod:`.evictor_args`, :mod:`.strategy_args`, :mod:`.utilization_args`);
2. ``DefaultEvictor``'s config is added when missing (default arguments) and the plugin is
   prepended to ``filter.enabled`` and ``preEvictionFilter.enabled`` unless listed there or in
   ``disabled``;
3. a plugin enabled at an extension point must implement it (Deschedule: the node taints,
   node affinity, inter-pod anti-affinity, too many restarts, pod lifetime and failed pods
   plugins; Balance: duplicates, low/high node utilization, topology spread; Filter and
   PreEvictionFilter: ``DefaultEvictor``); an enabled plugin without a ``pluginConfig`` runs
   with its default arguments, which must be valid;
4. each metrics provider source at most once; Prometheus needs ``url``; a LowNodeUtilization
   reading ``KubernetesMetrics`` or ``Prometheus`` needs that provider (upstream fails to build
   the plugin: "metrics client not initialized").

Plugin field names match case-insensitively (Go's JSON decoding; ``preevictionfilter`` is the
struct tag, ``preEvictionFilter`` what the docs write). The deprecated ``descheduler/v1alpha1``
format was removed upstream (v0.31) and is refused with a pointer to v1alpha2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from kubescale.objects.selectors import LabelSelector, SelectorError, parse_label_selector
from kubescale.prometheus.client_settings import check_prometheus_address

from .evictor_args import DefaultEvictorArgs, read_default_evictor_args
from .fields import Fields, PolicyError, fail
from .strategy_args import (
    read_failed_pods_args,
    read_inter_pod_anti_affinity_args,
    read_node_affinity_args,
    read_node_taints_args,
    read_pod_lifetime_args,
    read_remove_duplicates_args,
    read_too_many_restarts_args,
    read_topology_spread_args,
)
from .utilization_args import (
    KUBERNETES_METRICS,
    PROMETHEUS_METRICS,
    LowNodeUtilizationArgs,
    read_high_node_utilization_args,
    read_low_node_utilization_args,
)

__all__ = [
    "API_VERSION",
    "BALANCE",
    "DEFAULT_EVICTOR",
    "DESCHEDULE",
    "DeschedulerPolicy",
    "MetricsProvider",
    "PolicyError",
    "Profile",
    "load_policy",
    "load_policy_file",
    "parse_policy",
]

API_VERSION: Final = "descheduler/v1alpha2"
KIND: Final = "DeschedulerPolicy"
DEFAULT_EVICTOR: Final = "DefaultEvictor"
DESCHEDULE: Final = "deschedule"
BALANCE: Final = "balance"
FILTER: Final = "filter"
PRE_EVICTION_FILTER: Final = "preEvictionFilter"
_EXTENSION_POINTS: Final = ("presort", "sort", DESCHEDULE, BALANCE, FILTER, PRE_EVICTION_FILTER)

ArgsReader = Callable[[object, str], Any]

PLUGINS: Final[Mapping[str, tuple[str, ArgsReader]]] = {
    "RemovePodsViolatingNodeTaints": (DESCHEDULE, read_node_taints_args),
    "RemovePodsViolatingNodeAffinity": (DESCHEDULE, read_node_affinity_args),
    "RemovePodsViolatingInterPodAntiAffinity": (DESCHEDULE, read_inter_pod_anti_affinity_args),
    "RemovePodsHavingTooManyRestarts": (DESCHEDULE, read_too_many_restarts_args),
    "PodLifeTime": (DESCHEDULE, read_pod_lifetime_args),
    "RemoveFailedPods": (DESCHEDULE, read_failed_pods_args),
    "RemoveDuplicates": (BALANCE, read_remove_duplicates_args),
    "LowNodeUtilization": (BALANCE, read_low_node_utilization_args),
    "HighNodeUtilization": (BALANCE, read_high_node_utilization_args),
    "RemovePodsViolatingTopologySpreadConstraint": (BALANCE, read_topology_spread_args),
    DEFAULT_EVICTOR: (FILTER, read_default_evictor_args),
}
"""Plugin name → (its extension point, its arguments' reader); DefaultEvictor also serves
PreEvictionFilter."""


@dataclass(frozen=True, kw_only=True)
class Profile:
    name: str
    deschedule: tuple[str, ...] = ()
    balance: tuple[str, ...] = ()
    filter: tuple[str, ...] = (DEFAULT_EVICTOR,)
    pre_eviction_filter: tuple[str, ...] = (DEFAULT_EVICTOR,)
    args: Mapping[str, Any] = field(default_factory=dict)
    """Plugin name → its decoded, defaulted arguments (every enabled plugin has an entry)."""

    @property
    def evictor(self) -> DefaultEvictorArgs:
        args = self.args.get(DEFAULT_EVICTOR)
        return args if isinstance(args, DefaultEvictorArgs) else DefaultEvictorArgs()


@dataclass(frozen=True, kw_only=True)
class MetricsProvider:
    source: str
    prometheus_url: str = ""
    auth_secret: tuple[str, str] | None = None
    """``(namespace, name)`` of the Secret holding the bearer token (its ``prometheus-token``
    key)."""


@dataclass(frozen=True, kw_only=True)
class DeschedulerPolicy:
    profiles: tuple[Profile, ...] = ()
    node_selector: str = ""
    node_selector_parsed: LabelSelector | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    grace_period_seconds: int | None = None
    eviction_failure_event_notification: bool = False
    metrics_providers: tuple[MetricsProvider, ...] = ()

    def provider(self, source: str) -> MetricsProvider | None:
        return next((p for p in self.metrics_providers if p.source == source), None)

    def low_node_utilization(self) -> list[tuple[Profile, LowNodeUtilizationArgs]]:
        """The enabled LowNodeUtilization plugins and their arguments, by profile."""
        return [
            (profile, profile.args["LowNodeUtilization"])
            for profile in self.profiles
            if "LowNodeUtilization" in profile.balance
        ]


def _plugin_set(plugins: Fields | None, point: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if plugins is None:
        return (), ()
    obj = plugins.object(point, ("enabled", "disabled"))
    if obj is None:
        return (), ()
    return obj.strings("enabled") or (), obj.strings("disabled") or ()


def _read_profile(raw: object, index: int, seen: set[str]) -> Profile:
    where = f"profiles[{index}]"
    fields = Fields(raw, where, ("name", "pluginConfig", "plugins"))
    name = fields.text("name")
    if not name:
        fail(fields.at("name"), "is required")
    if name in seen:
        fail(fields.at("name"), f"duplicate profile name {name!r}")
    seen.add(name)
    where = f"profiles[{name}]"
    configs: dict[str, Any] = {}
    for position, entry in enumerate(fields.items("pluginConfig") or ()):
        config = Fields(entry, f"{where}.pluginConfig[{position}]", ("name", "args"))
        plugin = config.text("name")
        if plugin not in PLUGINS:
            fail(
                config.at("name"),
                f"unknown plugin {plugin!r} (known: {', '.join(sorted(PLUGINS))})",
            )
        if plugin in configs:
            fail(config.at("name"), f"plugin {plugin} is configured twice")
        configs[plugin] = PLUGINS[plugin][1](
            config.raw("args"), f"{where}.pluginConfig[{plugin}].args"
        )
    plugins = fields.object("plugins", _EXTENSION_POINTS)
    enabled: dict[str, tuple[str, ...]] = {}
    for point in _EXTENSION_POINTS:
        names, disabled = _plugin_set(plugins, point)
        for position, plugin in enumerate(names):
            at = f"{where}.plugins.{point}.enabled[{position}]"
            if plugin not in PLUGINS:
                fail(at, f"unknown plugin {plugin!r}")
            implements = PLUGINS[plugin][0]
            if point == PRE_EVICTION_FILTER and plugin == DEFAULT_EVICTOR:
                implements = PRE_EVICTION_FILTER
            if implements != point:
                fail(at, f"plugin {plugin} does not implement the {point} extension point")
            if plugin not in configs:
                configs[plugin] = PLUGINS[plugin][1](None, f"{where}.pluginConfig[{plugin}].args")
        if point in (FILTER, PRE_EVICTION_FILTER) and DEFAULT_EVICTOR not in (*names, *disabled):
            names = (DEFAULT_EVICTOR, *names)
        if len(set(names)) != len(names):
            fail(f"{where}.plugins.{point}.enabled", "lists a plugin twice")
        enabled[point] = names
    if DEFAULT_EVICTOR not in configs:
        configs[DEFAULT_EVICTOR] = read_default_evictor_args(None, f"{where}.pluginConfig")
    return Profile(
        name=name,
        deschedule=enabled[DESCHEDULE],
        balance=enabled[BALANCE],
        filter=enabled[FILTER],
        pre_eviction_filter=enabled[PRE_EVICTION_FILTER],
        args=configs,
    )


def _read_providers(fields: Fields) -> tuple[MetricsProvider, ...]:
    providers: list[MetricsProvider] = []
    for index, entry in enumerate(fields.items("metricsProviders") or ()):
        item = Fields(entry, f"metricsProviders[{index}]", ("source", "prometheus"))
        source = item.text("source")
        if source not in (KUBERNETES_METRICS, PROMETHEUS_METRICS):
            fail(
                item.at("source"), f"{source!r} is not {KUBERNETES_METRICS} or {PROMETHEUS_METRICS}"
            )
        if any(p.source == source for p in providers):
            fail(item.at("source"), f"metrics provider {source} is set more than once")
        url, secret = "", None
        prometheus = item.object("prometheus", ("url", "authToken"))
        if source == PROMETHEUS_METRICS:
            if prometheus is None or not prometheus.text("url"):
                fail(item.at("prometheus.url"), "is required for the Prometheus source")
            url = prometheus.text("url")
            try:
                check_prometheus_address(url)
            except ValueError as err:
                fail(item.at("prometheus.url"), str(err))
            token = prometheus.object("authToken", ("secretReference",))
            reference = token.object("secretReference", ("namespace", "name")) if token else None
            if reference is not None:
                if not reference.text("namespace") or not reference.text("name"):
                    fail(reference.path, "needs namespace and name")
                secret = (reference.text("namespace"), reference.text("name"))
        elif prometheus is not None:
            fail(item.at("prometheus"), f"is only used with source {PROMETHEUS_METRICS}")
        providers.append(MetricsProvider(source=source, prometheus_url=url, auth_secret=secret))
    collector = fields.object("metricsCollector", ("enabled",))
    if (
        collector is not None
        and collector.flag("enabled")
        and not any(p.source == KUBERNETES_METRICS for p in providers)
    ):
        providers.append(MetricsProvider(source=KUBERNETES_METRICS))
    return tuple(providers)


def _limit(fields: Fields, key: str) -> int | None:
    return fields.optional_integer(key, minimum=0)


def parse_policy(document: object) -> DeschedulerPolicy:
    """The policy of a decoded YAML document (module docstring); :class:`PolicyError` if bad."""
    if isinstance(document, Mapping) and document.get("apiVersion") == "descheduler/v1alpha1":
        fail(
            "apiVersion",
            "descheduler/v1alpha1 is no longer supported (removed upstream in v0.31); "
            "write the policy as descheduler/v1alpha2 profiles",
        )
    fields = Fields(
        document,
        "",
        (
            "apiVersion",
            "kind",
            "profiles",
            "nodeSelector",
            "maxNoOfPodsToEvictPerNode",
            "maxNoOfPodsToEvictPerNamespace",
            "maxNoOfPodsToEvictTotal",
            "gracePeriodSeconds",
            "evictionFailureEventNotification",
            "metricsCollector",
            "metricsProviders",
        ),
    )
    if fields.text("apiVersion") != API_VERSION:
        fail("apiVersion", f"must be {API_VERSION}, got {fields.text('apiVersion')!r}")
    if fields.text("kind") != KIND:
        fail("kind", f"must be {KIND}, got {fields.text('kind')!r}")
    seen: set[str] = set()
    profiles = tuple(
        _read_profile(raw, index, seen) for index, raw in enumerate(fields.items("profiles") or ())
    )
    selector_text = fields.text("nodeSelector")
    selector: LabelSelector | None = None
    if selector_text:
        try:
            selector = parse_label_selector(selector_text)
        except SelectorError as err:
            fail("nodeSelector", f"invalid label selector {selector_text!r}: {err}")
    policy = DeschedulerPolicy(
        profiles=profiles,
        node_selector=selector_text,
        node_selector_parsed=selector,
        max_pods_per_node=_limit(fields, "maxNoOfPodsToEvictPerNode"),
        max_pods_per_namespace=_limit(fields, "maxNoOfPodsToEvictPerNamespace"),
        max_pods_total=_limit(fields, "maxNoOfPodsToEvictTotal"),
        grace_period_seconds=fields.optional_integer("gracePeriodSeconds", minimum=0),
        eviction_failure_event_notification=fields.flag("evictionFailureEventNotification"),
        metrics_providers=_read_providers(fields),
    )
    for profile, args in policy.low_node_utilization():
        if args.metrics is not None and policy.provider(args.metrics.source) is None:
            fail(
                f"profiles[{profile.name}].pluginConfig[LowNodeUtilization].args."
                "metricsUtilization.source",
                f"{args.metrics.source} needs a metricsProviders entry with that source",
            )
    return policy


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's error on one line: its problem and where (its text spans several lines)."""
    problem = getattr(err, "problem", None)
    mark = getattr(err, "problem_mark", None)
    if problem and mark is not None:
        return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(err).split()) or type(err).__name__


def load_policy(text: str, *, source: str | None = "policy") -> DeschedulerPolicy:
    """Parse YAML (or JSON) text; errors read ``<source>: <field>: <problem>`` (without the
    source when it is ``None``), on one line.

    A document nested deeper than the parser's recursion allows (a policy is a handful of
    levels; a hostile file 100,000) is refused as such, not a traceback."""
    prefix = f"{source}: " if source is not None else ""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PolicyError(f"{prefix}not valid YAML: {_yaml_problem(err)}") from None
    except RecursionError:
        raise PolicyError(f"{prefix}not a DeschedulerPolicy: nested too deeply") from None
    try:
        return parse_policy(document)
    except PolicyError as err:
        raise PolicyError(f"{prefix}{err}") from None
    except RecursionError:
        raise PolicyError(f"{prefix}not a DeschedulerPolicy: nested too deeply") from None


def load_policy_file(path: Path) -> DeschedulerPolicy:
    """The policy in ``path``; a file that is not UTF-8 text (upstream reads YAML or JSON,
    which are) is refused naming the file and the first bad byte."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise PolicyError(f"failed to read policy config file {str(path)!r}: {err}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise PolicyError(
            f"{path}: not a YAML or JSON text file: byte {err.start} (0x{data[err.start]:02x}) "
            "is not UTF-8"
        ) from None
    return load_policy(text, source=str(path))
