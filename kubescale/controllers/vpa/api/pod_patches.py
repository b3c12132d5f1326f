"""The JSON patch the VPA admission controller sends back for a pod, exactly as upstream builds it.

Upstream's pod handler (``resource/pod/handler.go``) and its two patch calculators
(``resource/pod/patch/resource_updates.go``, ``observed_containers.go``) produce, in order:

1. ``add /metadata/annotations {}`` when the pod has no annotations map at all (``null`` or
   absent; an empty ``{}`` is a map);
2. per container ``i`` whose resources changed (containers in ``pod.spec.containers`` order):

   * with a CPU startup boost, ``add /metadata/annotations/vpaCpuStartupBoost~1<container>``
     (the container's original resources, :mod:`kubescale.controllers.vpa.api.startup_boost`);
   * ``add /spec/containers/i/resources {}`` when the container's *current* requests and limits
     are both unset;
   * ``add /spec/containers/i/resources/requests {}`` when the current requests are unset and
     there are new requests, then one ``add .../requests/<resource>`` per resource, the value
     being the canonical quantity string (``"250m"``, ``"256Mi"``); the same for ``limits``;

3. ``add /metadata/annotations/vpaUpdates`` = ``"Pod resources updated by <vpa>: container 0:
   <annotations>, cpu request, memory request, cpu limit; container 1: ..."`` when at least one
   container is listed -- each container's capping/limit annotations (from the recommendation
   pipeline, in their order) come first, then ``"<resource> request"`` for every new request
   and ``"<resource> limit"`` for every new limit;
4. ``add /metadata/annotations/vpaObservedContainers`` = the pod's container names joined by
   ``", "``, always.

"Current" requests and limits are read as ``resourcehelpers.ContainerRequestsAndLimits`` does
(the rule of :func:`kubescale.controllers.vpa.api.current_resources.container_requests_and_limits`):
from
``status.containerStatuses[name].resources`` when that status entry has ``resources``, else
from the container spec. A map that is present (even ``{}``) is set; ``null`` or absent is
unset, as Go's JSON decoding distinguishes them. (Upstream takes the nil checks from the status
but writes under ``/spec``; at pod creation there is no status, so the two agree.)

Deliberate differences:

* a container given no request and no limit gets no patch and no entry. Upstream still adds
  ``resources: {}`` to one whose requests and limits are both unset, and that patch alone lists
  it -- ``container 1: `` followed by nothing, an entry that names no update;

and two invisible for the ``cpu``/``memory`` resources VPA manages:

* resource order inside ``requests``/``limits`` is the canonical one (``cpu``, ``memory``, then
  other names sorted); upstream iterates a Go map, whose order is random (its own tests accept
  any order);
* path segments are JSON-pointer escaped (``~`` -> ``~0``, ``/`` -> ``~1``); upstream pastes
  resource and annotation names in raw, which would break on a name containing ``/``.

Pure: takes the pod and the computed resources, returns the patch operations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from kubescale.controllers.vpa.api.current_resources import ordered_names
from kubescale.controllers.vpa.api.pod_resources import ContainerResources, PodResources
from kubescale.controllers.vpa.api.startup_boost import boost_annotation
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.containers import Container
from kubescale.objects.pod import ContainerStatus, Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import Meta, mapping, spec_of, status_of

__all__ = [
    "OBSERVED_CONTAINERS_ANNOTATION",
    "RESOURCE_UPDATES_ANNOTATION",
    "escape_json_pointer",
    "observed_containers_value",
    "pod_patches",
]

RESOURCE_UPDATES_ANNOTATION = "vpaUpdates"  # patch.ResourceUpdatesAnnotation
OBSERVED_CONTAINERS_ANNOTATION = "vpaObservedContainers"  # annotations.VpaObservedContainersLabel
_OBSERVED_SEPARATOR = ", "


def escape_json_pointer(segment: str) -> str:
    """One JSON-pointer reference token (RFC 6901): ``~`` -> ``~0``, then ``/`` -> ``~1``."""
    return segment.replace("~", "~0").replace("/", "~1")


def _containers(pod: Pod) -> list[Container]:
    # as sent: a malformed entry reads as an empty container, a malformed list as none
    containers: object = spec_of(pod).get("containers")
    if not isinstance(containers, list):
        return []
    return cast(list[Container], [c if isinstance(c, Mapping) else {} for c in containers])


def _container_name(container: Container | ContainerStatus) -> str:
    name: object = container.get("name")
    return name if isinstance(name, str) else ""


def _current_lists_set(pod: Pod) -> dict[str, tuple[bool, bool]]:
    """Per container name: are its current requests / limits set (non-nil)?

    resourcehelpers.ContainerRequestsAndLimits, reduced to what the patch needs (the same rule as
    :func:`kubescale.controllers.vpa.api.current_resources.container_requests_and_limits`, without
    parsing the quantities): the first status entry of that name wins when it has ``resources``,
    else the first container of that name in the spec.
    """
    statuses: dict[str, ContainerStatus] = {}
    raw_statuses: object = status_of(pod).get("containerStatuses")  # as sent: entries checked
    for entry in raw_statuses if isinstance(raw_statuses, list) else []:
        if isinstance(entry, Mapping):
            status = cast(ContainerStatus, entry)
            statuses.setdefault(_container_name(status), status)
    result: dict[str, tuple[bool, bool]] = {}
    for container in _containers(pod):
        name = _container_name(container)
        if name in result:
            continue
        applied: object = statuses.get(name, {}).get("resources")
        holder = mapping(applied if isinstance(applied, Mapping) else container.get("resources"))
        result[name] = (
            isinstance(holder.get("requests"), Mapping),
            isinstance(holder.get("limits"), Mapping),
        )
    return result


def observed_containers_value(pod: Pod) -> str:
    """annotations.GetVpaObservedContainersValue: container names joined by ``", "``."""
    return _OBSERVED_SEPARATOR.join(_container_name(c) for c in _containers(pod))


def _add(path: str, value: str | dict[str, str]) -> JsonPatchOperation:
    return {"op": "add", "path": path, "value": value}


def _annotation_patch(name: str, value: str) -> JsonPatchOperation:
    return _add(f"/metadata/annotations/{escape_json_pointer(name)}", value)


def _resource_field_patches(
    *,
    index: int,
    list_name: str,
    noun: str,
    current_set: bool,
    new: Mapping[str, Quantity],
    patches: list[JsonPatchOperation],
    annotations: list[str],
) -> None:
    # appendPatchesAndAnnotations.
    if not current_set and new:
        patches.append(_add(f"/spec/containers/{index}/resources/{list_name}", {}))
    for resource in ordered_names(new):
        path = f"/spec/containers/{index}/resources/{list_name}/{escape_json_pointer(resource)}"
        patches.append(_add(path, str(new[resource])))
        annotations.append(f"{resource} {noun}")


def _container_patches(
    *,
    index: int,
    current: tuple[bool, bool],
    resources: ContainerResources,
    capping_annotations: Sequence[str],
) -> tuple[list[JsonPatchOperation], str]:
    # getContainerPatch, for a container given something to set.
    patches: list[JsonPatchOperation] = []
    if not resources.requests and not resources.limits:
        return patches, ""  # no update: no "resources: {}" and no entry (upstream has both)
    requests_set, limits_set = current
    if not requests_set and not limits_set:
        patches.append(_add(f"/spec/containers/{index}/resources", {}))
    annotations = list(capping_annotations)
    _resource_field_patches(
        index=index,
        list_name="requests",
        noun="request",
        current_set=requests_set,
        new=resources.requests,
        patches=patches,
        annotations=annotations,
    )
    _resource_field_patches(
        index=index,
        list_name="limits",
        noun="limit",
        current_set=limits_set,
        new=resources.limits,
        patches=patches,
        annotations=annotations,
    )
    return patches, f"container {index}: " + ", ".join(annotations)


_NOTHING = ContainerResources()  # upstream's zero ContainerResources: nothing to set


def pod_patches(*, pod: Pod, vpa_name: str, resources: PodResources) -> list[JsonPatchOperation]:
    """The whole patch sequence for a pod a VPA named ``vpa_name`` controls.

    ``resources.containers`` has one entry per ``pod.spec.containers`` entry, in order (empty
    maps: nothing to set); ``resources.annotations`` maps a container name to the annotation
    texts the recommendation pipeline produced for it.
    """
    patches: list[JsonPatchOperation] = []
    annotations: object = Meta(pod).raw.get("annotations")  # as sent: null is no map
    if not isinstance(annotations, Mapping):
        patches.append(_add("/metadata/annotations", {}))

    updates: list[str] = []
    computed = resources.containers
    current = _current_lists_set(pod)
    for index, container in enumerate(_containers(pod)):
        name = _container_name(container)
        container_resources = computed[index] if index < len(computed) else _NOTHING
        boost = resources.boosts.get(index)
        if boost is not None:  # applyCPUStartupBoost's patch comes before the container's
            patches.append(_annotation_patch(boost_annotation(name), boost))
        container_patches, update = _container_patches(
            index=index,
            current=current[name],
            resources=container_resources,
            capping_annotations=resources.annotations.get(name, ()),
        )
        if container_patches:
            patches.extend(container_patches)
            updates.append(update)
    if updates:
        text = f"Pod resources updated by {vpa_name}: " + "; ".join(updates)
        patches.append(_annotation_patch(RESOURCE_UPDATES_ANNOTATION, text))
    patches.append(
        _annotation_patch(OBSERVED_CONTAINERS_ANNOTATION, observed_containers_value(pod))
    )
    return patches
