"""``--recommendation-policy``: the flag in ``serve`` and in a scenario, and the cluster model
recommending with it (the adaptive policy's rules: ``test_adaptive_policy.py``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubescale.base.flag_types import FlagValueError
from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.components import VPA_RECOMMENDER as RECOMMENDER
from kubescale.controllers.vpa.model.cluster_state import ClusterState
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.kube.resources import VERTICAL_POD_AUTOSCALERS
from kubescale.objects.selectors import label_selector_from_set
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_components import component_settings, scenario_flags
from kubescale.sim.scenario.scenario_validation import parse_scenario

T0 = datetime(2024, 6, 3, tzinfo=UTC)
APP = {"app": "web"}
EXAMPLE = (
    Path(__file__).resolve().parents[4]
    / "kubescale"
    / "sim"
    / "scenario"
    / "examples"
    / "vpa-recommender.yaml"
)


def _serve(*flags: str) -> RecommenderConfig:
    config = serve_config_from_args(build_parser().parse_args(["serve", *flags]))
    settings = config.components["vpa-recommender"]
    assert settings is not None
    model: RecommenderConfig = settings.model
    return model


def test_serve_defaults_to_upstream_and_takes_adaptive() -> None:
    assert _serve().recommendation_policy == "upstream"
    assert _serve("--recommendation-policy", "adaptive").recommendation_policy == "adaptive"


def test_serve_refuses_an_unknown_policy(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--recommendation-policy", "clever"])
    assert "--recommendation-policy: invalid choice: 'clever'" in capsys.readouterr().err


def test_a_scenario_takes_the_policy() -> None:
    assert "recommendation-policy" in scenario_flags(RECOMMENDER)
    settings = component_settings(RECOMMENDER, {"recommendation-policy": "adaptive"})
    assert settings.model.recommendation_policy == "adaptive"
    assert component_settings(RECOMMENDER, {}).model.recommendation_policy == "upstream"
    with pytest.raises(FlagValueError, match="--recommendation-policy"):
        component_settings(RECOMMENDER, {"recommendation-policy": "clever"})


async def test_a_simulated_run_recommends_with_the_adaptive_policy() -> None:
    document: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    document["duration"] = "20m"
    document["events"] = []
    document["kubescale"]["vpa-recommender"] = {"recommendation-policy": "adaptive"}
    scenario = parse_scenario(document, base_dir=EXAMPLE.parent)
    async with SimulationRun(scenario) as run:
        await run.run()
        vpa = run.api.store.get(VERTICAL_POD_AUTOSCALERS, "web", "shop")
        gated = run.loops["vpa-recommender"].loop
    model = gated._component.loop.feeder.state  # type: ignore[attr-defined]
    assert model.config.recommendation_policy == "adaptive"
    (entry,) = vpa["status"]["recommendation"]["containerRecommendations"]
    assert entry["containerName"] == "app"


# -- the cluster model ------------------------------------------------------------------------


def _cluster(policy: str, *, history_hours: float = 0.0) -> tuple[ClusterState, datetime]:
    """One VPA, one pod, 8 h of 1 core / 1 GB a minute; returns the state and the last minute.
    With ``history_hours``, one more 1-core sample that long before the first minute (the
    aggregate's history then starts there; memory and the CPU target are unchanged)."""
    state = ClusterState(config=RecommenderConfig(recommendation_policy=policy))
    state.add_or_update_vpa(
        {
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
        },
        selector=label_selector_from_set(APP),
    )
    state.add_or_update_pod(
        namespace="ns",
        name="p1",
        labels=APP,
        phase="Running",
        containers={"app": {"cpu": 1000, "memory": 10**9}},
        now=T0,
    )
    moment = T0
    if history_hours:
        assert state.add_sample(
            namespace="ns",
            pod="p1",
            container="app",
            resource="cpu",
            usage=1000,
            request=0,
            measure_start=T0 - timedelta(hours=history_hours),
        )
    for minute in range(8 * 60):
        moment = T0 + timedelta(minutes=minute)
        for resource, usage in (("cpu", 1000), ("memory", 10**9)):
            assert state.add_sample(
                namespace="ns",
                pod="p1",
                container="app",
                resource=resource,
                usage=usage,
                request=0,
                measure_start=moment,
            )
    return state, moment


def _target(state: ClusterState, now: datetime) -> dict[str, str]:
    [entry] = state.recommendation(namespace="ns", name="web", now=now).container_recommendations
    target: dict[str, str] = entry["target"]
    return target


def test_an_oom_lifts_memory_for_the_hold_then_both_policies_agree() -> None:
    # 1 GB a minute: the day's peak 1e9 B is in bucket 36, which ends at 1016281388 -> +15% =
    # 1168723596, upstream's target and the adaptive policy's rung 0. An OOM at a 1 GB
    # request (RecordOOM, both policies): max(1e9 + 100 MiB, 1.2e9) = 1.2e9 replaces the day's
    # peak (bucket 39, ends 1207997742 -> +15% = 1389197403). The adaptive policy also holds
    # max(int(1e9 * 2.0), margin(P100) = 1389197403) = 2e9 B for 36 h; then its rung 1
    # (P99) and upstream's P90 both read the one peak: 1389197403. The history starts 48 h
    # before the first minute, so the adaptive policy's young rule (under 48 h of history) is
    # not in play: test_a_young_aggregate_holds_twice_its_peak covers it.
    upstream, end = _cluster("upstream", history_hours=48)
    adaptive, _ = _cluster("adaptive", history_hours=48)
    before = {"cpu": "1168m", "memory": "1168723596"}
    assert _target(upstream, end) == _target(adaptive, end) == before
    oom_at = end + timedelta(minutes=1)
    for state in (upstream, adaptive):
        assert state.record_oom(
            namespace="ns", pod="p1", container="app", timestamp=oom_at, memory_request=10**9
        )
    soon = oom_at + timedelta(minutes=1)
    assert _target(upstream, soon)["memory"] == "1389197403"
    assert _target(adaptive, soon)["memory"] == "1953125Ki"  # 2e9 B in BinarySI
    later = oom_at + timedelta(hours=37)
    assert _target(upstream, later)["memory"] == _target(adaptive, later)["memory"] == "1389197403"


def test_a_young_aggregate_holds_twice_its_peak() -> None:
    # 8 h of history (< 48 h): the adaptive memory target is at least P100 + 100 % of the
    # peaks: the 1 GB peak's bucket 36 ends at 1016281388 -> 2 * 1016281388 = 2032562776;
    # upstream's target stays P90 + 15 % = 1168723596. CPU is not touched by the rule.
    upstream, end = _cluster("upstream")
    adaptive, _ = _cluster("adaptive")
    assert _target(upstream, end) == {"cpu": "1168m", "memory": "1168723596"}
    assert _target(adaptive, end) == {"cpu": "1168m", "memory": "2032562776"}


def test_vectorised_recommendations_equal_the_scalar_ones() -> None:
    state, end = _cluster("adaptive")
    state.record_oom(
        namespace="ns",
        pod="p1",
        container="app",
        timestamp=end + timedelta(minutes=1),
        memory_request=10**9,
    )
    for minutes in (2, 90, 600):
        now = end + timedelta(minutes=minutes)
        batch = state.recommendations(now=now)
        assert batch == {("ns", "web"): state.recommendation(namespace="ns", name="web", now=now)}
