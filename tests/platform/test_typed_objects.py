"""API objects are read through the typed objects of :mod:`kubescale.objects` (issue 28.3).

* A raw read of an object's ``metadata``, ``spec`` or ``status`` (``x.get("metadata")``,
  ``x["spec"]``) appears only in ``kubescale/objects/`` (the views and TypedDicts) and
  ``kubescale/sim/`` (the simulator builds and serves raw JSON). Product modules read through
  :class:`~kubescale.objects.views.Meta`, :func:`~kubescale.objects.views.spec_of`,
  :func:`~kubescale.objects.views.status_of` or a TypedDict. The modules not converted yet are
  listed in ``NOT_YET_CONVERTED`` with their exact number of raw reads: the list may only
  shrink (a new raw read, or a read in a module not listed, fails; so does a stale count).
* One parser each: RFC 3339 times are parsed by :mod:`kubescale.base.times` (the extender's
  input check is the one exception: it must refuse a time without a zone, which the reader
  accepts as UTC), Go durations by :mod:`kubescale.base.go_time`.
* The kinds kubescale reads are TypedDicts, every field optional (``total=False``), as the
  API server may leave any field out.

Each checker is shown failing on a planted source, so the proof stays with the test.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import get_type_hints, is_typeddict

import pytest
from mypy import api

import kubescale
from kubescale.controllers.vpa.updater.eviction_restriction import ControllerKey
from kubescale.objects.admission_review import AdmissionReview, JsonPatchOperation, Status
from kubescale.objects.containers import Container
from kubescale.objects.hpa import HorizontalPodAutoscaler, HorizontalPodAutoscalerStatus
from kubescale.objects.hpa import MetricStatus as HpaMetricStatus
from kubescale.objects.lease import Lease
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.meta import (
    Condition,
    CrossVersionObjectReference,
    LabelSelectorObject,
    ObjectMeta,
)
from kubescale.objects.metrics_api import PodMetrics
from kubescale.objects.mutating_webhook_configuration import MutatingWebhookConfiguration
from kubescale.objects.pod import Pod
from kubescale.objects.scale import ReplicaCountedController, Scale
from kubescale.objects.vpa import (
    ContainerResourcePolicy,
    EvictionRequirement,
    PodResourcePolicy,
    PodUpdatePolicy,
    RecommendedContainerResources,
    RecommendedPodResources,
    VerticalPodAutoscaler,
    VerticalPodAutoscalerStatus,
)
from kubescale.objects.vpa_checkpoint import (
    HistogramCheckpoint,
    VerticalPodAutoscalerCheckpoint,
    VerticalPodAutoscalerCheckpointStatus,
)
from kubescale.webhook.vpa_decoding import VpaDecodeError, decode_vpa
from kubescale.webhook.vpa_validation import admit_vpa

PACKAGE_ROOT = Path(kubescale.__file__).resolve().parent
RAW_FIELDS = frozenset({"metadata", "spec", "status"})
EXEMPT = ("objects/", "sim/")
CONDITIONS = frozenset({"c", "cond", "condition", "old", "previous"})
"""Names kubescale gives a status condition: ``condition.get("status")`` reads the condition's
``True``/``False``/``Unknown``, not an object's status."""

# Modules whose raw reads are not converted yet: path (below kubescale/) -> number of raw reads.
# Most are reads of a field of a raw object that is not the whole spec/status (``x.get("spec")``
# kept apart from ``or {}`` because None and {} differ there, ``obj["metadata"]["name"]`` that
# relies on a KeyError), and object construction code (patches, the webhook's responses).
NOT_YET_CONVERTED: dict[str, int] = {}


def _of_a_condition(field: object, receiver: ast.expr) -> bool:
    return field == "status" and isinstance(receiver, ast.Name) and receiver.id in CONDITIONS


def raw_reads(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every ``x.get("metadata"|"spec"|"status")`` call and every
    ``x["metadata"|"spec"|"status"]`` read in ``source`` (a condition's ``status`` aside)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in RAW_FIELDS
            and not _of_a_condition(node.args[0].value, node.func.value)
        ):
            found.append((node.lineno, f'get("{node.args[0].value}")'))
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value in RAW_FIELDS
            and not _of_a_condition(node.slice.value, node.value)
        ):
            found.append((node.lineno, f'["{node.slice.value}"]'))
    return sorted(found)


def _product_modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if not relative.startswith(EXEMPT):
            modules[relative] = path
    return modules


def _raw_read_counts() -> dict[str, int]:
    counts: dict[str, int] = {}
    for relative, path in _product_modules().items():
        reads = raw_reads(path.read_text(encoding="utf-8"))
        if reads:
            counts[relative] = len(reads)
    return counts


def test_raw_object_reads_only_in_the_typed_objects_and_the_simulator() -> None:
    counts = _raw_read_counts()
    unlisted = {path: n for path, n in counts.items() if path not in NOT_YET_CONVERTED}
    assert unlisted == {}, "read metadata/spec/status through kubescale.objects.views"
    stale = {
        path: (budget, counts.get(path, 0))
        for path, budget in NOT_YET_CONVERTED.items()
        if counts.get(path, 0) != budget
    }
    assert stale == {}, "NOT_YET_CONVERTED is out of date: (listed, found)"


def test_the_checker_finds_a_planted_raw_read() -> None:
    planted = (
        "def name(pod):\n"
        '    return (pod.get("metadata") or {}).get("name")\n'
        "def node(pod):\n"
        '    return pod["spec"]["nodeName"]\n'
        "def phase(pod):\n"
        '    return pod.get("status", {}).get("phase")\n'
        "def ready(condition, pod):\n"
        '    return condition.get("status") == "True" and pod["status"]\n'
    )
    assert raw_reads(planted) == [
        (2, 'get("metadata")'),
        (4, '["spec"]'),
        (6, 'get("status")'),
        (8, '["status"]'),
    ]


def test_the_checker_accepts_reads_through_the_views_and_writes() -> None:
    converted = (
        "def name(pod):\n"
        "    return Meta(pod).name\n"
        "def node(pod):\n"
        '    return spec_of(pod).get("nodeName")\n'
        "def patch(pod):\n"
        '    pod["status"] = {"phase": "Running"}\n'
        '    return {"metadata": {"name": "x"}}\n'
        "def ready(condition):\n"
        '    return condition.get("status") == "True"\n'
    )
    assert raw_reads(converted) == []


# --- no untyped alias for an API object ------------------------------------------------------

UNTYPED_ALIAS_VALUES = frozenset({"Mapping[str,Any]", "dict[str,Any]"})
NOT_API_OBJECTS = frozenset({("controllers/autoscaler/clusterstate/status_configmap.py", "Status")})
"""Module-level ``Mapping[str, Any]`` / ``dict[str, Any]`` aliases that do not stand for an API
object (the cluster autoscaler's own status document). An API object is typed by its
:mod:`kubescale.objects` TypedDict (``Pod``, ``Node``, …), which ``mypy --strict`` checks field
names against; an alias for ``Mapping[str, Any]`` checks nothing."""


def untyped_aliases(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every module-level ``Name = Mapping[str, Any]`` (or ``dict[str,
    Any]``, ``Name: TypeAlias = typing.Mapping[str, Any]``) in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        text = ast.unparse(value).replace(" ", "").rsplit(".", 1)[-1]
        if isinstance(target, ast.Name) and text in UNTYPED_ALIAS_VALUES:
            found.append((node.lineno, target.id))
    return found


def test_no_untyped_alias_for_api_objects() -> None:
    """Issue 28 item 3: 41 such aliases at the start of batch 3's fourth session, 0 now."""
    found = {
        (relative, name)
        for relative, path in _product_modules().items()
        for _line, name in untyped_aliases(path.read_text(encoding="utf-8"))
    }
    assert found - NOT_API_OBJECTS == set(), "type API objects with kubescale.objects' TypedDicts"
    assert found >= NOT_API_OBJECTS, "a stale NOT_API_OBJECTS entry: remove it"


def test_the_alias_checker_finds_planted_aliases() -> None:
    planted = (
        "from kubescale.objects.pod import Pod\n"
        "import typing\n"
        "Node = Mapping[str, Any]\n"
        "Obj: TypeAlias = dict[str, Any]\n"
        "Spec: TypeAlias = typing.Mapping[str, Any]\n"
        "Pods = list[Pod]\n"
        "def f(pod: Mapping[str, Any]) -> None:\n"
        "    Local = Mapping[str, Any]\n"
    )
    assert untyped_aliases(planted) == [(3, "Node"), (4, "Obj"), (5, "Spec")]


HPA_TYPED: list[tuple[str, str, str, object]] = [
    # replica calculation: the pods the selector returned
    ("controllers.hpa.replica_calculator", "group_pods", "pods", Sequence[Pod]),
    ("controllers.hpa.replica_calculator", "calculate_requests", "pods", Sequence[Pod]),
    ("controllers.hpa.replica_calculator", "resource_replicas", "pods", Sequence[Pod]),
    ("controllers.hpa.replica_calculator", "plain_metric_replicas", "pods", Sequence[Pod]),
    ("controllers.hpa.replica_calculator", "is_pod_ready", "pod", Pod),
    ("controllers.hpa.metric_proposals", "ReplicaInputs", "pods", Sequence[Pod]),
    # pod selection
    ("controllers.hpa.pod_selection", "SelectionPass.select", "return", list[Pod]),
    ("controllers.hpa.pod_selection", "owned_pods", "pods", Sequence[Pod]),
    ("controllers.hpa.pod_selection", "owned_pods", "return", list[Pod]),
    ("controllers.hpa.pod_selection", "SelectorOutcome", "pods", list[Pod] | None),
    # the HPA read, its spec and the decision
    ("controllers.hpa.hpa_spec", "parse_hpa", "hpa", HorizontalPodAutoscaler),
    ("controllers.hpa.hpa_loop", "HpaLoop.reconcile", "shared", HorizontalPodAutoscaler),
    ("controllers.hpa.hpa_loop", "handles", "hpa", HorizontalPodAutoscaler),
    ("controllers.hpa.hpa_decision", "HpaSnapshot", "hpa", HorizontalPodAutoscaler),
    ("controllers.hpa.hpa_decision", "zero_settings_or_none", "hpa", HorizontalPodAutoscaler),
    ("controllers.hpa.predictive", "predictive_settings", "hpa", HorizontalPodAutoscaler),
    ("controllers.hpa.metrics_sources", "promql_queries", "hpa", HorizontalPodAutoscaler),
    # status: conditions, metric statuses, the status written
    ("controllers.hpa.hpa_status", "set_condition", "conditions", Sequence[Condition]),
    ("controllers.hpa.hpa_status", "set_condition", "return", list[Condition]),
    (
        "controllers.hpa.hpa_status",
        "go_selector_text",
        "selector",
        LabelSelectorObject | None,
    ),
    ("controllers.hpa.metric_proposals", "MetricOutcome", "status", HpaMetricStatus),
    ("controllers.hpa.metric_proposals", "MetricsResult", "statuses", list[HpaMetricStatus]),
    ("controllers.hpa.replica_decision", "ReplicaDecision", "statuses", list[HpaMetricStatus]),
    ("controllers.hpa.predictive", "demand_of", "status", HpaMetricStatus),
    (
        "controllers.hpa.hpa_decision",
        "HpaDecision._status",
        "return",
        HorizontalPodAutoscalerStatus,
    ),
    # what the HPA reads of its target and of the metrics APIs
    ("controllers.hpa.scale_targets", "scale_view", "return", Scale),
    ("controllers.hpa.metrics_sources", "MetricsApiClient._pod_usages", "items", list[PodMetrics]),
    ("rendering.kube_columns", "hpa_targets", "hpa", HorizontalPodAutoscaler),
]
"""The HPA's entry points (replica calculation, pod selection, the spec, status and decision)
take and return the TypedDicts of :mod:`kubescale.objects`, so ``mypy --strict`` checks the
field names read from them (``Mapping[str, Any]`` checks none)."""


@pytest.mark.parametrize(("module", "name", "parameter", "expected"), HPA_TYPED)
def test_the_hpa_and_its_inputs_are_typed(
    module: str, name: str, parameter: str, expected: object
) -> None:
    assert _annotation(module, name, parameter) == expected, f"{module}.{name}: {parameter}"


# --- what is left untyped, folder by folder (issue 28 item 3) --------------------------------

ANY_BUDGET: dict[str, int] = {
    "webhook/": 4,
    "controllers/vpa/checkpoint/": 0,
    "controllers/hpa/": 0,
}
"""Uses of ``typing.Any`` (annotations, casts, ``Mapping[str, Any]`` …; not the import) in the
modules below a folder: at most this many. The webhook keeps ``Any`` only for untrusted JSON
(before it is decoded) and for JSON patches; the checkpoint store uses the checkpoint
TypedDict; the HPA reads untrusted JSON (its spec, the metrics APIs' answers) as ``object``
and types it once checked. The budgets may only shrink (a stale one fails: lower it)."""


def any_uses(source: str) -> int:
    """How many times ``Any`` (or ``typing.Any``) is used in ``source``, imports aside."""
    return sum(
        1
        for node in ast.walk(ast.parse(source))
        if (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
    )


@pytest.mark.parametrize(("folder", "budget"), sorted(ANY_BUDGET.items()))
def test_untyped_json_only_where_budgeted(folder: str, budget: int) -> None:
    found = sum(
        any_uses(path.read_text(encoding="utf-8"))
        for relative, path in _product_modules().items()
        if relative.startswith(folder)
    )
    assert found <= budget, f"{folder}: {found} uses of Any (budget {budget}); use the TypedDicts"
    assert found == budget, f"{folder}: {found} uses of Any, budget {budget} is stale: lower it"


def test_the_any_counter_counts_uses_not_imports() -> None:
    planted = (
        "from typing import Any\n"
        "import typing\n"
        "def f(x: Mapping[str, Any], y: typing.Any) -> dict[str, Any]:\n"
        "    return cast(Any, x)\n"
    )
    assert any_uses(planted) == 4
    assert any_uses("from typing import Any\n") == 0


# --- one parser each -----------------------------------------------------------------------


TIME_PARSER = "base/times.py"
TIME_PARSER_EXCEPTIONS = frozenset({"extender/extender_protocol.py"})
DURATION_PARSER = "base/go_time.py"


def local_time_parsers(source: str) -> list[int]:
    """Lines calling ``datetime.fromisoformat`` / ``strptime`` (a local RFC 3339 parser)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("fromisoformat", "strptime")
    ]


def local_duration_code(source: str) -> list[int]:
    """Lines defining a Go duration parser or formatter (``parse_duration``,
    ``_go_duration``, ``go_duration``) or a table of Go duration units."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.FunctionDef)
            and node.name.strip("_")
            in (
                "parse_duration",
                "go_duration",
                "parse_go_duration",
            )
        ) or (
            isinstance(node, ast.Dict)
            and {"ns", "ms", "h"} <= {k.value for k in node.keys if isinstance(k, ast.Constant)}
        ):
            lines.append(node.lineno)
    return lines


def test_one_rfc3339_parser_and_one_go_duration_parser() -> None:
    times = Counter[str]()
    durations = Counter[str]()
    for relative, path in _product_modules().items():
        source = path.read_text(encoding="utf-8")
        if relative != TIME_PARSER and relative not in TIME_PARSER_EXCEPTIONS:
            times[relative] = len(local_time_parsers(source))
        if relative != DURATION_PARSER:
            durations[relative] = len(local_duration_code(source))
    assert +times == Counter(), "parse RFC 3339 with kubescale.base.times.parse_time"
    assert +durations == Counter(), "parse Go durations with kubescale.base.go_time"


def test_the_parser_checks_find_planted_copies() -> None:
    planted = (
        "import re\n"
        "from datetime import datetime\n"
        "def _time(value):\n"
        '    return datetime.fromisoformat(value.replace("Z", "+00:00"))\n'
        "def _go_duration(delta):\n"
        '    return f"{delta}s"\n'
        '_UNITS = {"ns": 1e-9, "ms": 1e-3, "s": 1.0, "h": 3600.0}\n'
    )
    assert local_time_parsers(planted) == [4]
    assert local_duration_code(planted) == [5, 7]


# --- the kinds ---------------------------------------------------------------------------------

KINDS = [
    ("pod", "Pod"),
    ("node", "Node"),
    ("namespace", "Namespace"),
    ("vpa", "VerticalPodAutoscaler"),
    ("vpa_checkpoint", "VerticalPodAutoscalerCheckpoint"),
    ("hpa", "HorizontalPodAutoscaler"),
    ("scale", "Scale"),
    ("metrics_api", "PodMetrics"),
    ("limit_range", "LimitRange"),
    ("pdb", "PodDisruptionBudget"),
    ("persistent_volume_claim", "PersistentVolumeClaim"),
    ("priority_class", "PriorityClass"),
    ("deployment", "Deployment"),
    ("replica_set", "ReplicaSet"),
    ("stateful_set", "StatefulSet"),
    ("daemon_set", "DaemonSet"),
    ("job", "Job"),
    ("replication_controller", "ReplicationController"),
    ("machine_deployment", "MachineDeployment"),
    ("machine_set", "MachineSet"),
    ("machine", "Machine"),
    ("config_map", "ConfigMap"),
    ("priority_class", "PriorityClass"),
    ("admission_review", "AdmissionReview"),
    ("mutating_webhook_configuration", "MutatingWebhookConfiguration"),
    ("lease", "Lease"),
    ("event", "Event"),
    ("extender", "ExtenderArgs"),
    ("extender", "ExtenderFilterResult"),
]


@pytest.mark.parametrize(("module", "kind"), KINDS)
def test_each_kind_is_an_all_optional_typeddict(module: str, kind: str) -> None:
    cls = getattr(importlib.import_module(f"kubescale.objects.{module}"), kind)
    assert is_typeddict(cls)
    assert cls.__required_keys__ == frozenset()
    if kind not in ("AdmissionReview", "ExtenderArgs", "ExtenderFilterResult"):
        # an API object: metadata is an ObjectMeta (the views read it)
        assert get_type_hints(cls)["metadata"] is ObjectMeta


# --- the ports and writes other systems feed pods to take a typed Pod (issue 28 item 3) -------

POD_TYPED: list[tuple[str, str, str]] = [
    # (module below kubescale, callable ("Class.method" or "function"), parameter or "return")
    ("coordination.ports", "DisruptionGate.already_going", "pod"),
    ("coordination.ports", "RequestsAhead.requests_for", "pod"),
    ("coordination.ports", "RequestsAhead.requests_for", "return"),
    ("coordination.disruption_ledger", "DisruptionLedger.pending", "pod"),
    ("coordination.disruption_ledger", "Disruption.shown_by", "pod"),
    ("coordination.disruption_ledger", "evict_pod", "pod"),
    ("coordination.disruption_ledger", "resize_pod", "pod"),
    ("coordination.disruption_ledger", "resize_targets", "pod"),
    ("coordination.disruption_ledger", "resize_applied", "pod"),
    ("coordination.requests_ahead", "pod_with_admitted_resources", "pod"),
    ("coordination.requests_ahead", "pod_with_admitted_resources", "return"),
    ("plans.intents", "Evict", "pod"),
    ("plans.intents", "Resize", "pod"),
    ("plans.intents", "pod_ref", "pod"),
    ("controllers.vpa.requests_ahead", "WebhookRequestsAhead.requests_for", "pod"),
    ("controllers.vpa.updater.updater_actions", "PodActions.evict", "pod"),
    ("controllers.vpa.updater.updater_actions", "PodActions.resize", "pod"),
    ("controllers.vpa.updater.update_priority", "PodPriority", "pod"),
]
"""Where a pod crosses from one system to the coordination layer or the executor: typed
:class:`~kubescale.objects.pod.Pod`, so that ``mypy --strict`` checks its field names there
(``Mapping[str, Any]`` checks none)."""


def _annotation(module: str, name: str, parameter: str) -> object:
    target: object = importlib.import_module(f"kubescale.{module}")
    for part in name.split("."):
        target = getattr(target, part)
    return get_type_hints(target).get(parameter)


@pytest.mark.parametrize(("module", "name", "parameter"), POD_TYPED)
def test_pods_crossing_systems_are_typed(module: str, name: str, parameter: str) -> None:
    assert _annotation(module, name, parameter) is Pod, f"{module}.{name}: {parameter}"


def test_the_pod_annotation_check_tells_pod_from_a_mapping() -> None:
    # DisruptionLedger.recent takes no pod; ObjectRef's fields are not Pods.
    assert _annotation("coordination.disruption_ledger", "DisruptionLedger.recent", "pod") is None
    assert _annotation("plans.intents", "ObjectRef", "name") is not Pod
    assert _annotation("coordination.descheduler_budget", "desired_replicas", "controller") != Pod


VPA_TYPED: list[tuple[str, str, str]] = [
    ("controllers.vpa.updater.updater_decision", "VpaSnapshot", "vpa"),
    ("controllers.vpa.updater.updater_decision", "vpa_key", "vpa"),
    ("controllers.vpa.updater.eviction_restriction", "EvictionRestriction.build", "vpa"),
    ("controllers.vpa.updater.update_priority", "prioritized_pods", "vpa"),
    ("controllers.vpa.updater.updater_actions", "PodActions.evict", "vpa"),
]
"""The VPA updater's VPAs: typed :class:`~kubescale.objects.vpa.VerticalPodAutoscaler`."""


@pytest.mark.parametrize(("module", "name", "parameter"), VPA_TYPED)
def test_the_updaters_vpas_are_typed(module: str, name: str, parameter: str) -> None:
    assert _annotation(module, name, parameter) is VerticalPodAutoscaler, f"{module}.{name}"


# -- the VPA's admission path takes typed objects (issue 28 item 3) ----------------------------

ADMISSION_PATH = ("controllers/vpa/api/", "controllers/vpa/admission/")
RAW_JSON_ON_THE_ADMISSION_PATH: dict[str, int] = {
    # (JSON patch operations are kubescale.objects.admission_review.JsonPatchOperation now)
    # a controller of any kind, as the controller lookups (kube/) hand it out
    "controllers/vpa/api/vpa_targets.py": 1,
}
"""``Mapping[str, Any]`` / ``dict[str, Any]`` left on the admission path, file by file, where
raw JSON is the honest type; every API object there is a :mod:`kubescale.objects` TypedDict.
The counts may only shrink (a new one, or a stale count, fails). 75 ``Mapping[str, Any]`` and
61 ``dict[str, Any]`` in these two folders before issue 28's last session."""

_UNTYPED = ("Mapping[str,Any]", "dict[str,Any]")


def untyped_annotations(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every annotation (parameter, return, variable, field) and every
    module-level alias in ``source`` that spells ``Mapping[str, Any]`` or ``dict[str, Any]``."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    nodes: list[tuple[int, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            nodes.append((node.lineno, node.annotation))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            nodes.append((node.lineno, node.returns))
        elif isinstance(node, ast.AnnAssign):
            nodes.append((node.lineno, node.annotation))
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            nodes.append((statement.lineno, statement.value))
    for line, expr in nodes:
        text = ast.unparse(expr).replace(" ", "").replace("typing.", "")
        if any(untyped in text for untyped in _UNTYPED):
            found.append((line, ast.unparse(expr)))
    return sorted(found)


def test_the_admission_path_types_its_api_objects() -> None:
    counts = {
        relative: len(found)
        for relative, path in _product_modules().items()
        if relative.startswith(ADMISSION_PATH)
        and (found := untyped_annotations(path.read_text(encoding="utf-8")))
    }
    assert counts == RAW_JSON_ON_THE_ADMISSION_PATH, (
        "type the admission path's API objects with kubescale.objects' TypedDicts "
        "(or lower a stale count)"
    )


def test_the_annotation_checker_finds_planted_untyped_objects() -> None:
    planted = (
        "OwnerRead = tuple[str, dict[str, Any]]\n"
        "def admit(pod: Mapping[str, Any], *, vpa: typing.Mapping[str, Any] | None) -> Pod:\n"
        "    ranges: list[dict[str, Any]] = []\n"
        "def patches(pod: Pod) -> list[dict[str, Any]]:\n"
        "    return []\n"
        "class Conflict:\n"
        "    vpa: dict[str, Any]\n"
        "    pod: Pod\n"
        "def fine(pod: Pod, obj: Mapping[str, object]) -> VerticalPodAutoscaler: ...\n"
    )
    assert [line for line, _ in untyped_annotations(planted)] == [1, 2, 2, 3, 4, 7]


ADMISSION_TYPED: list[tuple[str, str, str, object]] = [
    # (module below kubescale, callable, parameter or "return", the annotation)
    ("controllers.vpa.api.pod_admission", "admit_pod", "pod", Pod),
    ("controllers.vpa.api.pod_admission", "admit_pod", "vpa", VerticalPodAutoscaler | None),
    ("controllers.vpa.api.pod_admission", "admit_pod", "limit_ranges", Sequence[LimitRange]),
    ("controllers.vpa.admission.cached_pod_admission", "CachedPodAdmission.decide", "pod", Pod),
    ("controllers.vpa.admission.cached_pod_admission", "HpaConflict", "vpa", VerticalPodAutoscaler),
    ("controllers.vpa.admission.admission_memo", "admit_cached", "pod", Pod),
    ("controllers.vpa.admission.admission_memo", "admit_cached", "vpa", VerticalPodAutoscaler),
    ("controllers.vpa.admission.admission_memo", "decision_pod", "return", Pod),
    (
        "controllers.vpa.admission.admission_caches",
        "AdmissionCaches.limit_ranges",
        "return",
        list[LimitRange],
    ),
    (
        "controllers.vpa.admission.admission_caches",
        "AdmissionCaches.vpas_for",
        "return",
        list[VerticalPodAutoscaler],
    ),
    ("controllers.vpa.api.vpa_matching", "choose_vpa", "pod", Pod),
    (
        "controllers.vpa.api.capping",
        "cap_recommendation",
        "recommendation",
        RecommendedPodResources | None,
    ),
    (
        "controllers.vpa.api.capping",
        "cap_recommendation",
        "resource_policy",
        PodResourcePolicy | None,
    ),
    ("controllers.vpa.api.pod_resources", "pod_resources", "vpa", VerticalPodAutoscaler),
    (
        "controllers.vpa.api.pod_resources",
        "capped_recommendation",
        "return",
        RecommendedPodResources,
    ),
    (
        "controllers.vpa.api.vpa_policy",
        "container_policy",
        "return",
        ContainerResourcePolicy | None,
    ),
    ("controllers.vpa.api.startup_boost", "boosted_container", "container", Container),
    (
        "controllers.vpa.api.limit_ranges",
        "merged_limit_range_item",
        "limit_ranges",
        Sequence[LimitRange],
    ),
]
"""``admit_pod`` and its inputs, typed with the TypedDicts of :mod:`kubescale.objects` so that
``mypy --strict`` checks the field names read from them (``Mapping[str, Any]`` checks none)."""


@pytest.mark.parametrize(("module", "name", "parameter", "expected"), ADMISSION_TYPED)
def test_admit_pod_and_its_inputs_are_typed(
    module: str, name: str, parameter: str, expected: object
) -> None:
    assert _annotation(module, name, parameter) == expected, f"{module}.{name}: {parameter}"


CHECKPOINT_TYPED: list[tuple[str, str, str]] = [
    ("controllers.vpa.checkpoint.checkpoint_store", "checkpoint_write", "checkpoint"),
    ("controllers.vpa.checkpoint.checkpoint_store", "CheckpointStore.write", "checkpoint"),
    ("controllers.vpa.checkpoint.checkpoint_store", "CheckpointPass._record", "checkpoint"),
    ("controllers.vpa.checkpoint.checkpoint_store", "_sort_key", "obj"),
    ("controllers.vpa.model.checkpoint_format", "checkpoint_object", "return"),
]
"""The recommender's checkpoints, from the model to the write: typed
:class:`~kubescale.objects.vpa_checkpoint.VerticalPodAutoscalerCheckpoint`."""


@pytest.mark.parametrize(("module", "name", "parameter"), CHECKPOINT_TYPED)
def test_the_checkpoints_are_typed(module: str, name: str, parameter: str) -> None:
    annotation = _annotation(module, name, parameter)
    assert annotation is VerticalPodAutoscalerCheckpoint, f"{module}.{name}: {parameter}"


WEBHOOK_TYPED: list[tuple[str, str, str, object]] = [
    ("webhook.vpa_spec_rules", "validate_vpa", "vpa", VerticalPodAutoscaler),
    ("webhook.vpa_spec_rules", "validate_vpa", "old_vpa", VerticalPodAutoscaler),
    ("webhook.vpa_validation", "VpaAdmission", "status", Status | None),
    ("webhook.vpa_validation", "VpaAdmission", "patches", list[JsonPatchOperation]),
    ("webhook.field_errors", "invalid_status", "return", Status),
    ("webhook.admission_reviews", "review_response", "return", AdmissionReview),
    ("webhook.admission_reviews", "review_response", "status", Status | None),
    ("webhook.admission_routes", "AdmissionAnswer.review", "return", AdmissionReview),
    ("webhook.registration", "webhook_configuration", "return", MutatingWebhookConfiguration),
    ("webhook.registration", "ca_bundle_patch", "return", list[JsonPatchOperation]),
    ("webhook.status_lease", "StatusLease._new_lease", "return", Lease),
]
"""The webhook past its boundary: the VPA rules read the typed VPA
:func:`~kubescale.webhook.vpa_decoding.decode_vpa` makes of the request, and what it writes
(responses, statuses, patches, its configuration and Lease) are the TypedDicts of
:mod:`kubescale.objects`."""


@pytest.mark.parametrize(("module", "name", "parameter", "expected"), WEBHOOK_TYPED)
def test_the_webhook_is_typed(module: str, name: str, parameter: str, expected: object) -> None:
    target: object = importlib.import_module(f"kubescale.{module}")
    for part in name.split("."):
        target = getattr(target, part)
    if isinstance(target, property):
        target = target.fget
    assert get_type_hints(target).get(parameter) == expected, f"{module}.{name}: {parameter}"


UPDATER_TYPED: list[tuple[str, str, str, object]] = [
    (
        "controllers.vpa.updater.update_priority",
        "update_priority",
        "recommendation",
        RecommendedPodResources,
    ),
    (
        "controllers.vpa.updater.update_priority",
        "pod_priority",
        "recommendation",
        RecommendedPodResources,
    ),
    (
        "controllers.vpa.updater.update_priority",
        "PodPriority",
        "recommendation",
        RecommendedPodResources,
    ),
    (
        "controllers.vpa.updater.update_priority",
        "eviction_requirements_admit",
        "recommendation",
        RecommendedPodResources,
    ),
    (
        "controllers.vpa.updater.update_priority",
        "without_resources",
        "recommendation",
        RecommendedPodResources,
    ),
    (
        "controllers.vpa.updater.update_priority",
        "without_resources",
        "return",
        RecommendedPodResources,
    ),
    ("controllers.vpa.updater.update_priority", "_update_policy", "return", PodUpdatePolicy | None),
    (
        "controllers.vpa.updater.update_priority",
        "_eviction_requirements",
        "return",
        list[EvictionRequirement] | None,
    ),
    (
        "controllers.vpa.updater.update_priority",
        "_requirement_holds",
        "requirement",
        EvictionRequirement,
    ),
    (
        "controllers.vpa.updater.eviction_restriction",
        "EvictionRestriction.build",
        "controllers",
        Mapping[ControllerKey, ReplicaCountedController],
    ),
    (
        "controllers.vpa.updater.eviction_restriction",
        "configured_replicas",
        "controller",
        ReplicaCountedController | None,
    ),
    ("controllers.vpa.updater.eviction_restriction", "_condition", "return", Condition | None),
    (
        "controllers.vpa.updater.updater_decision",
        "VpaSnapshot",
        "controllers",
        Mapping[ControllerKey, ReplicaCountedController],
    ),
    ("controllers.vpa.updater.updater_loop", "lease_is_fresh", "lease", Lease | None),
]
"""The updater's priority and eviction entry points: the capped recommendation, the VPA's
update policy, the pods' controllers and the admission status Lease are the TypedDicts of
:mod:`kubescale.objects` (``Mapping[str, Any]`` lets ``mypy --strict`` check no field name)."""


@pytest.mark.parametrize(("module", "name", "parameter", "expected"), UPDATER_TYPED)
def test_the_updater_priority_and_eviction_are_typed(
    module: str, name: str, parameter: str, expected: object
) -> None:
    assert _annotation(module, name, parameter) == expected, f"{module}.{name}: {parameter}"


RECOMMENDER_TYPED: list[tuple[str, str, str, object]] = [
    ("controllers.vpa.recommender.vpa_status", "desired_status", "vpa", VerticalPodAutoscaler),
    (
        "controllers.vpa.recommender.vpa_status",
        "desired_status",
        "return",
        VerticalPodAutoscalerStatus,
    ),
    ("controllers.vpa.recommender.vpa_status", "status_patch", "vpa", VerticalPodAutoscaler),
    (
        "controllers.vpa.recommender.vpa_status",
        "status_patch",
        "status",
        VerticalPodAutoscalerStatus,
    ),
    (
        "controllers.vpa.recommender.vpa_status",
        "status_changed",
        "old",
        VerticalPodAutoscalerStatus | None,
    ),
    (
        "controllers.vpa.recommender.vpa_status",
        "status_changed",
        "new",
        VerticalPodAutoscalerStatus,
    ),
    ("controllers.vpa.recommender.vpa_status", "condition_active", "vpa", VerticalPodAutoscaler),
    ("controllers.vpa.recommender.vpa_status", "had_recommendation", "vpa", VerticalPodAutoscaler),
    ("controllers.vpa.recommender.vpa_status", "_conditions", "return", list[Condition]),
    ("controllers.vpa.recommender.cluster_feeder", "ObservedVpa", "vpa", VerticalPodAutoscaler),
    (
        "controllers.vpa.recommender.cluster_feeder",
        "pod_metrics_samples",
        "items",
        Iterable[PodMetrics],
    ),
    (
        "controllers.vpa.recommender.cluster_feeder",
        "ClusterFeeder.feed_real_time_metrics",
        "items",
        Sequence[PodMetrics],
    ),
    (
        "controllers.vpa.recommender.cluster_feeder",
        "ClusterFeeder.controller_exists",
        "target_ref",
        CrossVersionObjectReference | None,
    ),
    (
        "controllers.vpa.model.cluster_state",
        "ClusterState.add_or_update_vpa",
        "vpa",
        VerticalPodAutoscaler,
    ),
    (
        "controllers.vpa.model.cluster_state",
        "ClusterState.load_checkpoint",
        "checkpoint",
        VerticalPodAutoscalerCheckpoint,
    ),
    (
        "controllers.vpa.model.cluster_state",
        "VpaRecommendation",
        "container_recommendations",
        list[RecommendedContainerResources],
    ),
    (
        "controllers.vpa.model.aggregate_state",
        "AggregateContainerState.load_from_checkpoint",
        "status",
        VerticalPodAutoscalerCheckpointStatus,
    ),
    (
        "controllers.vpa.model.aggregate_state",
        "controlled_resources",
        "policy",
        ContainerResourcePolicy | None,
    ),
    (
        "controllers.vpa.model.histogram",
        "DecayingHistogram.load_from_checkpoint",
        "checkpoint",
        HistogramCheckpoint,
    ),
    (
        "controllers.vpa.model.checkpoint_format",
        "parse_histogram",
        "checkpoint",
        HistogramCheckpoint,
    ),
]
"""The recommender's status writer (the status it works out, compares and patches), its
feeder and its model: the TypedDicts of :mod:`kubescale.objects`."""


@pytest.mark.parametrize(("module", "name", "parameter", "expected"), RECOMMENDER_TYPED)
def test_the_recommender_status_writer_and_model_are_typed(
    module: str, name: str, parameter: str, expected: object
) -> None:
    assert _annotation(module, name, parameter) == expected, f"{module}.{name}: {parameter}"


def test_the_decoder_hands_the_rules_a_typed_vpa() -> None:
    assert get_type_hints(decode_vpa)["return"] == VerticalPodAutoscaler | VpaDecodeError
    assert get_type_hints(admit_vpa)["vpa"] is object  # untrusted JSON until decoded


# -- a misspelt field in .get is a mypy error ------------------------------------------------

_PLANTED = """\
from kubescale.objects.pod import Pod


def read(pod: Pod) -> object:
    return pod.get("metadata"), pod.get("{key}")
"""


def _mypy_on(source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """mypy (the project's configuration, with its plugin) on one module importing the typed
    objects; its report."""
    root = Path(kubescale.__file__).resolve().parents[1]
    planted = tmp_path / "planted.py"
    planted.write_text(source, encoding="utf-8")
    monkeypatch.chdir(root)
    # mypy's main raises the interpreter's recursion limit (to 2**14) for good: put it back,
    # or a later test that relies on the default limit (a policy file nested 3,000 deep
    # refused as "nested too deeply") sees no RecursionError
    limit = sys.getrecursionlimit()
    try:
        report, errors, _status = api.run(
            [
                "--config-file",
                str(root / "pyproject.toml"),
                "--cache-dir",
                str(tmp_path / "cache"),
                str(planted),
            ]
        )
    finally:
        sys.setrecursionlimit(limit)
    return report + errors


def test_mypy_reports_a_misspelt_key_in_get_on_a_typed_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``tools/mypy_typeddict_keys.py`` (enabled in pyproject.toml): mypy alone lets
    ``pod.get("metdata")`` through; with the plugin it is an error naming the key, and a
    known key is not."""
    misspelt = _mypy_on(_PLANTED.format(key="metdata"), tmp_path, monkeypatch)
    assert 'TypedDict "Pod" has no key "metdata" (in .get)' in misspelt
    assert "metadata" not in misspelt.replace('"metdata"', "")
    known = _mypy_on(_PLANTED.format(key="spec"), tmp_path, monkeypatch)
    assert "Success: no issues found in 1 source file" in known
