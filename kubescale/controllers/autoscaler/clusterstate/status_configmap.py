"""The ``cluster-autoscaler-status`` ConfigMap: upstream's status, in upstream's YAML.

``ClusterStateRegistry.GetStatus`` builds ``ClusterAutoscalerStatus``
(``pkg/clusterstate/api/types.go``); ``WriteStatusConfigMap`` marshals it with
``sigs.k8s.io/yaml`` into ``data.status`` and sets the annotation
``cluster-autoscaler.kubernetes.io/last-updated`` to the same ``time``. The text here is
byte-for-byte what that marshaller writes (reference §5; upstream's own expected output in
``status_test.go``):

* JSON field names, keys sorted alphabetically at every level, sequences not indented under
  their key (``- name: ...``), two-space indentation, ``{}`` for an empty object;
* ``omitempty`` as the Go struct tags say: ``time``, ``autoscalerStatus``, ``message``,
  ``nodeGroups``, every ``status``, ``beingDeleted``, ``candidates``, ``name``,
  ``errorCode``/``errorMessage`` are left out when empty; structs and counts always appear;
* ``metav1.Time`` as ``"2006-01-02T15:04:05Z"`` (quoted, whole seconds), ``null`` when zero;
  ``time`` as ``2006-01-02 15:04:05.999999999 +0000 UTC`` (plain); other strings quoted only
  when plain YAML would read them as something else.

Statuses: health ``Healthy``/``Unhealthy``; scale-up ``InProgress`` (a scale-up request with
upcoming nodes), ``Unhealthy``, ``Backoff`` (with ``backoffInfo``: error code and message, the
message cut to 500 bytes with ``<truncated>``), else ``NoActivity``; cluster-wide scale-up
``InProgress`` when any group is; scale-down ``CandidatesPresent``/``NoCandidates`` with the
number of unneeded nodes. Every condition keeps its ``lastTransitionTime`` while its status does
not change (:class:`StatusHistory`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

import yaml

from kubescale.base.go_time import go_time_string
from kubescale.base.times import format_time
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    AcceptableRange,
    ClusterStateRegistry,
    Readiness,
)
from kubescale.objects.config_map import ConfigMap
from kubescale.plans.config_maps import config_map_body
from kubescale.plans.intents import WriteConfigMap

__all__ = [
    "LAST_UPDATED_ANNOTATION",
    "StatusHistory",
    "build_status",
    "render_status",
    "status_config_map",
    "status_write",
]

LAST_UPDATED_ANNOTATION: Final = "cluster-autoscaler.kubernetes.io/last-updated"
MAX_ERROR_MESSAGE: Final = 500
TRUNCATED: Final = "<truncated>"
_STR_TAG: Final = "tag:yaml.org,2002:str"
_RESOLVER: Final = yaml.resolver.Resolver()

Status = dict[str, Any]


def _truncate(text: str) -> str:
    if len(text) <= MAX_ERROR_MESSAGE:
        return text
    return text[: MAX_ERROR_MESSAGE - len(TRUNCATED)] + TRUNCATED


def _time(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def _node_count(readiness: Readiness) -> Status:
    registered: Status = {
        "total": len(readiness.registered),
        "ready": len(readiness.ready),
        "notStarted": len(readiness.not_started),
        "suspended": len(readiness.suspended),
        "unready": {
            "total": len(readiness.unready),
            "resourceUnready": len(readiness.resource_unready),
        },
    }
    if readiness.deleted:
        registered["beingDeleted"] = len(readiness.deleted)
    return {
        "registered": registered,
        "longUnregistered": len(readiness.long_unregistered),
        "unregistered": len(readiness.unregistered),
    }


class StatusHistory:
    """The last status written, for ``lastTransitionTime`` (upstream's ``lastStatus``)."""

    def __init__(self) -> None:
        self.last: Status = {}

    def transition(self, path: tuple[str, ...], condition: Status) -> Status:
        """Set ``lastTransitionTime``: kept from the last status when ``status`` is the same,
        else the condition's ``lastProbeTime``."""
        previous: Any = self.last
        for key in path:
            previous = previous.get(key, {}) if isinstance(previous, Mapping) else {}
        if isinstance(previous, Mapping) and previous.get("status") == condition.get("status"):
            condition["lastTransitionTime"] = previous.get("lastTransitionTime")
        else:
            condition["lastTransitionTime"] = condition.get("lastProbeTime")
        return condition


def _with_status(condition: Status, status: str) -> Status:
    if status:
        condition["status"] = status
    return condition


def build_status(registry: ClusterStateRegistry, history: StatusHistory, now: datetime) -> Status:
    """``GetStatus``: the status object (dicts with the JSON field names)."""
    groups: list[Status] = []
    previous_groups = {g.get("name"): g for g in history.last.get("nodeGroups", [])}
    scale_down_probe = _time(registry.last_scale_down_update)
    in_progress = False  # a group's scale-up InProgress makes the cluster's (GetStatus)
    for group in registry.snapshot.groups.values():
        readiness = registry.per_group.get(group.id, Readiness())
        acceptable = registry.ranges.get(group.id, AcceptableRange(0, 0, 0))
        probe = _time(readiness.time)
        last_group = StatusHistory()
        last_group.last = previous_groups.get(group.id, {})
        health = _with_status(
            {
                "nodeCounts": _node_count(readiness),
                "cloudProviderTarget": acceptable.current_target,
                "minSize": group.min_size,
                "maxSize": group.max_size,
                "lastProbeTime": probe,
            },
            "Healthy" if registry.is_node_group_healthy(group.id) else "Unhealthy",
        )
        safety = registry.scale_up_safety(group.id, now)
        scale_up: Status = {"backoffInfo": {}, "lastProbeTime": probe}
        if registry.is_scaling_up(group.id):
            scale_up["status"] = "InProgress"
            in_progress = True
        elif not safety.healthy:
            scale_up["status"] = "Unhealthy"
        elif safety.backoff is not None:
            scale_up["status"] = "Backoff"
            info: Status = {}
            if safety.backoff.error.code:
                info["errorCode"] = safety.backoff.error.code
            if safety.backoff.error.message:
                info["errorMessage"] = _truncate(safety.backoff.error.message)
            scale_up["backoffInfo"] = info
        else:
            scale_up["status"] = "NoActivity"
        candidates = len(registry.candidates_for_scale_down.get(group.id, []))
        scale_down: Status = {"lastProbeTime": scale_down_probe}
        if candidates:
            scale_down["candidates"] = candidates
        scale_down["status"] = "CandidatesPresent" if candidates else "NoCandidates"
        groups.append(
            {
                "name": group.id,
                "health": last_group.transition(("health",), health),
                "scaleUp": last_group.transition(("scaleUp",), scale_up),
                "scaleDown": last_group.transition(("scaleDown",), scale_down),
            }
        )
    total_probe = _time(registry.total.time)
    cluster_health = _with_status(
        {"nodeCounts": _node_count(registry.total), "lastProbeTime": total_probe},
        "Healthy" if registry.is_cluster_healthy() else "Unhealthy",
    )
    cluster_scale_up: Status = {
        "status": "InProgress" if in_progress else "NoActivity",
        "lastProbeTime": total_probe,
    }
    total_candidates = sum(len(v) for v in registry.candidates_for_scale_down.values())
    cluster_scale_down: Status = {"lastProbeTime": scale_down_probe}
    if total_candidates:
        cluster_scale_down["candidates"] = total_candidates
    cluster_scale_down["status"] = "CandidatesPresent" if total_candidates else "NoCandidates"
    status: Status = {
        "time": go_time_string(now),
        "autoscalerStatus": "Running",
        "clusterWide": {
            "health": history.transition(("clusterWide", "health"), cluster_health),
            "scaleUp": history.transition(("clusterWide", "scaleUp"), cluster_scale_up),
            "scaleDown": history.transition(("clusterWide", "scaleDown"), cluster_scale_down),
        },
    }
    if groups:
        status["nodeGroups"] = groups
    history.last = status
    return status


# ------------------------------------------------------------------------------- YAML


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    text = str(value)
    tag = _RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if text == "" or tag != _STR_TAG:
        return json.dumps(text, ensure_ascii=False)  # Go's yaml double-quotes these
    dumped = yaml.safe_dump(text, default_flow_style=True, allow_unicode=True, width=2**31)
    return dumped.removesuffix("\n...\n").removesuffix("\n")


def _emit(value: Mapping[str, Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key in sorted(value):
        item = value[key]
        if isinstance(item, Mapping):
            if not item:
                lines.append(f"{pad}{key}: {{}}")
            else:
                lines.append(f"{pad}{key}:")
                _emit(item, indent + 2, lines)
        elif isinstance(item, list):
            if not item:
                lines.append(f"{pad}{key}: []")
                continue
            lines.append(f"{pad}{key}:")
            for element in item:
                nested: list[str] = []
                _emit(element, indent + 2, nested)
                first = nested[0]
                lines.append(f"{pad}- {first[indent + 2 :]}")
                lines.extend(nested[1:])
        else:
            lines.append(f"{pad}{key}: {_scalar(item)}")


def render_status(status: Mapping[str, Any]) -> str:
    """``sigs.k8s.io/yaml.Marshal`` of the status (module docstring)."""
    lines: list[str] = []
    _emit(status, 0, lines)
    return "\n".join(lines) + "\n"


def status_write(
    *, actor: str, name: str, namespace: str, status: Mapping[str, Any]
) -> WriteConfigMap:
    """``WriteStatusConfigMap`` as an intent: data ``status``, the last-updated annotation
    (the executor GETs the ConfigMap and updates or creates it, :mod:`kubescale.plans.
    config_maps`)."""
    return WriteConfigMap(
        actor=actor,
        namespace=namespace,
        name=name,
        data={"status": render_status(status)},
        annotations={LAST_UPDATED_ANNOTATION: str(status.get("time", ""))},
    )


def status_config_map(
    *, name: str, namespace: str, status: Mapping[str, Any], existing: ConfigMap | None
) -> dict[str, Any]:
    """The ConfigMap to write: ``existing`` updated (data ``status``, the last-updated
    annotation), or a new one (what the executor writes for :func:`status_write`)."""
    intent = status_write(actor="", name=name, namespace=namespace, status=status)
    return config_map_body(intent, existing)
