"""Upstream's ``IsMachineDeploymentAndRollingOut`` (clusterapi_nodegroup.go) over the MachineSets
of one MachineDeployment, and the utilization text of upstream's scale-down events."""

from __future__ import annotations

import pytest

from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    REVISION_ANNOTATION,
    rolling_out,
)
from kubescale.controllers.autoscaler.simulator.utilization import Utilization, go_utilization
from tests.builders.cluster_api import typed_machine_set


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        # no MachineSet: not rolling out
        ([], False),
        # one MachineSet at the latest revision (3) with replicas: steady
        ([("3", 3, 3)], False),
        # revision 1 still has 2 replicas next to revision 2: rolling out
        ([("1", 2, 2), ("2", 1, 1)], True),
        # revision 1 scaled to 0 in spec but 1 machine left in status: still rolling out
        ([("1", 0, 1), ("2", 3, 2)], True),
        # revision 1 at 0 in spec and status: the rollout is over
        ([("1", 0, 0), ("2", 3, 3)], False),
        # latest revision is the largest integer (10 > 9), not the last string ("9" > "10")
        ([("10", 3, 3), ("9", 0, 0)], False),
        ([("10", 0, 0), ("9", 1, 1)], True),
        # a MachineSet without the annotation never equals the latest revision ("" != "0"):
        # with replicas it counts as an old one, even alone (upstream compares the strings)
        ([(None, 2, 2)], True),
        ([(None, 0, 0), ("1", 2, 2)], False),
        # a revision that is not an integer: upstream's ParseInt fails, the group's nodes are
        # skipped as candidates
        ([("one", 1, 1)], True),
    ],
)
def test_rolling_out(sets: list[tuple[str | None, int, int]], expected: bool) -> None:
    """Each row's MachineSets: ``(revision annotation or None, spec replicas, status
    replicas)``, the MachineSet named ``ms-<revision>``."""
    machine_sets = [
        typed_machine_set(
            name=f"ms-{name}",
            annotations=None if name is None else {REVISION_ANNOTATION: name},
            spec={"replicas": spec},
            status={"replicas": status},
            api_version=None,
        )
        for name, spec, status in sets
    ]
    assert rolling_out(machine_sets) is expected


@pytest.mark.parametrize(
    ("used", "text"),
    [
        # %v of utilization.Info{CpuUtil, MemUtil, GpuUtil, DynamicResourceUtil, ResourceName,
        # Utilization}: cpu 0.05 > memory 0.03125 → cpu, max 0.05
        (Utilization(cpu=0.05, memory=0.03125), "{0.05 0.03125 0 0 cpu 0.05}"),
        # equal shares: upstream's "cpu > mem" is false → memory
        (Utilization(cpu=0.5, memory=0.5), "{0.5 0.5 0 0 memory 0.5}"),
        # Go prints 0 and 1 without a decimal point, 1e-05 in exponent form
        (Utilization(cpu=0.0, memory=1.0), "{0 1 0 0 memory 1}"),
        (Utilization(cpu=0.00001, memory=0.0), "{1e-05 0 0 0 cpu 1e-05}"),
        # no utilization: the zero value, an empty ResourceName between two spaces
        (None, "{0 0 0 0  0}"),
    ],
)
def test_go_utilization(used: Utilization | None, text: str) -> None:
    assert go_utilization(used) == text
