"""``core/v1.Container`` and ``ResourceRequirements``: shared by pods, pod templates and the
VPA's view of a pod."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import ResourceList

__all__ = [
    "Container",
    "ContainerPort",
    "ContainerResizePolicy",
    "ResourceClaim",
    "ResourceRequirements",
    "VolumeMount",
]


class ResourceClaim(TypedDict, total=False):
    """``core/v1.ResourceClaim`` (``resources.claims[]``)."""

    name: str
    request: str


class ResourceRequirements(TypedDict, total=False):
    """``core/v1.ResourceRequirements``."""

    requests: ResourceList
    limits: ResourceList
    claims: list[ResourceClaim]


class ContainerPort(TypedDict, total=False):
    """``core/v1.ContainerPort`` (host ports matter to scheduling)."""

    containerPort: int
    hostPort: int
    hostIP: str
    protocol: str


class ContainerResizePolicy(TypedDict, total=False):
    """``core/v1.ContainerResizePolicy`` (in-place resize)."""

    resourceName: str
    restartPolicy: str


class VolumeMount(TypedDict, total=False):
    """``core/v1.VolumeMount``."""

    name: str
    mountPath: str


class Container(TypedDict, total=False):
    """``core/v1.Container``: the fields kubescale reads (``restartPolicy`` is set on sidecar
    init containers)."""

    name: str
    image: str
    resources: ResourceRequirements
    restartPolicy: str
    resizePolicy: list[ContainerResizePolicy]
    ports: list[ContainerPort]
    volumeMounts: list[VolumeMount]
