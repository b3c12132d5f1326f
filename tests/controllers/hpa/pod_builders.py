"""Pods and pod metrics for the replica calculator's tables."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from kubescale.controllers.hpa.replica_calculator import PodMetric
from kubescale.objects.pod import Pod
from tests import builders

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
LONG_AGO = NOW - timedelta(hours=1)
WINDOW = timedelta(seconds=30)


def _fmt(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def measured_pod(
    name: str,
    *,
    cpu: str = "1",
    phase: str = "Running",
    ready: str | None = "True",
    started: datetime | None = LONG_AGO,
    ready_since: datetime | None = None,
    deleting: bool = False,
    containers: Mapping[str, Mapping[str, str]] | None = None,
    sidecars: Mapping[str, Mapping[str, str]] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Pod:
    """Pod ``ns/<name>`` (labels ``app: web`` unless given) with one container ``app``
    requesting ``cpu`` (or ``containers``: name → requests; ``sidecars``: restartable init
    containers), Ready ``ready`` since ``ready_since`` (default: its start): the tables'
    columns over :func:`tests.builders.pods.pod`."""
    status: dict[str, Any] = {"phase": phase}
    if started is not None:
        status["startTime"] = _fmt(started)
    if ready is not None:
        since = ready_since or started or LONG_AGO
        status["conditions"] = [
            {"type": "Ready", "status": ready, "lastTransitionTime": _fmt(since)}
        ]
    # the shared builder's JSON, a Pod
    return cast(
        Pod,
        builders.pods.pod(
            name=name,
            namespace="ns",
            labels=labels or {"app": "web"},
            deletion_timestamp=_fmt(NOW) if deleting else None,
            containers=[
                builders.pods.container(c, requests=r)
                for c, r in (containers or {"app": {"cpu": cpu}}).items()
            ],
            init_containers=(
                [
                    builders.pods.container(c, restartPolicy="Always", requests=r)
                    for c, r in sidecars.items()
                ]
                if sidecars
                else None
            ),
            status=status,
            api_version=None,
        ),
    )


def metrics(values: Mapping[str, int], *, at: datetime = NOW) -> dict[str, PodMetric]:
    """Milli-values per pod, measured over a 30 s window ending ``at``."""
    return {name: PodMetric(value=v, timestamp=at, window=WINDOW) for name, v in values.items()}
