"""The example manifests: kube-scheduler's configuration with the extender entry, and the
descheduler policy ConfigMap, read by the code that uses them."""

from __future__ import annotations

from pathlib import Path

import yaml

from kubescale.extender.extender_config import DEFAULT_URL_PREFIX
from kubescale.scheduling.policy.policy_loading import load_policy
from kubescale.sim.cluster.scheduler_extenders import ExtenderConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


def test_kube_scheduler_configuration_calls_the_extender() -> None:
    config = yaml.safe_load((EXAMPLES / "kube-scheduler-config.yaml").read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert config["kind"] == "KubeSchedulerConfiguration"
    (entry,) = config["extenders"]
    extender = ExtenderConfig.from_dict(entry)
    assert extender.url_prefix.endswith(DEFAULT_URL_PREFIX)
    assert extender.url_prefix.startswith("https://")
    assert (extender.filter_verb, extender.prioritize_verb) == ("filter", "prioritize")
    assert extender.node_cache_capable
    assert extender.ignorable
    assert extender.timeout == 5.0
    assert entry["enableHTTPS"] is True


def test_the_policy_config_map_holds_a_valid_policy() -> None:
    config_map = yaml.safe_load((EXAMPLES / "descheduler-policy.yaml").read_text())
    assert config_map["kind"] == "ConfigMap"
    policy = load_policy(config_map["data"]["policy.yaml"])
    (profile,) = policy.profiles
    assert profile.deschedule == (
        "RemovePodsViolatingNodeTaints",
        "RemovePodsViolatingNodeAffinity",
        "RemovePodsViolatingInterPodAntiAffinity",
    )
    assert profile.balance == (
        "RemovePodsViolatingTopologySpreadConstraint",
        "LowNodeUtilization",
    )
    assert profile.evictor.node_fit
    assert policy.max_pods_per_node == 5


def test_older_kube_schedulers_have_a_configuration_of_their_version() -> None:
    # kube-scheduler before 1.25 rejects kubescheduler.config.k8s.io/v1 (GA in 1.25, KEP-785):
    # v1beta3 serves 1.23-1.28, v1beta2 1.22-1.27. The three files differ in apiVersion only.
    current = yaml.safe_load((EXAMPLES / "kube-scheduler-config.yaml").read_text())
    for version in ("v1beta3", "v1beta2"):
        path = EXAMPLES / f"kube-scheduler-config-{version}.yaml"
        config = yaml.safe_load(path.read_text())
        assert config["apiVersion"] == f"kubescheduler.config.k8s.io/{version}"
        assert {**config, "apiVersion": current["apiVersion"]} == current
        assert (
            f"kube-scheduler-config-{version}.yaml"
            in (EXAMPLES / "kube-scheduler-config.yaml").read_text()
        )
