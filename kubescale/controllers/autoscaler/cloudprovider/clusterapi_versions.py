"""Which Cluster API group and version the clusterapi provider reads and writes.

Upstream's ``newMachineController`` (``cloudprovider/clusterapi/clusterapi_controller.go``):

* the group is ``cluster.x-k8s.io``, or the ``CAPI_GROUP`` environment variable;
* the version is the ``CAPI_VERSION`` environment variable, else the group's
  ``preferredVersion`` in the API server's discovery (``ServerGroups``); a group the server does
  not serve is an error: ``could not find preferred version for CAPI group "<g>": failed to find
  API group "<g>"``;
* MachineDeployments, MachineSets and Machines are then read at that version (current Cluster
  API serves ``v1beta2`` as the preferred version, ``v1beta1`` besides).

Where kubescale reads them, the two versions agree: annotations, ``spec.replicas``,
``spec.selector``, ``spec.clusterName``, ``spec.providerID``, ``status.nodeRef.name`` (v1beta2
keeps only the name), ``status.replicas`` and the ``/scale`` subresource. ``status.failureMessage``
moved under ``status.deprecated.v1beta1`` in v1beta2; upstream still reads
``status.failureMessage`` only, and so does kubescale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubescale.kube.api_paths import InvalidPathSegment, validate_group, validate_version
from kubescale.kube.resources import ResourceType, resource_type

__all__ = [
    "CAPI_GROUP_ENV",
    "CAPI_VERSION_ENV",
    "DEFAULT_CAPI_GROUP",
    "CapiTypes",
    "CapiVersionError",
    "capi_types",
    "preferred_version",
    "validated_group_version",
]

DEFAULT_CAPI_GROUP: Final = "cluster.x-k8s.io"
CAPI_GROUP_ENV: Final = "CAPI_GROUP"
CAPI_VERSION_ENV: Final = "CAPI_VERSION"


class CapiVersionError(ValueError):
    """The Cluster API group or version cannot be used; the message is one line."""


@dataclass(frozen=True)
class CapiTypes:
    """The three kinds the provider reads, at one group version."""

    machine_deployments: ResourceType
    machine_sets: ResourceType
    machines: ResourceType

    @property
    def group_version(self) -> str:
        return self.machines.group_version

    def scalable(self, kind: str) -> ResourceType | None:
        """The type of a node group's scalable resource kind."""
        return {
            "MachineDeployment": self.machine_deployments,
            "MachineSet": self.machine_sets,
        }.get(kind)


def capi_types(group: str, version: str) -> CapiTypes:
    """MachineDeployments and MachineSets (``status``, ``scale``) and Machines (``status``)."""
    return CapiTypes(
        machine_deployments=resource_type(
            group,
            version,
            "MachineDeployment",
            "machinedeployments",
            subresources=("status", "scale"),
            short_names=("md",),
        ),
        machine_sets=resource_type(
            group,
            version,
            "MachineSet",
            "machinesets",
            subresources=("status", "scale"),
            short_names=("ms",),
        ),
        machines=resource_type(
            group, version, "Machine", "machines", subresources=("status",), short_names=("ma",)
        ),
    )


def validated_group_version(environ: Mapping[str, str]) -> tuple[str, str]:
    """``(group, version)`` from ``CAPI_GROUP`` / ``CAPI_VERSION`` (unset or empty: the default
    group, and a version to discover); a value that cannot be a group or version is an error
    naming the variable."""
    group = environ.get(CAPI_GROUP_ENV) or DEFAULT_CAPI_GROUP
    version = environ.get(CAPI_VERSION_ENV) or ""
    try:
        validate_group(group)
    except InvalidPathSegment as err:
        raise CapiVersionError(f"{CAPI_GROUP_ENV}: {err}") from None
    if version:
        try:
            validate_version(version)
        except InvalidPathSegment as err:
            raise CapiVersionError(f"{CAPI_VERSION_ENV}: {err}") from None
    return group, version


def preferred_version(group_list: Any, group: str) -> str:
    """``getAPIGroupPreferredVersion``: the group's ``preferredVersion.version`` in an
    ``APIGroupList``; :class:`CapiVersionError` with upstream's text when it is not there."""
    groups = group_list.get("groups") if isinstance(group_list, dict) else None
    for entry in groups if isinstance(groups, list) else []:
        if not isinstance(entry, dict) or entry.get("name") != group:
            continue
        preferred = entry.get("preferredVersion")
        version = preferred.get("version") if isinstance(preferred, dict) else None
        if isinstance(version, str) and version:
            try:
                return validate_version(version)
            except InvalidPathSegment:
                break
    raise CapiVersionError(
        f'could not find preferred version for CAPI group "{group}": failed to find API group '
        f'"{group}"'
    )
