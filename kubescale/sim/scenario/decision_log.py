"""What kubescale did in a run, in words a newcomer reads: from the JSON report only.

Used by the summary on stdout (:mod:`.summary_table`) and the HTML report (:mod:`.html_report`):

* :func:`loop_notes` — every loop that skipped iterations (a silent no-op made visible), with
  the count and the reason, and every loop whose iterations failed;
* :func:`recommendation_changes` — per VPA container its band (lower / target / upper, CPU and
  memory) when first recommended and at the end of the run;
* :func:`decisions` — each eviction and resize with its reason and each scale event, in time
  order. A VPA eviction's or resize's reason is the one the updater's decision gave the intent
  it executed (below the lower bound, above the upper bound, a quick OOM, a difference of
  ``--pod-update-threshold`` after the lifetime threshold), read from the run's plans journal
  (the report's ``plans``, :mod:`kubescale.plans.journal`), not worked out again;
* :func:`hpa_vpa_conflicts` — each workload an HPA (on CPU or memory) and a VPA both target,
  and which resources the webhook set on its pods;
* :func:`human_detail` — an event's detail with memory quantities in binary units
  (``memory=380258472`` → ``memory=362.6Mi``).

Memory reads in KiB/MiB/GiB everywhere, CPU in millicores below a core
(:mod:`kubescale.rendering.quantity_text`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubescale.controllers.vpa.updater.updater_actions import ACTOR as UPDATER
from kubescale.kube.resources import PODS
from kubescale.rendering.quantity_text import human_bytes, human_cores
from kubescale.rendering.text_table import format_duration

from .autoscaler_records import quantity_or_none
from .timeline import POD_STARTED, WEBHOOK_RESIZE

__all__ = [
    "CURRENCY",
    "Decision",
    "comparison_rows",
    "decisions",
    "hpa_vpa_conflicts",
    "human_detail",
    "loop_notes",
    "recommendation_changes",
]

DECISION_KINDS: Final = {
    "hpa-rescale": "HPA rescale",
    "vpa-eviction": "VPA eviction",
    "vpa-in-place-resize": "VPA in-place resize",
    "ca-scale-up": "CA scale-up",
    "ca-scale-down": "CA scale-down",
    "ca-eviction": "CA drain eviction",
    "ca-node-deleted": "CA node deleted",
    "ca-consolidation": "CA consolidation",
    "descheduler-eviction": "descheduler eviction",
    WEBHOOK_RESIZE: "webhook resize",
}
"""Event kinds that are a decision of a kubescale loop, and how the summary names them."""

_MEMORY_FIELD = re.compile(r"memory=([0-9.eE+-]+[a-zA-Z]*)")


def human_detail(detail: str) -> str:
    """``detail`` with each ``memory=<quantity>`` in binary units."""

    def replace(match: re.Match[str]) -> str:
        value = quantity_or_none(match.group(1))
        return match.group(0) if value is None else f"memory={human_bytes(value)}"

    return _MEMORY_FIELD.sub(replace, detail)


def _fixed(value: float, decimals: int) -> str:
    return f"{value:,.{decimals}f}"


def _count_or_dash(value: int | None) -> str:
    return "–" if value is None else str(value)


CURRENCY: Final = "$"
"""Of the cost: node prices (``price=`` of a node group, a scenario's ``nodePrices``) are per
hour in dollars, as the cloud providers' price lists."""

_COMPARED: Final[tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...]] = (
    ("node-hours", lambda v: _fixed(v["node_hours"], 2)),
    (f"cost ({CURRENCY})", lambda v: _fixed(v["cost"], 2)),
    ("nodes (max)", lambda v: str(v["nodes_max"])),
    ("OOM kills", lambda v: str(v["oom_kills"])),
    ("CPU throttled (core-s)", lambda v: _fixed(v["throttled_core_seconds"], 0)),
    ("CPU throttled (pod-time)", lambda v: format_duration(v["throttled_seconds"])),
    ("CPU slack (core-h)", lambda v: _fixed(v["slack_core_hours"], 1)),
    ("memory slack (GiB-h)", lambda v: _fixed(v["slack_gib_hours"], 1)),
    ("pending pod-time", lambda v: format_duration(v["pending_pod_seconds"])),
    ("evictions", lambda v: str(v["evictions"])),
    # where the coordination shows (:func:`.comparison.coordination_figures`)
    ("nodes added by scale-ups", lambda v: str(v["nodes_added"])),
    ("VPA: running pods restarted", lambda v: str(v["vpa_restarts"])),
    ("VPA: pods replaced before running", lambda v: str(v["vpa_pending_replaced"])),
    ("HPA rescales", lambda v: str(v["hpa_rescales"])),
    ("HPA replicas (max)", lambda v: _count_or_dash(v["hpa_replicas_max"])),
)


def comparison_rows(variants: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """The comparison's rows (:mod:`.comparison`): a figure's name and its text per variant."""
    return [(label, [cell(v) for v in variants]) for label, cell in _COMPARED]


def loop_notes(report: Mapping[str, Any]) -> list[str]:
    """One line per loop that skipped or failed iterations."""
    notes: list[str] = []
    for loop in report.get("loops", []):
        if loop["skipped"]:
            reasons = "; ".join(f"{r['reason']} ({r['count']}×)" for r in loop["skip_reasons"])
            notes.append(
                f"{loop['name']} skipped {loop['skipped']} of {loop['iterations']} iterations: "
                f"{reasons}"
            )
        if loop["failures"]:
            notes.append(f"{loop['name']} failed {loop['failures']} of {loop['iterations']}")
    return notes


def _band(container: Mapping[str, Any], position: int) -> str:
    cpu, memory = container["cpu"], container["memory"]
    return (
        f"cpu {human_cores(cpu['target'][position])} "
        f"[{human_cores(cpu['lower'][position])}–{human_cores(cpu['upper'][position])}], "
        f"memory {human_bytes(memory['target'][position])} "
        f"[{human_bytes(memory['lower'][position])}–{human_bytes(memory['upper'][position])}]"
    )


def recommendation_changes(report: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """Per VPA container ``(vpa/container, first band, last band)``; a band is
    ``cpu TARGET [LOWER–UPPER], memory TARGET [LOWER–UPPER]``."""
    changes: list[tuple[str, str, str]] = []
    for vpa in report.get("vpas", []):
        for container in vpa["containers"]:
            if not container["t"]:
                continue
            changes.append(
                (
                    f"{vpa['namespace']}/{vpa['name']}/{container['name']}",
                    _band(container, 0),
                    _band(container, -1),
                )
            )
    return changes


@dataclass(frozen=True)
class Decision:
    time: float
    what: str
    subject: str
    why: str


def _workload_vpas(report: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """``(namespace, workload name)`` → the VPA targeting it."""
    return {
        (vpa["namespace"], vpa["target"].partition("/")[2]): vpa for vpa in report.get("vpas", [])
    }


_NOT_STARTED: Final = (
    "had not started (Pending with the requests it was created with): re-created with the "
    "VPA's requests, no disruption"
)

_JOURNALED: Final = {"vpa-eviction": "Evict", "vpa-in-place-resize": "Resize"}
"""The decision events whose reason the run's plan journal holds (the updater's intents)."""
_EXECUTED: Final = frozenset({"done", "dry-run"})
"""The outcomes of an intent the timeline shows as done (an eviction, a resize)."""


class _Journal:
    """The report's ``plans`` (:class:`kubescale.plans.journal.PlanJournal`): the updater's
    detailed evictions and resizes by kind and pod, in the order they were executed."""

    def __init__(self, plans: Mapping[str, Any] | None) -> None:
        self.plans = plans
        self.entries: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for entry in (plans or {}).get("entries", []):
            if entry["actor"] == UPDATER and entry["intent"] in _JOURNALED.values():
                self.entries.setdefault((entry["intent"], entry["object"]), []).append(entry)

    def reason(self, kind: str, subject: str, time: float) -> str:
        """Why the updater made the intent behind the event ``kind`` on pod ``subject`` at
        ``time`` (the last one executed on it by then: done, or a dry run's): the reason its
        decision recorded, or why there is none."""
        intent = _JOURNALED[kind]
        made = [
            entry
            for entry in self.entries.get((intent, f"{PODS.plural} {subject}"), [])
            if entry["time"] <= time and entry["outcome"] in _EXECUTED
        ]
        if made and made[-1]["reason"]:
            return str(made[-1]["reason"])
        if self.plans is None:
            return "reason not recorded: the report has no plans journal"
        if made or not self.plans["left_out"]:
            return "reason not recorded by the decision"
        return (
            f"reason not recorded: the plans journal keeps the first "
            f"{self.plans['detailed_per_kind']} of each kind in detail"
        )


def decisions(report: Mapping[str, Any]) -> list[Decision]:
    """Every decision event of the run (:data:`DECISION_KINDS`), in time order, with its why:
    a VPA eviction's or in-place resize's is the reason the updater's decision gave its intent,
    read from the run's plans journal (the report's ``plans``)."""
    found: list[Decision] = []
    started: set[str] = set()
    journal = _Journal(report.get("plans"))
    for event in report["events"]:
        kind = event["kind"]
        if kind == POD_STARTED:
            started.add(event["subject"])
        if kind not in DECISION_KINDS:
            continue
        why = human_detail(str(event["detail"]))
        if kind in _JOURNALED:
            why = journal.reason(kind, str(event["subject"]), float(event["time"]))
            if kind == "vpa-eviction" and event["subject"] not in started:
                why = f"{_NOT_STARTED}; {why}"
        found.append(Decision(float(event["time"]), DECISION_KINDS[kind], event["subject"], why))
    return found


_SET_RESOURCE: Final = re.compile(r"\b(cpu|memory) (?:request|limit)\b")
_RESOURCES: Final = ("cpu", "memory")


def _hpa_resource(metric: str) -> str | None:
    """The resource an HPA's (first) metric scales on, from its label (``cpu utilization (%)``,
    ``memory (averageValue)``): a Resource or ContainerResource metric; ``None`` otherwise."""
    name = metric.partition(" ")[0]
    return name if name in _RESOURCES else None


def _webhook_set(report: Mapping[str, Any], namespace: str, workload: str) -> tuple[int, set[str]]:
    """How many of ``workload``'s pods the webhook resized, and which resources it set (from
    its ``vpaUpdates`` annotation: ``container 0: cpu request, memory request``)."""
    pods = {
        c["pod"]
        for c in report["containers"]
        if (c["namespace"], c["workload"]) == (namespace, workload)
    }
    count, resources = 0, set()
    for event in report["events"]:
        namespace_of, _, pod = str(event["subject"]).partition("/")
        if event["kind"] == WEBHOOK_RESIZE and namespace_of == namespace and pod in pods:
            count += 1
            resources.update(_SET_RESOURCE.findall(str(event["detail"])))
    return count, resources


def hpa_vpa_conflicts(report: Mapping[str, Any]) -> list[str]:
    """One line per workload that an HPA scaling on CPU or memory and a VPA both target, and
    what the webhook did about it. Upstream: "Vertical Pod Autoscaler should not be used with
    the Horizontal Pod Autoscaler (HPA) on the same resource metric (CPU or memory) at this
    moment" (upstream vertical-pod-autoscaler/docs/known-limitations.md); kubescale's webhook,
    with the coordination set to one brain, leaves that resource to the HPA (an
    ``HPAConflict`` event on the VPA) and sets the others. Read from the report: the HPA's
    metric, the VPA's target, the webhook's ``vpaUpdates`` annotations on the workload's
    pods."""
    vpas = _workload_vpas(report)
    lines: list[str] = []
    for hpa in report.get("hpas", []):
        namespace, workload = hpa["namespace"], str(hpa["target"]).partition("/")[2]
        vpa = vpas.get((namespace, workload))
        resource = _hpa_resource(str(hpa.get("metric") or ""))
        if vpa is None or resource is None:
            continue
        line = (
            f"{namespace}/{workload}: HPA {hpa['name']} scales on {resource} and VPA "
            f"{vpa['name']} ({vpa['mode']}) recommends {resource} too"
        )
        resized, resources = _webhook_set(report, namespace, workload)
        if resource in resources:
            line += (
                f"; the webhook set {resource} on {resized} pods: each VPA change moves the "
                f"HPA's {resource} utilization"
            )
        elif resources:
            kept = ", ".join(sorted(resources))
            line += f"; the webhook left {resource} to the HPA and set {kept} only ({resized} pods)"
        lines.append(line)
    return lines
