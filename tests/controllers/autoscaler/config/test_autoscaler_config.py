"""The cluster autoscaler flags: upstream's names and defaults (reference §1-§3), validation."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest

from kubescale.controllers.autoscaler.config.autoscaler_config import (
    GIB,
    AutoDiscoverySpec,
    AutoscalerConfigError,
    AutoscalerSettings,
    NodeGroupDefaults,
    ResourceRange,
    autoscaler_settings_from_args,
)
from kubescale.controllers.autoscaler.config.autoscaler_flags import add_autoscaler_arguments
from kubescale.controllers.autoscaler.config.disruption_budgets import DisruptionBudget


def parse(*argv: str) -> AutoscalerSettings:
    parser = argparse.ArgumentParser()
    add_autoscaler_arguments(parser)
    return autoscaler_settings_from_args(parser.parse_args(list(argv)))


def test_defaults_are_upstreams() -> None:
    # not configured (no --cloud-provider, no --node-group-auto-discovery): auto does not run it
    unconfigured = parse()
    assert (unconfigured.mode, unconfigured.auto_off_reason) == (
        "false",
        "no --cloud-provider and no --node-group-auto-discovery",
    )
    settings = parse("--cloud-provider", "clusterapi")
    assert settings == AutoscalerSettings()
    assert settings.scan_interval == 10.0
    assert settings.expander == ("least-waste",)
    assert settings.max_nodes_total == 0
    assert settings.cores_total == ResourceRange(min=0, max=320000)
    assert settings.memory_total == ResourceRange(min=0, max=6400000 * GIB)
    assert settings.ok_total_unready_count == 3
    assert settings.max_total_unready_percentage == 45.0
    assert settings.expendable_pods_priority_cutoff == -10
    assert settings.new_pod_scale_up_delay == timedelta(0)
    assert settings.initial_node_group_backoff_duration == timedelta(minutes=5)
    assert settings.max_node_group_backoff_duration == timedelta(minutes=30)
    assert settings.node_group_backoff_reset_timeout == timedelta(hours=3)
    assert settings.scale_down_delay_after_add == timedelta(minutes=10)
    assert settings.scale_down_delay_after_delete == timedelta(0)
    assert settings.scale_down_delay_after_failure == timedelta(minutes=3)
    assert settings.max_scale_down_parallelism == 10
    assert settings.max_drain_parallelism == 1
    assert settings.max_pod_eviction_time == timedelta(minutes=2)
    assert settings.max_graceful_termination_sec == 600
    assert settings.node_defaults == NodeGroupDefaults(
        scale_down_utilization_threshold=0.5,
        scale_down_gpu_utilization_threshold=0.5,
        scale_down_unneeded_time=timedelta(minutes=10),
        scale_down_unready_time=timedelta(minutes=20),
        max_node_provision_time=timedelta(minutes=15),
    )
    assert settings.status_config_map_name == "cluster-autoscaler-status"
    assert settings.consolidation.policy == "Off"
    assert settings.consolidation.budgets == (DisruptionBudget(nodes="10%"),)
    assert settings.mode == "auto"


def test_flags_are_read() -> None:
    settings = parse(
        "--cluster-autoscaler=true",
        "--scan-interval=30s",
        "--expander=priority,least-waste",
        "--max-nodes-total=50",
        "--cores-total=2:100",
        "--memory-total=4:400",
        "--balance-similar-node-groups",
        "--balancing-ignore-label=pool",
        "--node-group-auto-discovery=clusterapi:namespace=prod,clusterName=c1,tier=web",
        "--scale-down-unneeded-time=1m",
        "--scale-down-utilization-threshold=0.7",
        "--new-pod-scale-up-delay=30s",
        "--startup-taint=example.com/warming",
        "--consolidation=WhenEmptyOrUnderutilized",
        "--consolidate-after=5m",
        "--consolidation-budgets=nodes=2;nodes=50%,reasons=Empty",
        "--scale-down-candidates-order=disruption-cost",
    )
    assert settings.mode == "true"
    assert settings.scan_interval == 30.0
    assert settings.expander == ("priority", "least-waste")
    assert settings.max_nodes_total == 50
    assert settings.cores_total == ResourceRange(min=2, max=100)
    assert settings.memory_total == ResourceRange(min=4 * GIB, max=400 * GIB)
    assert settings.balance_similar_node_groups is True
    assert settings.balancing_ignore_labels == ("pool",)
    assert settings.auto_discovery == (
        AutoDiscoverySpec(namespace="prod", cluster_name="c1", labels={"tier": "web"}),
    )
    assert settings.node_defaults.scale_down_unneeded_time == timedelta(minutes=1)
    assert settings.node_defaults.scale_down_utilization_threshold == 0.7
    assert settings.new_pod_scale_up_delay == timedelta(seconds=30)
    assert settings.startup_taints == ("example.com/warming",)
    assert settings.consolidation.policy == "WhenEmptyOrUnderutilized"
    assert settings.consolidation.consolidate_after == timedelta(minutes=5)
    assert settings.consolidation.budgets == (
        DisruptionBudget(nodes="2"),
        DisruptionBudget(nodes="50%", reasons=("Empty",)),
    )
    assert settings.candidates_order == "disruption-cost"


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--cores-total=10"], "--cores-total"),
        (["--cores-total=10:2"], "--cores-total"),
        (["--memory-total=a:b"], "--memory-total"),
        (["--expander=cheapest"], "--expander"),
        (["--expander=random,least-waste"], "--expander"),
        (["--scale-down-utilization-threshold=1.5"], "--scale-down-utilization-threshold"),
        (["--max-total-unready-percentage=120"], "--max-total-unready-percentage"),
        (["--max-nodes-total=-1"], "--max-nodes-total"),
        (["--max-drain-parallelism=0"], "--max-drain-parallelism"),
        (["--node-group-auto-discovery=asg:tag=x"], "--node-group-auto-discovery"),
        (["--node-group-auto-discovery=clusterapi:namespace"], "--node-group-auto-discovery"),
        (["--cloud-provider=aws"], "--cloud-provider"),
        (["--startup-taint=bad key"], "--startup-taint"),
        (["--consolidation-budgets=nodes=abc"], "--consolidation-budgets"),
        (["--consolidation-budgets=nodes=1,schedule=0 9 * * *"], "--consolidation-budgets"),
        (
            ["--initial-node-group-backoff-duration=1h", "--max-node-group-backoff-duration=5m"],
            "--max-node-group-backoff-duration",
        ),
    ],
)
def test_nonsense_names_the_flag(argv: list[str], flag: str) -> None:
    with pytest.raises(AutoscalerConfigError, match=flag):
        parse(*argv)


def test_a_malformed_duration_is_refused_by_argparse() -> None:
    parser = argparse.ArgumentParser()
    add_autoscaler_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--scale-down-unneeded-time=ten minutes"])
