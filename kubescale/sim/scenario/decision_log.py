"""What kubescale did in a run, in words a newcomer reads: from the JSON report only.

Used by the summary on stdout (:mod:`.summary_table`) and the HTML report (:mod:`.html_report`):

* :func:`loop_notes` — every loop that skipped iterations (a silent no-op made visible), with
  the count and the reason, and every loop whose iterations failed;
* :func:`recommendation_changes` — per VPA container its band (lower / target / upper, CPU and
  memory) when first recommended and at the end of the run;
* :func:`decisions` — each eviction and resize with its reason and each scale event, in time
  order. A VPA eviction's reason is worked out from the report: the evicted pod's requests
  against the VPA's band at that moment (below the lower bound, above the upper bound, or in
  range — then upstream's other reasons apply: an OOM kill within 10 minutes of the start, or a
  0.1 difference after 12 hours);
* :func:`hpa_vpa_conflicts` — each workload an HPA (on CPU or memory) and a VPA both target,
  and which resources the webhook set on its pods;
* :func:`human_detail` — an event's detail with memory quantities in binary units
  (``memory=380258472`` → ``memory=362.6Mi``).

Memory reads in KiB/MiB/GiB everywhere, CPU in millicores below a core
(:mod:`kubescale.rendering.quantity_text`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubescale.rendering.quantity_text import apart, human_bytes, human_cores
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


def _value_at(t: float, times: Sequence[float], values: Sequence[Any]) -> Any:
    position = bisect_right(times, t) - 1
    return values[position] if position >= 0 else None


def _vpa_eviction_reason(report: Mapping[str, Any], event: Mapping[str, Any]) -> str:
    namespace, _, pod = str(event["subject"]).partition("/")
    time = float(event["time"])
    vpas = _workload_vpas(report)
    reasons: list[str] = []
    for container in report["containers"]:
        if container["namespace"] != namespace or container["pod"] != pod:
            continue
        vpa = vpas.get((namespace, container["workload"]))
        band = next(
            (c for c in (vpa or {}).get("containers", []) if c["name"] == container["container"]),
            None,
        )
        if band is None:
            continue
        for resource, human in (("cpu", human_cores), ("memory", human_bytes)):
            request = _value_at(time, container["t"], container[f"{resource}_request"])
            lower = _value_at(time, band["t"], band[resource]["lower"])
            upper = _value_at(time, band["t"], band[resource]["upper"])
            target = _value_at(time, band["t"], band[resource]["target"])
            if request is None or lower is None or upper is None:
                continue
            if request < lower:
                shown, bound = apart(request, lower, human)
                reasons.append(
                    f"{container['container']} {resource} request {shown} below the "
                    f"lower bound {bound} (target {human(target, None)})"
                )
            elif request > upper:
                shown, bound = apart(request, upper, human)
                reasons.append(
                    f"{container['container']} {resource} request {shown} above the "
                    f"upper bound {bound} (target {human(target, None)})"
                )
    return "; ".join(reasons) or "in the recommended range: OOM-killed soon after start, or drift"


_NOT_STARTED: Final = (
    "had not started (Pending with the requests it was created with): re-created with the "
    "VPA's requests, no disruption"
)


def decisions(report: Mapping[str, Any]) -> list[Decision]:
    """Every decision event of the run (:data:`DECISION_KINDS`), in time order, with its why."""
    found: list[Decision] = []
    started: set[str] = set()
    for event in report["events"]:
        kind = event["kind"]
        if kind == POD_STARTED:
            started.add(event["subject"])
        if kind not in DECISION_KINDS:
            continue
        why = human_detail(str(event["detail"]))
        if kind == "vpa-eviction":
            why = (
                _vpa_eviction_reason(report, event) if event["subject"] in started else _NOT_STARTED
            )
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
