"""A Deployment's rollout arithmetic and status (``pkg/controller/deployment/util`` and
``sync.go``'s ``calculateStatus``/``syncRolloutStatus``), as pure functions of raw objects.

Conditions follow ``SetDeploymentCondition``: a condition with the same status and reason is
left as it is (times included), a changed one keeps its lastTransitionTime when only the reason
changed. ``Progressing`` is the exception upstream makes: while a rollout makes progress its
lastUpdateTime moves; a rollout whose last progress is older than ``progressDeadlineSeconds``
turns ``Progressing=False`` with reason ``ProgressDeadlineExceeded``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

from kubescale.sim.apiserver.storage import format_time

from .workload_pods import parse_timestamp, scaled_value

__all__ = [
    "DEFAULT_PROGRESS_DEADLINE",
    "DESIRED_REPLICAS",
    "MAX_REPLICAS",
    "POD_TEMPLATE_HASH",
    "REVISION",
    "annotation_int",
    "deployment_complete",
    "deployment_status",
    "fenceposts",
    "max_surge",
    "max_unavailable",
    "proportional_sizes",
    "replicas_of",
]

DEFAULT_PROGRESS_DEADLINE: Final = 600
"""``progressDeadlineSeconds``' API default."""
POD_TEMPLATE_HASH: Final = "pod-template-hash"
REVISION: Final = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS: Final = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS: Final = "deployment.kubernetes.io/max-replicas"
AVAILABLE: Final = "Available"
PROGRESSING: Final = "Progressing"


def replicas_of(obj: dict[str, Any]) -> int:
    """``spec.replicas`` (1 when unset, the API default)."""
    return int((obj.get("spec") or {}).get("replicas", 1))


def annotation_int(obj: dict[str, Any], name: str) -> int | None:
    text = (obj["metadata"].get("annotations") or {}).get(name)
    try:
        return int(text) if isinstance(text, str) else None
    except ValueError:
        return None


def _spec(d: dict[str, Any]) -> dict[str, Any]:
    spec = d.get("spec")
    return spec if isinstance(spec, dict) else {}


def _rolling_params(d: dict[str, Any]) -> dict[str, Any] | None:
    strategy = _spec(d).get("strategy") or {}
    if strategy.get("type", "RollingUpdate") == "Recreate":
        return None
    params = strategy.get("rollingUpdate")
    return params if isinstance(params, dict) else {}


def fenceposts(d: dict[str, Any]) -> tuple[int, int]:
    """``ResolveFenceposts``: (maxSurge rounded up, maxUnavailable rounded down) of
    ``spec.replicas``; both zero → unavailability 1."""
    params = _rolling_params(d) or {}
    replicas = int(_spec(d).get("replicas", 1))
    surge = scaled_value(params.get("maxSurge"), replicas, round_up=True)
    unavailable = scaled_value(params.get("maxUnavailable"), replicas, round_up=False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: dict[str, Any]) -> int:
    """``MaxSurge``: 0 unless rolling."""
    return fenceposts(d)[0] if _rolling_params(d) is not None else 0


def max_unavailable(d: dict[str, Any]) -> int:
    """``MaxUnavailable``: 0 unless rolling with replicas, at most ``spec.replicas``."""
    replicas = int(_spec(d).get("replicas", 1))
    if _rolling_params(d) is None or replicas == 0:
        return 0
    return min(fenceposts(d)[1], replicas)


def proportional_sizes(
    d: dict[str, Any], active: list[dict[str, Any]]
) -> list[tuple[dict[str, Any], int]]:
    """The proportional part of ``DeploymentController.scale``: the new size of each active
    ReplicaSet when the Deployment is resized in the middle of a rolling update.

    ``replicas + maxSurge`` minus what the ReplicaSets hold is spread in proportion to their
    sizes (``GetReplicaSetProportion``), largest first — newer first among equals when growing,
    older first when shrinking — and the rounding leftover goes to the first.
    """
    replicas = replicas_of(d)
    total = sum(replicas_of(r) for r in active)
    allowed = replicas + max_surge(d) if replicas > 0 else 0
    to_add = allowed - total
    ordered = sorted(
        active,
        key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]),
        reverse=to_add > 0,
    )
    ordered.sort(key=lambda r: -replicas_of(r))  # stable: ties keep the age order
    added = 0
    sizes: list[int] = []
    for rs in ordered:
        proportion = _proportion(d, rs, to_add=to_add, added=added) if to_add else 0
        sizes.append(replicas_of(rs) + proportion)
        added += proportion
    if ordered and to_add:
        sizes[0] = max(0, sizes[0] + to_add - added)
    return list(zip(ordered, sizes, strict=True))


def _proportion(d: dict[str, Any], rs: dict[str, Any], *, to_add: int, added: int) -> int:
    """``GetReplicaSetProportion`` / ``getReplicaSetFraction``."""
    replicas = replicas_of(d)
    if replicas_of(rs) == 0 or to_add == added:
        return 0
    if replicas == 0:
        fraction = -replicas_of(rs)
    else:
        before = annotation_int(rs, MAX_REPLICAS) or 0
        if before == 0:
            before = int((d.get("status") or {}).get("replicas") or 0)
        if before == 0:
            fraction = 0
        else:
            wanted = replicas_of(rs) * (replicas + max_surge(d)) / before
            fraction = _round_half_away(wanted) - replicas_of(rs)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


def _round_half_away(value: float) -> int:
    """``integer.RoundToInt32``: halves away from zero."""
    return int(value + 0.5) if value >= 0 else -int(-value + 0.5)


def deployment_complete(d: dict[str, Any], status: dict[str, Any]) -> bool:
    """``DeploymentComplete``: every replica updated and available, generation observed."""
    replicas = int(_spec(d).get("replicas", 1))
    return (
        int(status.get("updatedReplicas") or 0) == replicas
        and int(status.get("replicas") or 0) == replicas
        and int(status.get("availableReplicas") or 0) == replicas
        and int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 1)
    )


def _progressing(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """``DeploymentProgressing``: more updated, fewer old, more ready or more available."""

    def count(status: dict[str, Any], field: str) -> int:
        return int(status.get(field) or 0)

    old_old = count(old, "replicas") - count(old, "updatedReplicas")
    new_old = count(new, "replicas") - count(new, "updatedReplicas")
    return (
        count(new, "updatedReplicas") > count(old, "updatedReplicas")
        or new_old < old_old
        or count(new, "readyReplicas") > count(old, "readyReplicas")
        or count(new, "availableReplicas") > count(old, "availableReplicas")
    )


def _find(conditions: list[dict[str, Any]], kind: str) -> dict[str, Any] | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _set(
    conditions: list[dict[str, Any]],
    *,
    kind: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    force: bool = False,
) -> list[dict[str, Any]]:
    """``SetDeploymentCondition`` (``force``: replace even with the same status and reason,
    keeping lastTransitionTime when the status is unchanged — the Progressing special case)."""
    current = _find(conditions, kind)
    if (
        current is not None
        and not force
        and current.get("status") == status
        and current.get("reason") == reason
    ):
        return conditions
    condition = {
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }
    if current is not None and current.get("status") == status:
        condition["lastTransitionTime"] = current.get("lastTransitionTime", now)
    return [c for c in conditions if c.get("type") != kind] + [condition]


def deployment_status(
    d: dict[str, Any],
    *,
    rses: list[dict[str, Any]],
    new_rs: dict[str, Any] | None,
    now: datetime,
    new_rs_created: bool,
) -> tuple[dict[str, Any], datetime | None]:
    """The status to write, and when to look again for a progress deadline (if any)."""

    def total(field: str, items: list[dict[str, Any]]) -> int:
        return sum(int((r.get("status") or {}).get(field) or 0) for r in items)

    replicas = int(_spec(d).get("replicas", 1))
    old = d.get("status") or {}
    available = total("availableReplicas", rses)
    wanted = sum(int((r.get("spec") or {}).get("replicas", 1)) for r in rses)
    status: dict[str, Any] = {
        "observedGeneration": int(d["metadata"].get("generation") or 1),
        "replicas": total("replicas", rses),
        "updatedReplicas": total("replicas", [new_rs]) if new_rs is not None else 0,
        "readyReplicas": total("readyReplicas", rses),
        "availableReplicas": available,
        "unavailableReplicas": max(0, wanted - available),
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    stamp = format_time(now)
    conditions = [dict(c) for c in old.get("conditions") or [] if isinstance(c, dict)]
    if available >= replicas - max_unavailable(d):
        conditions = _set(
            conditions,
            kind=AVAILABLE,
            status="True",
            reason="MinimumReplicasAvailable",
            message="Deployment has minimum availability.",
            now=stamp,
        )
    else:
        conditions = _set(
            conditions,
            kind=AVAILABLE,
            status="False",
            reason="MinimumReplicasUnavailable",
            message="Deployment does not have minimum availability.",
            now=stamp,
        )
    deadline = _spec(d).get("progressDeadlineSeconds", DEFAULT_PROGRESS_DEADLINE)
    name = new_rs["metadata"]["name"] if new_rs is not None else None
    subject = f'ReplicaSet "{name}"' if name else f'Deployment "{d["metadata"]["name"]}"'
    if new_rs_created and name:
        conditions = _set(
            conditions,
            kind=PROGRESSING,
            status="True",
            reason="NewReplicaSetCreated",
            message=f'Created new replica set "{name}"',
            now=stamp,
        )
    current = _find(conditions, PROGRESSING)
    finished = (
        status["replicas"] == status["updatedReplicas"]
        and current is not None
        and current.get("reason") == "NewReplicaSetAvailable"
    )
    if deadline is None:
        conditions = [c for c in conditions if c.get("type") != PROGRESSING]
    elif not finished:
        if deployment_complete(d, status):
            conditions = _set(
                conditions,
                kind=PROGRESSING,
                status="True",
                reason="NewReplicaSetAvailable",
                message=f"{subject} has successfully progressed.",
                now=stamp,
            )
        elif _progressing(old, status):
            conditions = _set(
                conditions,
                kind=PROGRESSING,
                status="True",
                reason="ReplicaSetUpdated",
                message=f"{subject} is progressing.",
                now=stamp,
                force=True,
            )
        elif current is not None and _timed_out(current, deadline=int(deadline), now=now):
            conditions = _set(
                conditions,
                kind=PROGRESSING,
                status="False",
                reason="ProgressDeadlineExceeded",
                message=f"{subject} has timed out progressing.",
                now=stamp,
            )
    status["conditions"] = conditions
    wake: datetime | None = None
    progressing = _find(conditions, PROGRESSING)
    if (
        deadline is not None
        and progressing is not None
        and progressing.get("status") == "True"
        and progressing.get("reason") != "NewReplicaSetAvailable"
    ):
        since = parse_timestamp(progressing.get("lastUpdateTime"))
        if since is not None:
            wake = since + timedelta(seconds=int(deadline) + 1)
    return status, wake


def _timed_out(condition: dict[str, Any], *, deadline: int, now: datetime) -> bool:
    """``DeploymentTimedOut``: no progress reported for longer than the deadline."""
    if condition.get("reason") == "NewReplicaSetAvailable":
        return False
    if condition.get("reason") == "ProgressDeadlineExceeded":
        return True
    since = parse_timestamp(condition.get("lastUpdateTime"))
    return since is not None and since + timedelta(seconds=deadline) < now
