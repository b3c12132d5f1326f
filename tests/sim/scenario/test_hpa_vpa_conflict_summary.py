"""The HPA/VPA conflict shows in ``kubescale simulate``'s text summary (issue 32 leftovers: it
said "Decisions: none" when the webhook had only kept out of the HPA's way): one line per
workload that an HPA scaling on CPU or memory and a VPA both target, and what the webhook set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubescale.cli.main import main
from kubescale.sim.scenario.decision_log import hpa_vpa_conflicts
from kubescale.sim.scenario.summary_table import render_summary

EXAMPLES = Path(__file__).resolve().parents[3] / "kubescale" / "sim" / "scenario" / "examples"


def _report(*, metric: str, vpa_target: str, updates: list[str]) -> dict[str, Any]:
    """A JSON report (the keys :func:`hpa_vpa_conflicts` reads) of workload shop/web: an HPA
    on ``metric``, a VPA on ``vpa_target``, one webhook resize per ``updates`` entry."""
    pods = [f"web-{i}" for i in range(len(updates))]
    return {
        "hpas": [
            {"namespace": "shop", "name": "web", "target": "Deployment/web", "metric": metric}
        ],
        "vpas": [
            {
                "namespace": "shop",
                "name": "web-vpa",
                "target": vpa_target,
                "mode": "Auto",
                "containers": [],
            }
        ],
        "containers": [
            {"namespace": "shop", "pod": pod, "workload": "web", "container": "app"} for pod in pods
        ],
        "events": [
            {"time": 0.0, "kind": "webhook-resize", "subject": f"shop/{pod}", "detail": detail}
            for pod, detail in zip(pods, updates, strict=True)
        ],
    }


CPU_AND_MEMORY = "Pod resources updated by web-vpa: container 0: cpu request, memory request"
MEMORY_ONLY = "Pod resources updated by web-vpa: container 0: memory request"
BOTH = "shop/web: HPA web scales on {r} and VPA web-vpa (Auto) recommends {r} too"


@pytest.mark.parametrize(
    ("metric", "vpa_target", "updates", "expected"),
    [
        # separate programs: the webhook set cpu on both pods, under the HPA's cpu metric
        (
            "cpu utilization (%)",
            "Deployment/web",
            [CPU_AND_MEMORY, CPU_AND_MEMORY],
            [
                BOTH.format(r="cpu") + "; the webhook set cpu on 2 pods: each VPA change "
                "moves the HPA's cpu utilization"
            ],
        ),
        # one brain: cpu left to the HPA, memory set on the 3 pods
        (
            "cpu utilization (%)",
            "Deployment/web",
            [MEMORY_ONLY] * 3,
            [
                BOTH.format(r="cpu")
                + "; the webhook left cpu to the HPA and set memory only (3 pods)"
            ],
        ),
        # a memory HPA (AverageValue) and a VPA that only recommends: the conflict, no outcome
        ("memory (averageValue)", "Deployment/web", [], [BOTH.format(r="memory")]),
        # an HPA on a custom metric: no shared resource (upstream allows it)
        ("requests_per_second (averageValue)", "Deployment/web", [MEMORY_ONLY], []),
        # the VPA targets another workload
        ("cpu utilization (%)", "Deployment/api", [CPU_AND_MEMORY], []),
    ],
)
def test_conflicts(metric: str, vpa_target: str, updates: list[str], expected: list[str]) -> None:
    assert hpa_vpa_conflicts(_report(metric=metric, vpa_target=vpa_target, updates=updates)) == (
        expected
    )


def test_the_example_shows_the_conflict_and_what_one_brain_did(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # hpa-vpa-one-workload.yaml: the HPA on web's CPU at 60 %, a VPA (Recreate) with a
    # recommendation; one brain (the default) leaves CPU to the HPA: the 4 pods get memory only.
    path = EXAMPLES / "hpa-vpa-one-workload.yaml"
    assert main(["simulate", str(path), "--quiet", "--duration", "2m"]) == 0
    out = capsys.readouterr().out
    assert "  HPA/VPA conflicts (1):\n" in out
    assert (
        "    shop/web: HPA web scales on cpu and VPA web (Recreate) recommends cpu too; the "
        "webhook left cpu to the HPA and set memory only (4 pods)\n"
    ) in out.replace("\n        ", " ")


def test_render_summary_lists_the_conflict_under_what_kubescale_did() -> None:
    report = _report(metric="cpu utilization (%)", vpa_target="Deployment/web", updates=[])
    lines = [line for line in _summary_lines(report) if "HPA/VPA" in line]
    assert lines == ["  HPA/VPA conflicts (1):"]


def _summary_lines(conflict: dict[str, Any]) -> list[str]:
    report: dict[str, Any] = {
        "scenario": "s",
        "seed": 1,
        "duration": 60.0,
        "start": "2026-01-05T00:00:00.000000Z",
        "step": 60.0,
        "components": ["webhook"],
        "loops": [],
        "cluster": {
            "node_count": {"min": 1, "max": 1, "avg": 1.0},
            "node_hours": 0.0,
            "cost": 0.0,
            "oom_kills": 0,
            "evictions": 0,
            "pending_pod_seconds": 0.0,
            "unpriced_nodes": [],
        },
        "workloads": [],
        **conflict,
    }
    return render_summary(report).splitlines()
