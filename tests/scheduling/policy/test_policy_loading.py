"""Loading ``descheduler/v1alpha2`` policies as upstream does, errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubescale.scheduling.policy.evictor_args import DefaultEvictorArgs
from kubescale.scheduling.policy.fields import PolicyError
from kubescale.scheduling.policy.policy_loading import (
    load_policy,
    load_policy_file,
)
from kubescale.scheduling.policy.strategy_args import (
    RemovePodsViolatingTopologySpreadConstraintArgs,
)

REFERENCE_EXAMPLE = """
apiVersion: "descheduler/v1alpha2"
kind: "DeschedulerPolicy"
nodeSelector: "node=node1"
maxNoOfPodsToEvictPerNode: 10
maxNoOfPodsToEvictPerNamespace: 10
maxNoOfPodsToEvictTotal: 50
gracePeriodSeconds: 60
evictionFailureEventNotification: false
metricsProviders: [{source: KubernetesMetrics}]
profiles:
- name: default
  pluginConfig:
  - name: DefaultEvictor
    args: {nodeFit: true, minReplicas: 2, podProtections: {extraEnabled: [PodsWithPVC]}}
  - name: LowNodeUtilization
    args:
      thresholds: {cpu: 20, memory: 20, pods: 20}
      targetThresholds: {cpu: 50, memory: 50, pods: 50}
  - name: RemovePodsViolatingNodeAffinity
    args: {nodeAffinityType: [requiredDuringSchedulingIgnoredDuringExecution]}
  plugins:
    deschedule: {enabled: [RemovePodsViolatingNodeAffinity]}
    balance:    {enabled: [LowNodeUtilization]}
"""


def test_the_reference_example() -> None:
    policy = load_policy(REFERENCE_EXAMPLE)
    assert policy.node_selector == "node=node1"
    assert (policy.max_pods_per_node, policy.max_pods_per_namespace, policy.max_pods_total) == (
        10,
        10,
        50,
    )
    assert policy.grace_period_seconds == 60
    profile = policy.profiles[0]
    assert profile.deschedule == ("RemovePodsViolatingNodeAffinity",)
    assert profile.balance == ("LowNodeUtilization",)
    # DefaultEvictor is prepended to filter and preEvictionFilter
    assert profile.filter == ("DefaultEvictor",)
    assert profile.pre_eviction_filter == ("DefaultEvictor",)
    evictor = profile.evictor
    assert evictor.node_fit
    assert evictor.min_replicas == 2
    assert evictor.protections == {
        "PodsWithLocalStorage",
        "SystemCriticalPods",
        "FailedBarePods",
        "DaemonSetPods",
        "PodsWithPVC",
    }


def test_defaults_without_plugin_config() -> None:
    policy = load_policy(
        """
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: spread
  plugins:
    balance: {enabled: [RemovePodsViolatingTopologySpreadConstraint]}
    preevictionfilter: {disabled: [DefaultEvictor]}
"""
    )
    profile = policy.profiles[0]
    assert profile.evictor == DefaultEvictorArgs()
    assert profile.args["RemovePodsViolatingTopologySpreadConstraint"] == (
        RemovePodsViolatingTopologySpreadConstraintArgs(
            constraints=("DoNotSchedule",), topology_balance_node_fit=True
        )
    )
    # the lowercase struct tag is accepted; listing DefaultEvictor as disabled keeps it out
    assert profile.pre_eviction_filter == ()
    assert profile.filter == ("DefaultEvictor",)
    assert policy.max_pods_total is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: descheduler/v1alpha1\nkind: DeschedulerPolicy\nstrategies: {}\n",
            "apiVersion: descheduler/v1alpha1 is no longer supported",
        ),
        ("apiVersion: v1\nkind: DeschedulerPolicy\n", "apiVersion: must be descheduler/v1alpha2"),
        ("apiVersion: descheduler/v1alpha2\nkind: Policy\n", "kind: must be DeschedulerPolicy"),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofile: []\n",
            "profile: unknown field",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
            "maxNoOfPodsToEvictTotal: -1\n",
            "maxNoOfPodsToEvictTotal: must be >= 0, got -1",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nnodeSelector: 'a in (b'\n",
            "nodeSelector: invalid label selector",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- plugins: {}\n",
            "profiles[0].name: is required",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n"
            "- name: a\n- name: a\n",
            "profiles[1].name: duplicate profile name 'a'",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: a\n"
            "  pluginConfig: [{name: RemoveEverything}]\n",
            "profiles[a].pluginConfig[0].name: unknown plugin 'RemoveEverything'",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: a\n"
            "  plugins: {balance: {enabled: [RemovePodsViolatingNodeTaints]}}\n",
            "profiles[a].plugins.balance.enabled[0]: plugin RemovePodsViolatingNodeTaints does not "
            "implement the balance extension point",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles:\n- name: a\n"
            "  plugins: {balance: {enabled: [LowNodeUtilization]}}\n",
            "profiles[a].pluginConfig[LowNodeUtilization].args.thresholds: no resource threshold",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nmetricsProviders:\n"
            "- {source: Prometheus}\n",
            "metricsProviders[0].prometheus.url: is required",
        ),
        (
            "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nmetricsProviders:\n"
            "- {source: KubernetesMetrics}\n- {source: KubernetesMetrics}\n",
            "metricsProviders[1].source: metrics provider KubernetesMetrics is set more than once",
        ),
        ("apiVersion: descheduler/v1alpha2\nkind: [", "not valid YAML"),
    ],
)
def test_errors_name_the_field(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(text, source="policy.yaml")
    assert str(caught.value).startswith("policy.yaml: ")
    assert message in str(caught.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="failed to read policy config file"):
        load_policy_file(tmp_path / "missing.yaml")
    path = tmp_path / "policy.yaml"
    path.write_text(REFERENCE_EXAMPLE)
    assert load_policy_file(path).profiles[0].name == "default"
