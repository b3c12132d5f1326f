"""``DefaultEvictorArgs`` (upstream ``defaultevictor/types.go``, ``defaults.go``,
``validation.go``).

Fields: ``nodeSelector`` (label selector text), ``labelSelector``, ``namespaceLabelSelector``,
``priorityThreshold`` (``value`` or ``name``, not both; a value above 2000000000 is refused),
``nodeFit`` (false), ``minReplicas`` (active only above 1), ``minPodAge`` (a Go duration),
``noEvictionPolicy`` (``""``, ``Preferred`` or ``Mandatory``) and ``podProtections``
(``defaultDisabled``, ``extraEnabled``, ``config.PodsWithPVC.protectedStorageClasses``).

Protections: enabled by default ``PodsWithLocalStorage``, ``SystemCriticalPods``,
``FailedBarePods``, ``DaemonSetPods`` (only these may be in ``defaultDisabled``); extra
``PodsWithPVC``, ``PodsWithoutPDB``, ``PodsWithResourceClaims`` (only these may be in
``extraEnabled``). The deprecated booleans map onto them (``evictLocalStoragePods`` disables
``PodsWithLocalStorage``, ``evictDaemonSetPods`` ``DaemonSetPods``, ``evictSystemCriticalPods``
``SystemCriticalPods``, ``evictFailedBarePods`` ``FailedBarePods``; ``ignorePvcPods`` enables
``PodsWithPVC``, ``ignorePodsWithoutPDB`` ``PodsWithoutPDB``) and cannot be mixed with
``podProtections``.

The priority threshold is kept as given: a ``name`` is resolved against the PriorityClasses each
cycle (upstream resolves it once when loading the policy); without one the threshold is
2000000000 (system-cluster-critical).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Final

from kubescale.base.go_time import parse_duration
from kubescale.objects.selectors import LabelSelector, SelectorError, parse_label_selector

from .fields import Fields, fail

__all__ = [
    "DEFAULT_PROTECTIONS",
    "EXTRA_PROTECTIONS",
    "DefaultEvictorArgs",
    "PriorityThreshold",
    "read_default_evictor_args",
]

LOCAL_STORAGE: Final = "PodsWithLocalStorage"
SYSTEM_CRITICAL: Final = "SystemCriticalPods"
FAILED_BARE: Final = "FailedBarePods"
DAEMON_SETS: Final = "DaemonSetPods"
WITH_PVC: Final = "PodsWithPVC"
WITHOUT_PDB: Final = "PodsWithoutPDB"
RESOURCE_CLAIMS: Final = "PodsWithResourceClaims"
DEFAULT_PROTECTIONS: Final = (LOCAL_STORAGE, SYSTEM_CRITICAL, FAILED_BARE, DAEMON_SETS)
EXTRA_PROTECTIONS: Final = (WITH_PVC, WITHOUT_PDB, RESOURCE_CLAIMS)
MAX_PRIORITY_THRESHOLD: Final = 2_000_000_000
NO_EVICTION_POLICIES: Final = ("", "Preferred", "Mandatory")

_DEPRECATED: Final = {
    "evictLocalStoragePods": (LOCAL_STORAGE, False),
    "evictDaemonSetPods": (DAEMON_SETS, False),
    "evictSystemCriticalPods": (SYSTEM_CRITICAL, False),
    "evictFailedBarePods": (FAILED_BARE, False),
    "ignorePvcPods": (WITH_PVC, True),
    "ignorePodsWithoutPDB": (WITHOUT_PDB, True),
}
_FIELDS: Final = (
    "nodeSelector",
    "labelSelector",
    "namespaceLabelSelector",
    "priorityThreshold",
    "nodeFit",
    "minReplicas",
    "minPodAge",
    "noEvictionPolicy",
    "podProtections",
    *_DEPRECATED,
)


@dataclass(frozen=True)
class PriorityThreshold:
    value: int | None = None
    name: str = ""


@dataclass(frozen=True, kw_only=True)
class DefaultEvictorArgs:
    node_selector: str = ""
    node_selector_parsed: LabelSelector | None = None
    label_selector: LabelSelector | None = None
    namespace_label_selector: LabelSelector | None = None
    priority_threshold: PriorityThreshold | None = None
    node_fit: bool = False
    min_replicas: int = 0
    min_pod_age: float | None = None
    """Seconds; ``None`` when unset."""
    no_eviction_policy: str = ""
    protections: frozenset[str] = frozenset(DEFAULT_PROTECTIONS)
    """The protections in force (module docstring)."""
    protected_storage_classes: tuple[str, ...] = ()


def _protections(fields: Fields) -> tuple[frozenset[str], tuple[str, ...]]:
    enabled = set(DEFAULT_PROTECTIONS)
    deprecated = [name for name in _DEPRECATED if fields.has(name)]
    obj = fields.object("podProtections", ("defaultDisabled", "extraEnabled", "config"))
    if deprecated and obj is not None:
        fail(
            fields.at("podProtections"),
            f"cannot be combined with the deprecated {', '.join(deprecated)}",
        )
    for name in deprecated:
        protection, enables = _DEPRECATED[name]
        if fields.flag(name):
            if enables:
                enabled.add(protection)
            else:
                enabled.discard(protection)
    classes: tuple[str, ...] = ()
    if obj is not None:
        for index, name in enumerate(obj.strings("defaultDisabled") or ()):
            if name not in DEFAULT_PROTECTIONS:
                fail(
                    f"{obj.at('defaultDisabled')}[{index}]",
                    f"{name!r} is not a default protection "
                    f"(one of {', '.join(DEFAULT_PROTECTIONS)})",
                )
            enabled.discard(name)
        for index, name in enumerate(obj.strings("extraEnabled") or ()):
            if name not in EXTRA_PROTECTIONS:
                fail(
                    f"{obj.at('extraEnabled')}[{index}]",
                    f"{name!r} is not an extra protection (one of {', '.join(EXTRA_PROTECTIONS)})",
                )
            enabled.add(name)
        config = obj.object("config", (WITH_PVC,))
        pvc = config.object(WITH_PVC, ("protectedStorageClasses",)) if config else None
        if pvc is not None:
            names: list[str] = []
            for index, entry in enumerate(pvc.items("protectedStorageClasses") or ()):
                item = Fields(entry, f"{pvc.at('protectedStorageClasses')}[{index}]", ("name",))
                name = item.text("name")
                if not name:
                    fail(item.at("name"), "is required")
                names.append(name)
            classes = tuple(names)
    return frozenset(enabled), classes


def _selector_text(fields: Fields, key: str) -> tuple[str, LabelSelector | None]:
    text = fields.text(key)
    if not text:
        return "", None
    try:
        return text, parse_label_selector(text)
    except SelectorError as err:
        fail(fields.at(key), f"invalid label selector {text!r}: {err}")


def read_default_evictor_args(raw: object, path: str) -> DefaultEvictorArgs:
    fields = Fields(raw, path, _FIELDS)
    threshold: PriorityThreshold | None = None
    obj = fields.object("priorityThreshold", ("value", "name"))
    if obj is not None:
        value = obj.optional_integer("value")
        name = obj.text("name")
        if value is not None and name:
            fail(fields.at("priorityThreshold"), "only one of value and name can be set")
        if value is not None and value > MAX_PRIORITY_THRESHOLD:
            fail(obj.at("value"), f"must be <= {MAX_PRIORITY_THRESHOLD}, got {value}")
        threshold = PriorityThreshold(value=value, name=name)
    policy = fields.text("noEvictionPolicy")
    if policy not in NO_EVICTION_POLICIES:
        fail(fields.at("noEvictionPolicy"), f"{policy!r} is not one of Preferred, Mandatory")
    min_pod_age: float | None = None
    if fields.has("minPodAge"):
        text = fields.text("minPodAge")
        try:
            min_pod_age = parse_duration(text)
        except argparse.ArgumentTypeError as err:
            fail(fields.at("minPodAge"), str(err))
        if min_pod_age < 0:
            fail(fields.at("minPodAge"), f"must not be negative, got {text!r}")
    protections, classes = _protections(fields)
    node_selector, node_selector_parsed = _selector_text(fields, "nodeSelector")
    return DefaultEvictorArgs(
        node_selector=node_selector,
        node_selector_parsed=node_selector_parsed,
        label_selector=fields.label_selector("labelSelector"),
        namespace_label_selector=fields.label_selector("namespaceLabelSelector"),
        priority_threshold=threshold,
        node_fit=fields.flag("nodeFit"),
        min_replicas=fields.integer("minReplicas", 0, minimum=0),
        min_pod_age=min_pod_age,
        no_eviction_policy=policy,
        protections=protections,
        protected_storage_classes=classes,
    )
