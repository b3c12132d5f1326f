"""Cluster API's MachineDeployment → MachineSet → Machine controllers and a simulated provider.

One :class:`MachineDeploymentController` per configured node group reconciles, each step, the
chain a cluster-autoscaler with ``--cloud-provider=clusterapi`` drives:

* **MachineDeployment** ``<group>`` (created on the first step, with the
  ``cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size`` annotations and the
  scale-from-zero capacity annotations): its ``spec.replicas`` — set through ``/scale`` by the
  autoscaler — is copied to its one MachineSet; ``status`` carries replicas, readyReplicas,
  availableReplicas, ``selector`` (what the Scale subresource reports) and the phase
  (ScalingUp, ScalingDown, Running).
* **MachineSet** ``<group>-<suffix>`` (revision ``1``: annotation
  ``machinedeployment.clusters.x-k8s.io/revision``): creates Machines up to ``spec.replicas``;
  above it, deletes first the Machines annotated ``cluster.x-k8s.io/delete-machine`` (how the
  autoscaler picks the node to remove), then the newest.
* **Machine** ``<set>-<suffix>`` (ownerReference to its MachineSet, finalizer
  ``machine.cluster.x-k8s.io``): phase Provisioning; after ``provisioning_delay`` the
  infrastructure is up — ``spec.providerID: sim://<machine>``, phase Provisioned — and its
  Node registers Ready (event ``node-added``); once the Node is seen, ``status.nodeRef`` and
  phase Running. A deleted Machine turns Deleting, its Node is cordoned, and after
  ``deprovisioning_delay`` the pods still on the node are deleted (grace 0: the machine is
  gone), then the Node (event ``node-removed``), then the finalizer.

Objects are written only when they change. Names take their random suffixes from the injected
``random.Random`` so a seeded run names its machines the same every time.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    PRICE_ANNOTATION,
    REVISION_ANNOTATION,
)
from kubescale.kube.resources import MACHINE_DEPLOYMENTS, MACHINE_SETS, MACHINES
from kubescale.objects.selectors import label_selector_from_dict
from kubescale.sim.apiserver.server import ApiServer

from .machine_lifecycle import (
    MACHINE_FINALIZER,
    SET_NAME_LABEL,
    ZONE_ANNOTATION,
    MachineLifecycle,
    NodeChange,
)
from .node_templates import MachineDeploymentGroup, capacity_annotations

__all__ = [
    "CLUSTER_NAME_LABEL",
    "DELETE_MACHINE_ANNOTATION",
    "DEPLOYMENT_NAME_LABEL",
    "MACHINE_FINALIZER",
    "MAX_SIZE_ANNOTATION",
    "MIN_SIZE_ANNOTATION",
    "SET_NAME_LABEL",
    "MachineDeploymentController",
    "MachineDeploymentGroup",
    "NodeChange",
]

CAPI_VERSION: Final = "cluster.x-k8s.io/v1beta1"
MIN_SIZE_ANNOTATION: Final = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE_ANNOTATION: Final = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
DELETE_MACHINE_ANNOTATION: Final = "cluster.x-k8s.io/delete-machine"
CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"
DEPLOYMENT_NAME_LABEL: Final = "cluster.x-k8s.io/deployment-name"
_SUFFIX_ALPHABET: Final = "bcdfghjklmnpqrstvwxz2456789"


def _suffix(rng: random.Random) -> str:
    return "".join(rng.choice(_SUFFIX_ALPHABET) for _ in range(5))


def _owner(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class MachineDeploymentController:
    """Reconciles one :class:`MachineDeploymentGroup` on ``api.store`` (see the module doc)."""

    def __init__(
        self,
        api: ApiServer,
        group: MachineDeploymentGroup,
        *,
        rng: random.Random,
        next_address: Callable[[], str],
    ) -> None:
        self._store = api.store
        self.group = group
        self._rng = rng
        self._machines = MachineLifecycle(api.store, group, next_address=next_address)
        self._started = False
        self._machines_made = 0
        self._labels = {
            CLUSTER_NAME_LABEL: group.cluster_name,
            DEPLOYMENT_NAME_LABEL: group.name,
        }

    @property
    def _api_version(self) -> str:
        """The version the API server serves Cluster API at: v1beta1 (built in), or the
        storage version of CRDs loaded over it (``capi_v1beta2_crds``: v1beta2)."""
        served = self._store.registry.by_plural(
            MACHINE_DEPLOYMENTS.group, MACHINE_DEPLOYMENTS.plural
        )
        return served.group_version if served is not None else CAPI_VERSION

    # ---------------------------------------------------------------------------- step

    def step(self, now: datetime, changes: list[NodeChange]) -> None:
        group = self.group
        first = not self._started  # the machines made now exist when the run starts
        self._started = True
        md = self._store.peek(MACHINE_DEPLOYMENTS, group.name, group.namespace)
        if md is None:
            if not first:
                return  # deleted by someone: the group is gone
            md = self._create_deployment()
        replicas = int((md.get("spec") or {}).get("replicas") or 0)
        machine_set = self._ensure_machine_set(md, replicas)
        machines = [
            m
            for m in self._store.snapshots(MACHINES, group.namespace)
            if (m["metadata"].get("labels") or {}).get(SET_NAME_LABEL)
            == machine_set["metadata"]["name"]
        ]
        alive = [m for m in machines if not m["metadata"].get("deletionTimestamp")]
        if len(alive) < replicas:
            for _ in range(replicas - len(alive)):
                self._create_machine(machine_set, now, ready_at_once=first, changes=changes)
        elif len(alive) > replicas:
            for victim in _deletion_order(alive)[: len(alive) - replicas]:
                self._store.delete(MACHINES, victim["metadata"]["name"], group.namespace)
        for machine in list(self._store.snapshots(MACHINES, group.namespace)):
            labels = machine["metadata"].get("labels") or {}
            if labels.get(SET_NAME_LABEL) == machine_set["metadata"]["name"]:
                self._machines.reconcile(machine, now, changes)
        self._update_statuses(md, machine_set)

    # ----------------------------------------------------------------- deployment, set

    def _create_deployment(self) -> dict[str, Any]:
        group = self.group
        annotations = {
            MIN_SIZE_ANNOTATION: str(group.min_size),
            MAX_SIZE_ANNOTATION: str(group.max_size),
            PRICE_ANNOTATION: repr(group.template.price_per_hour),
            **capacity_annotations(group.template),
        }
        body = {
            "apiVersion": self._api_version,
            "kind": "MachineDeployment",
            "metadata": {
                "name": group.name,
                "namespace": group.namespace,
                "labels": {CLUSTER_NAME_LABEL: group.cluster_name},
                "annotations": annotations,
            },
            "spec": {
                "clusterName": group.cluster_name,
                "replicas": group.replicas,
                "selector": {"matchLabels": dict(self._labels)},
                "template": {
                    "metadata": {"labels": dict(self._labels)},
                    "spec": self._machine_spec(),
                },
            },
        }
        return self._store.create(body)

    def _machine_spec(self) -> dict[str, Any]:
        return {
            "clusterName": self.group.cluster_name,
            "version": "v1.33.0",
            "bootstrap": {"dataSecretName": f"{self.group.name}-bootstrap"},
            "infrastructureRef": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                "kind": "SimMachineTemplate",
                "name": self.group.name,
                "namespace": self.group.namespace,
            },
        }

    def _ensure_machine_set(self, md: Mapping[str, Any], replicas: int) -> Mapping[str, Any]:
        group = self.group
        for machine_set in self._store.snapshots(MACHINE_SETS, group.namespace):
            labels = machine_set["metadata"].get("labels") or {}
            if labels.get(DEPLOYMENT_NAME_LABEL) != group.name:
                continue
            if int((machine_set.get("spec") or {}).get("replicas") or 0) != replicas:
                updated = copy.deepcopy(machine_set)
                updated["spec"]["replicas"] = replicas
                return self._store.update(updated)
            return machine_set
        name = f"{group.name}-{_suffix(self._rng)}"
        set_labels = {**self._labels, SET_NAME_LABEL: name}
        return self._store.create(
            {
                "apiVersion": self._api_version,
                "kind": "MachineSet",
                "metadata": {
                    "name": name,
                    "namespace": group.namespace,
                    "labels": dict(set_labels),
                    # Cluster API's MachineDeployment controller stamps the revision a
                    # MachineSet implements; a cluster autoscaler compares it to tell a rollout
                    "annotations": {REVISION_ANNOTATION: "1"},
                    "ownerReferences": [_owner(md)],
                },
                "spec": {
                    "clusterName": group.cluster_name,
                    "replicas": replicas,
                    "deletePolicy": "Newest",
                    "selector": {"matchLabels": dict(set_labels)},
                    "template": {"metadata": {"labels": set_labels}, "spec": self._machine_spec()},
                },
            }
        )

    # ------------------------------------------------------------------------ machines

    def _create_machine(
        self,
        machine_set: Mapping[str, Any],
        now: datetime,
        *,
        ready_at_once: bool,
        changes: list[NodeChange],
    ) -> None:
        group = self.group
        set_name = machine_set["metadata"]["name"]
        name = f"{set_name}-{_suffix(self._rng)}"
        while self._store.peek(MACHINES, name, group.namespace) is not None:
            name = f"{set_name}-{_suffix(self._rng)}"
        zone = group.template.zone(self._machines_made)
        self._machines_made += 1
        created = self._store.create(
            {
                "apiVersion": self._api_version,
                "kind": "Machine",
                "metadata": {
                    "name": name,
                    "namespace": group.namespace,
                    "labels": {**self._labels, SET_NAME_LABEL: set_name},
                    "annotations": {ZONE_ANNOTATION: zone},
                    "ownerReferences": [_owner(machine_set)],
                    "finalizers": [MACHINE_FINALIZER],
                },
                "spec": {**self._machine_spec(), "failureDomain": zone},
            }
        )
        self._machines.set_status(created, {"phase": "Provisioning", "bootstrapReady": True})
        if ready_at_once:  # the group's first machines exist when the simulation starts
            self._machines.provision(
                self._store.peek(MACHINES, name, group.namespace) or created, now, changes
            )

    # -------------------------------------------------------------------------- status

    def _update_statuses(self, md: Mapping[str, Any], machine_set: Mapping[str, Any]) -> None:
        group = self.group
        machines = [
            m
            for m in self._store.snapshots(MACHINES, group.namespace)
            if (m["metadata"].get("labels") or {}).get(SET_NAME_LABEL)
            == machine_set["metadata"]["name"]
        ]
        current = len(machines)
        ready = sum(1 for m in machines if (m.get("status") or {}).get("phase") == "Running")
        for kind, obj in ((MACHINE_SETS, machine_set), (MACHINE_DEPLOYMENTS, md)):
            stored = self._store.peek(kind, obj["metadata"]["name"], group.namespace)
            if stored is None:
                continue
            wanted = int((stored.get("spec") or {}).get("replicas") or 0)
            status: dict[str, Any] = {
                "selector": str(
                    label_selector_from_dict((stored.get("spec") or {}).get("selector"))
                ),
                "replicas": current,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "observedGeneration": stored["metadata"].get("generation", 1),
            }
            if kind is MACHINE_DEPLOYMENTS:
                status["updatedReplicas"] = current
                status["unavailableReplicas"] = max(0, wanted - ready)
                # the MachineDeployment controller's phase: ScalingDown while more machines
                # exist than wanted, ScalingUp while fewer are ready, else Running
                status["phase"] = (
                    "ScalingDown"
                    if current > wanted
                    else "ScalingUp"
                    if ready < wanted
                    else "Running"
                )
            else:
                status["fullyLabeledReplicas"] = current
            if status != stored.get("status"):
                self._store.update_status({**stored, "status": status})


def _deletion_order(machines: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """MachineSet's ``Newest`` delete policy, with machines marked for deletion first."""

    def key(machine: Mapping[str, Any]) -> tuple[int, str, str]:
        meta = machine["metadata"]
        marked = DELETE_MACHINE_ANNOTATION in (meta.get("annotations") or {})
        return (0 if marked else 1, _negated(meta.get("creationTimestamp") or ""), meta["name"])

    return sorted(machines, key=key)


def _negated(timestamp: str) -> str:
    """A sort key that orders RFC 3339 timestamps newest first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in timestamp)
