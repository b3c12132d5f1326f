"""One brain: the cluster autoscaler's scale-down does not undo the descheduler's moves
(:mod:`kubescale.coordination.recent_moves`) — a table of the pure rule,
and the ledger's history it reads.

Every row: window 10m (``--scale-down-unneeded-time``), now 12:00:00; web-* pods belong to
ReplicaSet web in ``default``; the descheduler evicted a web pod from ``hot``.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

import pytest

from kubescale.coordination.descheduler_budget import ACTOR
from kubescale.coordination.disruption_ledger import Disruption, DisruptionKind, DisruptionLedger
from kubescale.coordination.recent_moves import (
    DESCHEDULER_ACTOR,
    DescheduledMove,
    PlacedPod,
    moves_from_ledger,
    placed_pods,
    protected_nodes,
)
from tests import builders

MOVED_POD = functools.partial(
    builders.pods.typed_pod,
    creation_timestamp="2026-03-02T11:57:00Z",
    owner_references=[builders.meta.owner_reference(uid="rs")],
    containers=None,
    api_version=None,
)
"""A pod of ReplicaSet ``web`` with no containers (name, uid and node given at the call)."""

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=10)


def move(minutes_ago: float, *, owner: str = "web", from_node: str = "hot") -> DescheduledMove:
    return DescheduledMove(
        namespace="default",
        owner_kind="ReplicaSet",
        owner_name=owner,
        from_node=from_node,
        evicted_at=NOW - timedelta(minutes=minutes_ago),
    )


def placed(
    name: str, node: str, minutes_ago: float, *, owner: str = "web", namespace: str = "default"
) -> PlacedPod:
    return PlacedPod(
        namespace=namespace,
        name=name,
        owner_kind="ReplicaSet",
        owner_name=owner,
        node=node,
        created_at=NOW - timedelta(minutes=minutes_ago),
    )


@pytest.mark.parametrize(
    ("moves", "pods", "expected"),
    [
        pytest.param(
            # evicted 3m ago from hot; web-new created 3m ago on spare → kept until
            # 11:57 + 10m = 12:07.
            [move(3)],
            [placed("web-new", "spare", 3)],
            {"spare": ("default/web-new", "hot", NOW + timedelta(minutes=7))},
            id="replacement-elsewhere",
        ),
        pytest.param(
            # the replacement landed back on hot: the move did not happen, nothing to keep.
            [move(3)],
            [placed("web-new", "hot", 3)],
            {},
            id="landed-back",
        ),
        pytest.param(
            # web-old was created 30m ago, before the eviction 3m ago: not a replacement.
            [move(3)],
            [placed("web-old", "spare", 30)],
            {},
            id="older-pod-of-the-owner",
        ),
        pytest.param(
            # evicted 10m ago exactly: 11:50 + 10m = 12:00 is not after now → expired.
            [move(10)],
            [placed("web-new", "spare", 10)],
            {},
            id="window-over",
        ),
        pytest.param(
            # evicted 9.5m ago: kept until 11:50:30 + 10m = 12:00:30.
            [move(9.5)],
            [placed("web-new", "spare", 9)],
            {"spare": ("default/web-new", "hot", NOW + timedelta(seconds=30))},
            id="window-almost-over",
        ),
        pytest.param(
            # another controller's pod (api) on spare: web's move does not keep it.
            [move(3)],
            [placed("api-new", "spare", 2, owner="api")],
            {},
            id="other-owner",
        ),
        pytest.param(
            # same owner name in another namespace: not the same controller.
            [move(3)],
            [placed("web-new", "spare", 2, namespace="prod")],
            {},
            id="other-namespace",
        ),
        pytest.param(
            # two moves of web (8m and 2m ago); the replacement created 1m ago on spare
            # answers both: the later one wins, until 11:58 + 10m = 12:08.
            [move(8), move(2)],
            [placed("web-new", "spare", 1)],
            {"spare": ("default/web-new", "hot", NOW + timedelta(minutes=8))},
            id="latest-move-wins",
        ),
        pytest.param(
            # moves from hot to two nodes: both kept.
            [move(3), move(3)],
            [placed("web-a", "spare-1", 3), placed("web-b", "spare-2", 3)],
            {
                "spare-1": ("default/web-a", "hot", NOW + timedelta(minutes=7)),
                "spare-2": ("default/web-b", "hot", NOW + timedelta(minutes=7)),
            },
            id="two-destinations",
        ),
    ],
)
def test_protected_nodes(
    moves: list[DescheduledMove],
    pods: list[PlacedPod],
    expected: dict[str, tuple[str, str, datetime]],
) -> None:
    found = protected_nodes(moves=moves, pods=pods, now=NOW, window=WINDOW)
    assert {n: (p.pod, p.from_node, p.until) for n, p in found.items()} == expected


def test_no_window_no_protection() -> None:
    # --scale-down-unneeded-time 0: the autoscaler removes at once; so does the rule.
    found = protected_nodes(
        moves=[move(1)], pods=[placed("x", "spare", 1)], now=NOW, window=timedelta(0)
    )
    assert found == {}


def test_created_in_the_second_of_the_eviction_counts() -> None:
    # evicted at 11:57:00.400; the API's creationTimestamp has whole seconds: 11:57:00.
    evicted = NOW - timedelta(minutes=3) + timedelta(milliseconds=400)
    the_move = DescheduledMove(
        namespace="default",
        owner_kind="ReplicaSet",
        owner_name="web",
        from_node="hot",
        evicted_at=evicted,
    )
    found = protected_nodes(
        moves=[the_move], pods=[placed("web-new", "spare", 3)], now=NOW, window=WINDOW
    )
    assert list(found) == ["spare"]


def test_the_descheduler_name_is_the_descheduler_s() -> None:
    assert DESCHEDULER_ACTOR == ACTOR


def test_ledger_history_feeds_the_rule() -> None:
    """The ledger keeps the descheduler's eviction (node, controller) after the informer has
    shown it — the in-flight entry is gone, the history is not — and only the descheduler's
    evictions are moves."""
    ledger = DisruptionLedger(shared=True)
    evicted = MOVED_POD(name="web-0", uid="uid-web-0", node_name="hot")
    at = NOW - timedelta(minutes=3)
    for actor, uid in ((ACTOR, "uid-web-0"), ("vpa-updater", "uid-web-1")):
        ledger.record(
            Disruption(
                kind=DisruptionKind.EVICTION,
                uid=uid,
                namespace="default",
                name=uid[4:],
                recorded_at=at,
                confirmed=True,
                actor=actor,
                node="hot",
                owner_kind="ReplicaSet",
                owner_name="web",
            )
        )
    ledger.forget("uid-web-0")  # the informer delivered the deletion
    assert ledger.pending(evicted, now=NOW) is None
    moves = moves_from_ledger(ledger.recent(now=NOW, within=WINDOW))
    assert moves == [move(3)]
    pods = placed_pods(
        {
            "spare": [MOVED_POD(name="web-new", uid="uid-web-new", node_name="spare")],
            "hot": [
                MOVED_POD(
                    name="web-0",
                    uid="uid-web-0",
                    node_name="hot",
                    deletion_timestamp="2026-03-02T11:58:00Z",
                )
            ],
        }
    )
    assert [(p.name, p.node) for p in pods] == [("web-new", "spare")]
    assert list(protected_nodes(moves=moves, pods=pods, now=NOW, window=WINDOW)) == ["spare"]
    # beyond the window asked, or the history's age, nothing is recent
    assert ledger.recent(now=NOW, within=timedelta(minutes=2)) == []
    assert ledger.recent(now=NOW + timedelta(hours=1), within=timedelta(hours=2)) == []
