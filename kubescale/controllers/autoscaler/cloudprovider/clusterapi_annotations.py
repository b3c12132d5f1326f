"""How upstream's clusterapi provider reads a scalable resource (MachineDeployment/MachineSet).

``cloudprovider/clusterapi/clusterapi_utils.go``, ``clusterapi_unstructured.go``,
``clusterapi_nodegroup.go`` (reference §4.1):

* **size bounds**: ``cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size``
  (``strconv.Atoi``: sign and ASCII digits only, within int64 — :mod:`kubescale.base.go_strconv`);
  missing counts as 0; a non-integer, an out-of-range or negative value or max < min is an
  error naming the annotation. A resource with max 0 is not a node group;
* **node group id**: ``<Kind>/<namespace>/<name>``;
* **scale from zero**: ``capacity.cluster-autoscaler.kubernetes.io/{cpu,memory,ephemeral-disk}``
  (quantities), ``maxPods`` and ``gpu-count`` (integers; maxPods defaults to 110), ``gpu-type``,
  ``labels`` (``k=v,k2=v2``) and ``taints`` (``k=v:Effect,...``). A group can scale from zero
  when cpu and memory are both known;
* **per-group options**: ``cluster.x-k8s.io/autoscaling-options-<key>`` for
  ``scaledownutilizationthreshold``, ``scaledowngpuutilizationthreshold`` (floats),
  ``scaledownunneededtime``, ``scaledownunreadytime``, ``maxnodeprovisiontime``,
  ``maxnodestartuptime`` (Go durations); a malformed value is ignored (upstream logs it);
* **instances**: a Machine's ``spec.providerID``, or a stand-in id while it has none:
  ``deleting-machine-<ns>_<name>`` (being deleted), ``failed-machine-<ns>_<name>``
  (``status.failureMessage``: provisioning failed), ``pending-machine-<ns>_<name>`` (no
  ``status.nodeRef`` yet). A failed machine without a node is an instance with an error
  (``OtherErrorClass``, ``ProvisioningFailed``), which backs the group off.

kubescale's addition: ``autoscaling.kubescale.dev/price-per-hour`` on the resource, the price
the ``price`` expander and consolidation use.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any, Final

from kubescale.base.go_strconv import GoAtoiError, go_atoi
from kubescale.base.go_time import parse_duration
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    ErrorClass,
    Instance,
    InstanceErrorInfo,
    InstanceState,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import NodeGroupDefaults
from kubescale.objects.machine import Machine
from kubescale.objects.machine_set import MachineSet, ScalableResource
from kubescale.objects.node import Taint
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "CAPACITY_PREFIX",
    "DELETE_MACHINE_ANNOTATION",
    "DEPLOYMENT_NAME_LABEL",
    "MAX_SIZE_ANNOTATION",
    "MIN_SIZE_ANNOTATION",
    "OPTIONS_PREFIX",
    "PRICE_ANNOTATION",
    "REVISION_ANNOTATION",
    "AnnotationError",
    "ScaleFromZero",
    "group_id",
    "machine_instance",
    "node_group_options",
    "parse_taints",
    "rolling_out",
    "scale_from_zero",
    "scaling_bounds",
]

CAPI_GROUP: Final = "cluster.x-k8s.io"
MIN_SIZE_ANNOTATION: Final = f"{CAPI_GROUP}/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE_ANNOTATION: Final = f"{CAPI_GROUP}/cluster-api-autoscaler-node-group-max-size"
DELETE_MACHINE_ANNOTATION: Final = f"{CAPI_GROUP}/delete-machine"
PAUSED_ANNOTATION: Final = f"{CAPI_GROUP}/paused"
REVISION_ANNOTATION: Final = "machinedeployment.clusters.x-k8s.io/revision"
"""The MachineDeployment revision a MachineSet implements (set by Cluster API's
MachineDeployment controller)."""
DEPLOYMENT_NAME_LABEL: Final = f"{CAPI_GROUP}/deployment-name"
"""The label Cluster API puts on the MachineSets (and Machines) of a MachineDeployment."""
OPTIONS_PREFIX: Final = f"{CAPI_GROUP}/autoscaling-options-"
CAPACITY_PREFIX: Final = "capacity.cluster-autoscaler.kubernetes.io/"
PRICE_ANNOTATION: Final = "autoscaling.kubescale.dev/price-per-hour"
DEFAULT_MAX_PODS: Final = 110
_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_FLOAT_OPTIONS: Final = {
    "scaledownutilizationthreshold": "scale_down_utilization_threshold",
    "scaledowngpuutilizationthreshold": "scale_down_gpu_utilization_threshold",
}
_DURATION_OPTIONS: Final = {
    "scaledownunneededtime": "scale_down_unneeded_time",
    "scaledownunreadytime": "scale_down_unready_time",
    "maxnodeprovisiontime": "max_node_provision_time",
    "maxnodestartuptime": "max_node_startup_time",
}


class AnnotationError(ValueError):
    """A malformed annotation; the message names it and its value."""


def group_id(resource: ScalableResource) -> str:
    """``path.Join(kind, namespace, name)``."""
    meta = Meta(resource).raw
    return f"{resource.get('kind', '')}/{meta.get('namespace', '')}/{meta.get('name', '')}"


def _annotations(resource: ScalableResource) -> Mapping[str, str]:
    return Meta(resource).raw.get("annotations") or {}


def _go_int(key: str, raw: str) -> int:
    """``strconv.Atoi`` as upstream parses these annotations: an optional sign and ASCII
    digits only, within int64 (:mod:`kubescale.base.go_strconv`)."""
    try:
        return go_atoi(raw)
    except GoAtoiError as err:
        if err.reason == "invalid syntax":
            raise AnnotationError(f"annotation {key}={raw!r} is not an integer") from None
        raise AnnotationError(
            f"annotation {key}={raw!r} is not an integer: value out of range"
        ) from None


def _atoi(annotations: Mapping[str, str], key: str) -> int:
    raw = annotations.get(key)
    if raw is None:
        return 0
    value = _go_int(key, raw)
    if value < 0:
        raise AnnotationError(f"annotation {key}={raw!r} is negative")
    return value


def scaling_bounds(resource: ScalableResource) -> tuple[int, int]:
    """``parseScalingBounds``: (min, max)."""
    annotations = _annotations(resource)
    low = _atoi(annotations, MIN_SIZE_ANNOTATION)
    high = _atoi(annotations, MAX_SIZE_ANNOTATION)
    if high < low:
        raise AnnotationError(
            f"annotation {MAX_SIZE_ANNOTATION}={high} is below {MIN_SIZE_ANNOTATION}={low}"
        )
    return low, high


def parse_taints(text: str) -> list[Taint]:
    """``k=v:Effect,k2:Effect`` (the taints capacity annotation)."""
    taints: list[Taint] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key_value, colon, effect = item.rpartition(":")
        if not colon or effect not in _EFFECTS or not key_value:
            raise AnnotationError(
                f"annotation {CAPACITY_PREFIX}taints: {item!r} is not <key>=<value>:<effect>"
            )
        key, _, value = key_value.partition("=")
        taints.append({"key": key, "value": value, "effect": effect})
    return taints


def _parse_labels(text: str) -> dict[str, str]:
    """``k=v,k2=v2``; items without ``=`` are skipped, as upstream does."""
    labels: dict[str, str] = {}
    for item in text.split(","):
        key, eq, value = item.partition("=")
        if eq:
            labels[key] = value
    return labels


@dataclass(frozen=True, kw_only=True)
class ScaleFromZero:
    """The capacity, labels and taints a new node of the group is announced with."""

    capacity: Mapping[str, str]
    """Canonical quantities by resource name (cpu, memory, ephemeral-storage, pods, GPUs)."""
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]


def _quantity(annotations: Mapping[str, str], key: str) -> Quantity | None:
    raw = annotations.get(CAPACITY_PREFIX + key)
    if not raw:
        return None
    try:
        return Quantity.parse(raw)
    except QuantityError:
        raise AnnotationError(
            f"annotation {CAPACITY_PREFIX}{key}={raw!r} is not a quantity"
        ) from None


def _integer(annotations: Mapping[str, str], key: str) -> int | None:
    raw = annotations.get(CAPACITY_PREFIX + key)
    if not raw:
        return None
    return _go_int(CAPACITY_PREFIX + key, raw)


def _managed_labels(resource: ScalableResource) -> dict[str, str]:
    """``getManagedNodeLabelsFromLabels``: template labels Cluster API propagates to nodes."""
    template = spec_of(resource).get("template") or {}
    managed: dict[str, str] = {}
    for key, value in Meta(template).labels.items():
        domain = key.partition("/")[0] if "/" in key else ""
        if domain.endswith(("node-role.kubernetes.io", "node-restriction.kubernetes.io")) or (
            domain.endswith("node.cluster.x-k8s.io")
        ):
            managed[key] = value
    return managed


def scale_from_zero(resource: ScalableResource) -> ScaleFromZero | None:
    """``InstanceCapacity``/``Labels``/``Taints``; ``None`` when cpu or memory is unknown."""
    annotations = _annotations(resource)
    cpu = _quantity(annotations, "cpu")
    memory = _quantity(annotations, "memory")
    disk = _quantity(annotations, "ephemeral-disk")
    max_pods = _integer(annotations, "maxPods")
    gpu_count = _integer(annotations, "gpu-count")
    taints_text = annotations.get(CAPACITY_PREFIX + "taints", "")
    taints = parse_taints(taints_text) if taints_text else []
    template = spec_of(resource).get("template") or {}
    # the CRD's structural schema makes every entry an object (no malformed entry to skip)
    merged = [t.copy() for t in spec_of(template).get("taints") or ()]
    for taint in taints:  # annotation taints override spec taints with the same key+effect
        for index, existing in enumerate(merged):
            if existing.get("key") == taint["key"] and existing.get("effect") == taint["effect"]:
                merged[index] = taint
                break
        else:
            merged.append(taint)
    if cpu is None or memory is None or cpu.is_zero() or memory.is_zero():
        return None
    capacity = {"cpu": str(cpu), "memory": str(memory)}
    if disk is not None and not disk.is_zero():
        capacity["ephemeral-storage"] = str(disk)
    gpu_type = annotations.get(CAPACITY_PREFIX + "gpu-type", "")
    if gpu_count and gpu_type:
        capacity[gpu_type] = str(gpu_count)
    capacity["pods"] = str(max_pods or DEFAULT_MAX_PODS)
    labels = _managed_labels(resource)
    labels.update(_parse_labels(annotations.get(CAPACITY_PREFIX + "labels", "")))
    return ScaleFromZero(capacity=capacity, labels=labels, taints=tuple(merged))


def node_group_options(
    resource: ScalableResource, defaults: NodeGroupDefaults
) -> tuple[NodeGroupDefaults, list[str]]:
    """``GetOptions(defaults)`` and the malformed option annotations (ignored)."""
    annotations = _annotations(resource)
    changes: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in annotations.items():
        if not key.startswith(OPTIONS_PREFIX):
            continue
        name = key[len(OPTIONS_PREFIX) :]
        if name in _FLOAT_OPTIONS:
            try:
                changes[_FLOAT_OPTIONS[name]] = float(value)
            except ValueError:
                problems.append(f"annotation {key}={value!r} is not a number; ignored")
        elif name in _DURATION_OPTIONS:
            try:
                changes[_DURATION_OPTIONS[name]] = timedelta(seconds=parse_duration(value))
            except argparse.ArgumentTypeError:
                problems.append(f"annotation {key}={value!r} is not a duration; ignored")
    return (replace(defaults, **changes) if changes else defaults), problems


def price_per_hour(resource: ScalableResource) -> float | None:
    raw = _annotations(resource).get(PRICE_ANNOTATION)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise AnnotationError(f"annotation {PRICE_ANNOTATION}={raw!r} is not a number") from None
    if value < 0:
        raise AnnotationError(f"annotation {PRICE_ANNOTATION}={raw!r} is negative")
    return value


def machine_instance(machine: Machine, node_provider_id: str | None) -> Instance | None:
    """The instance of a Machine (``findScalableResourceProviderIDs`` + ``Nodes``).

    ``node_provider_id`` is the providerID of the Node its ``status.nodeRef`` names, if that
    Node exists. ``None``: the machine references something that is not a Node.
    """
    meta = Meta(machine).raw
    namespace, name = meta.get("namespace", ""), meta.get("name", "")
    status = status_of(machine)
    provider_id = spec_of(machine).get("providerID") or ""
    deleting = bool(meta.get("deletionTimestamp"))
    if provider_id:
        return Instance(
            id=provider_id, state=InstanceState.DELETING if deleting else InstanceState.RUNNING
        )
    if deleting:
        return Instance(id=f"deleting-machine-{namespace}_{name}", state=InstanceState.DELETING)
    if status.get("failureMessage") is not None:
        node_ref = status.get("nodeRef")
        error = None
        if not node_ref:
            error = InstanceErrorInfo(
                error_class=ErrorClass.OTHER,
                code="ProvisioningFailed",
                message="Machine provisioning failed",
            )
        return Instance(
            id=f"failed-machine-{namespace}_{name}", state=InstanceState.CREATING, error=error
        )
    node_ref = status.get("nodeRef")
    if not node_ref:
        return Instance(id=f"pending-machine-{namespace}_{name}", state=InstanceState.CREATING)
    if node_ref.get("kind", "Node") != "Node":
        return None
    if node_provider_id:
        return Instance(id=node_provider_id, state=InstanceState.RUNNING)
    return None


def is_real_provider_id(instance_id: str) -> bool:
    """A providerID of a real machine (not one of the stand-in ids)."""
    return not instance_id.startswith(("pending-machine-", "failed-machine-", "deleting-machine-"))


def rolling_out(machine_sets: Sequence[MachineSet]) -> bool:
    """``IsMachineDeploymentAndRollingOut`` (``clusterapi_nodegroup.go``) over the MachineSets
    of one MachineDeployment: the latest revision is the largest integer
    ``machinedeployment.clusters.x-k8s.io/revision`` (0 when none carries it); a MachineSet at
    another revision — one without the annotation included — with ``spec.replicas`` or
    ``status.replicas`` above 0 means a rollout is under way. A revision that is not an integer
    is an error upstream, and the group's nodes are skipped as candidates: here too it counts
    as rolling out."""
    latest = 0
    for machine_set in machine_sets:
        annotations = Meta(machine_set).raw.get("annotations") or {}
        if REVISION_ANNOTATION not in annotations:
            continue
        try:
            revision = go_atoi(str(annotations[REVISION_ANNOTATION]))
        except GoAtoiError:
            return True
        latest = max(latest, revision)
    for machine_set in machine_sets:
        annotations = Meta(machine_set).raw.get("annotations") or {}
        if annotations.get(REVISION_ANNOTATION) == str(latest):
            continue  # the MachineSet of the latest revision
        for replicas in (
            spec_of(machine_set).get("replicas"),
            status_of(machine_set).get("replicas"),
        ):
            if isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > 0:
                return True
    return False
