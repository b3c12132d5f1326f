"""The scan's "already going" pods asks the gate about its candidates only (issue 29).

``going_pods`` (``core/autoscaler_loop.py``) must answer what asking ``already_going`` of every
pod placed on a listed node answers -- the from-scratch path, the scan's code before issue 29 --
while looking up only the ledger's entries. A property compares the two over random clusters and
ledgers (entries expired, pods deleting, pods re-created under the same name, pods on no listed
node); the real loop, against the simulated API server, asks the gate about no pod in a steady
scan with nothing in flight, and about the one pod being evicted when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.autoscaler.core.autoscaler_loop import going_pods
from kubescale.controllers.autoscaler.model.pod_facts import pod_id
from kubescale.coordination.disruption_ledger import (
    MAX_AGE,
    Disruption,
    DisruptionKind,
    DisruptionLedger,
)
from kubescale.coordination.one_brain import LedgerGate
from kubescale.coordination.ports import DisruptionGate
from kubescale.kube.resources import PODS
from kubescale.objects.pod import Pod
from tests.builders.pods import pod

from ..sim_harness import app_deployment, sim_cluster
from ..test_autoscaler_e2e import SETTINGS, SMALL

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def _from_scratch(
    gate: DisruptionGate, pods_by_node: Mapping[str, Sequence[Pod]], now: datetime
) -> frozenset[str]:
    """The scan before issue 29: every placed pod asked."""
    return frozenset(
        pod_id(p) for ps in pods_by_node.values() for p in ps if gate.already_going(p, now=now)
    )


@dataclass
class _Case:
    pods: list[Pod]
    listed: dict[str, list[Pod]]
    entries: list[Disruption] = field(default_factory=list)

    def ledger(self) -> DisruptionLedger:
        ledger = DisruptionLedger()
        for entry in self.entries:
            ledger.record(entry)
        return ledger

    def lookup(self, name: str, namespace: str) -> Pod | None:
        found = [
            p
            for p in self.pods
            if (p["metadata"]["namespace"], p["metadata"]["name"])
            == (
                namespace,
                name,
            )
        ]
        return found[-1] if found else None  # the informer holds the latest object of a key


@st.composite
def _cases(draw: st.DrawFn) -> _Case:
    count = draw(st.integers(min_value=0, max_value=12))
    pods: list[Pod] = []
    for i in range(count):
        node = draw(st.sampled_from(["node-a", "node-b", "node-gone", None]))
        deleting = draw(st.booleans())
        pods.append(
            cast(
                Pod,
                pod(
                    name=f"p{i}",
                    namespace=draw(st.sampled_from(["a", "b"])),
                    uid=f"uid-{i}",
                    node_name=node,
                    deletion_timestamp="2026-01-01T11:59:00Z" if deleting else None,
                ),
            )
        )
    listed: dict[str, list[Pod]] = {"node-a": [], "node-b": []}
    for p in pods:
        node = p["spec"].get("nodeName")
        if node in listed:
            listed[node].append(p)
    case = _Case(pods=pods, listed=listed)
    for p in draw(st.lists(st.sampled_from(pods), unique_by=id)) if pods else []:
        age = draw(st.sampled_from([timedelta(0), timedelta(seconds=30), MAX_AGE]))
        # an entry of an earlier pod of the same name (another uid), or of this pod
        uid = p["metadata"]["uid"] if draw(st.booleans()) else "uid-before"
        kind = draw(st.sampled_from(list(DisruptionKind)))
        # a resize the pod shows (its container has no requests: 2 cpu is not shown) or not
        asked = draw(st.sampled_from([{"app": {"requests": {"cpu": "2"}}}, {}]))
        case.entries.append(
            Disruption(
                kind=kind,
                resources=asked if kind is DisruptionKind.RESIZE else {},
                uid=uid,
                namespace=p["metadata"]["namespace"],
                name=p["metadata"]["name"],
                recorded_at=NOW - age,
                confirmed=True,
                actor=draw(st.sampled_from(["vpa-updater", "descheduler"])),
            )
        )
    return case


@given(_cases())
def test_going_pods_is_asking_every_placed_pod(case: _Case) -> None:
    expected = _from_scratch(LedgerGate(case.ledger()), case.listed, NOW)
    assert going_pods(LedgerGate(case.ledger()), case.listed, case.lookup, now=NOW) == expected


@dataclass
class _CountingGate:
    """A real gate (the one ledger's), counting the pods it is asked about."""

    gate: LedgerGate
    asked: list[str] = field(default_factory=list)

    def already_going(self, pod: Pod, *, now: datetime) -> bool:
        self.asked.append(pod_id(pod))
        return self.gate.already_going(pod, now=now)

    def evictions_in_flight(self, *, now: datetime) -> list[Disruption]:
        return self.gate.evictions_in_flight(now=now)

    def possibly_going(self, *, now: datetime) -> list[tuple[str, str]]:
        return self.gate.possibly_going(now=now)


async def test_a_steady_scan_asks_the_gate_about_no_pod(tmp_path: Path) -> None:
    async with sim_cluster(
        tmp_path,
        machine_deployments=[SMALL],
        settings=SETTINGS,
        objects=[app_deployment("web", replicas=3, cpu="500m")],
    ) as cluster:
        await cluster.run_for(60)
        assert len(cluster.running("web")) == 3
        ledger = DisruptionLedger()
        counting = _CountingGate(LedgerGate(ledger))
        cluster.loop.gate = counting
        await cluster.settle()
        await cluster.loop.run_once(cluster.now)
        assert counting.asked == []  # 3 pods placed, none in flight: none asked

        web = sorted(p["metadata"]["name"] for p in cluster.running("web"))
        evicted: Any = cluster.loop.pods.lister.get(web[0], "default")
        ledger.record(
            Disruption(
                kind=DisruptionKind.EVICTION,
                uid=evicted["metadata"]["uid"],
                namespace="default",
                name=web[0],
                recorded_at=cluster.now,
                confirmed=True,
                actor="descheduler",
            )
        )
        await cluster.loop.run_once(cluster.now)
        assert counting.asked == [f"default/{web[0]}"]
        assert cluster.api.store.peek(PODS, web[0], "default") is not None
