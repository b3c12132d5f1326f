"""Cluster API's Machine controller with a simulated infrastructure provider behind it.

One :class:`MachineLifecycle` per node group moves each of its Machines along:

* **Provisioning** (set when the MachineSet creates it) until ``provisioning_delay`` seconds
  after its creation — and, when the group has a ``stock``, until fewer than ``stock`` of its
  machines are up (``out_of_stock="fail"``: the machine fails instead, phase Failed with
  ``failureReason: InsufficientCapacity``, and never gets a node);
* **Provisioned**: the provider's machine is up — ``spec.providerID: sim://<machine>``,
  ``status.infrastructureReady``, an InternalIP — and its kubelet registers the Node (named like
  the Machine, Ready; a ``node-added`` change);
* **Running** once the Node is seen: ``status.nodeRef``;
* **Deleting** once deleted (the ``machine.cluster.x-k8s.io`` finalizer keeps it): the Node is
  cordoned; after ``deprovisioning_delay`` the pods still bound to it are deleted with grace 0
  (the machine is gone, nothing runs them any more), the Node is deleted (a ``node-removed``
  change) and the finalizer released, which removes the Machine.

Writes happen only on these transitions.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kubescale.kube.resources import MACHINES, NODES, PODS
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.storage import format_time, parse_time
from kubescale.sim.apiserver.store import ObjectStore

from .node_templates import MachineDeploymentGroup, build_node

__all__ = [
    "MACHINE_FINALIZER",
    "SET_NAME_LABEL",
    "ZONE_ANNOTATION",
    "MachineLifecycle",
    "NodeChange",
]

MACHINE_FINALIZER: Final = "machine.cluster.x-k8s.io"
SET_NAME_LABEL: Final = "cluster.x-k8s.io/set-name"
GROUP_LABEL: Final = "cluster.x-k8s.io/deployment-name"
ZONE_ANNOTATION: Final = "sim.kubescale.dev/zone"
"""The zone the simulated provider places a machine in (also its ``spec.failureDomain``)."""


@dataclass(frozen=True)
class NodeChange:
    """A node that appeared or went away this step."""

    added: bool
    node: str
    group: str
    detail: str


class MachineLifecycle:
    """The Machines of one :class:`MachineDeploymentGroup` (see the module docstring)."""

    def __init__(
        self,
        store: ObjectStore,
        group: MachineDeploymentGroup,
        *,
        next_address: Callable[[], str],
    ) -> None:
        self._store = store
        self.group = group
        self._next_address = next_address

    def _peek(self, name: str) -> Mapping[str, Any]:
        found = self._store.peek(MACHINES, name, self.group.namespace)
        assert found is not None
        return found

    def set_status(self, machine: Mapping[str, Any], changes: Mapping[str, Any]) -> None:
        """Merge ``changes`` into the Machine's status; no write when nothing changes."""
        status = {**(machine.get("status") or {}), **changes}
        if status != machine.get("status"):
            self._store.update_status({**machine, "status": status})

    def reconcile(
        self, machine: Mapping[str, Any], now: datetime, changes: list[NodeChange]
    ) -> None:
        meta = machine["metadata"]
        name = meta["name"]
        phase = (machine.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            self._delete(machine, now, changes)
            return
        if phase == "Provisioning":
            created = parse_time(meta["creationTimestamp"])
            if (now - created).total_seconds() >= self.group.provisioning_delay:
                if self._in_stock():
                    self.provision(machine, now, changes)
                elif self.group.out_of_stock == "fail":
                    self.set_status(
                        machine,
                        {
                            "phase": "Failed",
                            "failureReason": "InsufficientCapacity",
                            "failureMessage": "no capacity left for "
                            + self.group.template.instance_type,
                        },
                    )
        elif phase == "Provisioned" and self._store.peek(NODES, name) is not None:
            self.set_status(
                machine,
                {
                    "phase": "Running",
                    "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": name},
                },
            )

    def _in_stock(self) -> bool:
        stock = self.group.stock
        if stock is None:
            return True
        up = sum(
            1
            for m in self._store.snapshots(MACHINES, self.group.namespace)
            if (m["metadata"].get("labels") or {}).get(GROUP_LABEL) == self.group.name
            and not m["metadata"].get("deletionTimestamp")
            and (m.get("status") or {}).get("phase") in ("Provisioned", "Running")
        )
        return up < stock

    def provision(
        self, machine: Mapping[str, Any], now: datetime, changes: list[NodeChange]
    ) -> None:
        """The provider's machine is up: providerID, then the kubelet registers the Node."""
        group = self.group
        meta = machine["metadata"]
        name = meta["name"]
        zone = (meta.get("annotations") or {}).get(ZONE_ANNOTATION) or group.template.zone(0)
        provider_id = f"sim://{name}"
        address = self._next_address()
        updated: dict[str, Any] = copy.deepcopy(dict(machine))
        updated["spec"]["providerID"] = provider_id
        stored = self._store.update(updated)
        self.set_status(
            stored,
            {
                "phase": "Provisioned",
                "infrastructureReady": True,
                "addresses": [{"type": "InternalIP", "address": address}],
            },
        )
        self._store.create(
            build_node(
                name=name,
                template=group.template,
                zone=zone,
                provider_id=provider_id,
                address=address,
                annotations={
                    "cluster.x-k8s.io/cluster-name": group.cluster_name,
                    "cluster.x-k8s.io/cluster-namespace": group.namespace,
                    "cluster.x-k8s.io/machine": name,
                    "cluster.x-k8s.io/owner-kind": "MachineSet",
                    "cluster.x-k8s.io/owner-name": str(
                        (meta.get("labels") or {}).get(SET_NAME_LABEL, "")
                    ),
                },
                ready_since=format_time(now),
            )
        )
        changes.append(
            NodeChange(
                added=True,
                node=name,
                group=group.name,
                detail=f"group {group.name} ({group.template.instance_type}, {zone})",
            )
        )

    def _delete(self, machine: Mapping[str, Any], now: datetime, changes: list[NodeChange]) -> None:
        meta = machine["metadata"]
        name = meta["name"]
        node = self._store.peek(NODES, name)
        if (machine.get("status") or {}).get("phase") != "Deleting":
            self.set_status(machine, {"phase": "Deleting"})
            machine = self._peek(name)
            if node is not None and not (node.get("spec") or {}).get("unschedulable"):
                cordoned = copy.deepcopy(node)
                cordoned["spec"]["unschedulable"] = True
                node = self._store.update(cordoned)
        since = (now - parse_time(meta["deletionTimestamp"])).total_seconds()
        if node is not None and since < self.group.deprovisioning_delay:
            return
        if node is not None:
            for pod in list(self._store.snapshots(PODS)):
                if (pod.get("spec") or {}).get("nodeName") == name:
                    with contextlib.suppress(ApiError):  # gone meanwhile
                        self._store.delete(
                            PODS,
                            pod["metadata"]["name"],
                            pod["metadata"]["namespace"],
                            grace_period_seconds=0,
                        )
            self._store.delete(NODES, name)
            changes.append(
                NodeChange(added=False, node=name, group=self.group.name, detail="machine deleted")
            )
        released: dict[str, Any] = copy.deepcopy(dict(machine))
        released["metadata"]["finalizers"] = [
            f for f in released["metadata"].get("finalizers") or [] if f != MACHINE_FINALIZER
        ]
        self._store.update(released)
