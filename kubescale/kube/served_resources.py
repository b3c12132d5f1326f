"""Which resources the API server serves, from discovery: the start-up check of each system's API.

A system whose collections include a resource the server does not serve — the cluster
autoscaler's Cluster API MachineDeployments on a cluster without Cluster API — cannot work, and
its informers would fail with ``404`` forever. ``serve`` asks discovery once at start-up
(:func:`unserved`) and does not start such a system, naming what is missing.

The group version's ``APIResourceList`` (``GET /api/v1``, ``GET /apis/<group>/<version>``, one
request per group version) answers for every resource in it, as ``kubectl api-resources`` and
client-go's discovery client read it: ``404`` means the group version is not served at all
(the CRD is not installed); otherwise a resource is served when its plural is among the list's
``resources[].name``. Any other failure (a 5xx, 403, no answer) proves nothing: the resources
count as served, and the informers report what happens next (an informer whose list gets
``404`` later is *absent*, :attr:`kubescale.kube.informer.Informer.absent`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.resources import ResourceType

__all__ = ["api_name", "unserved"]

log = component_logger("kube.discovery")


def api_name(resource: ResourceType) -> str:
    """``plural.group/version`` (``plural/v1`` in the core group), as an operator looks it up."""
    group = f".{resource.group}" if resource.group else ""
    return f"{resource.plural}{group}/{resource.version}"


async def unserved(client: KubeClient, resources: Iterable[ResourceType]) -> set[ResourceType]:
    """The ``resources`` the server is known not to serve (module docstring)."""
    by_group_version: dict[tuple[str, str], list[ResourceType]] = {}
    for resource in resources:
        by_group_version.setdefault((resource.group, resource.version), []).append(resource)
    missing: set[ResourceType] = set()
    for (group, version), wanted in by_group_version.items():
        document_of = ResourceType(
            group=group, version=version, kind="APIResourceList", plural="", namespaced=False
        )
        try:
            document = await client.request(
                verb="get", method="GET", resource=document_of, path=document_of.base_path()
            )
        except KubeApiError as err:
            if err.not_found:
                missing.update(wanted)
                continue
            _cannot_tell(group, version, err.message)
            continue
        except KubeError as err:
            _cannot_tell(group, version, str(err))
            continue
        served = _plurals(document)
        missing.update(r for r in wanted if r.plural not in served)
    return missing


def _plurals(document: Any) -> set[str]:
    entries = document.get("resources") if isinstance(document, dict) else None
    return {
        str(entry.get("name") or "")
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict)
    }


def _cannot_tell(group: str, version: str, error: str) -> None:
    log.warning(
        "discovery failed; assuming the group version is served",
        extra={
            "fields": {"group_version": f"{group}/{version}" if group else version, "error": error}
        },
    )
