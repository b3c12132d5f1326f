"""An expansion option: "add N nodes to group G and these pods will run" (``expander.Option``)."""

from __future__ import annotations

from dataclasses import dataclass

from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import NodeGroup
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of
from kubescale.scheduling.pod_resources import container_amounts

__all__ = ["ExpansionOption", "regular_requests"]


@dataclass(frozen=True, kw_only=True)
class ExpansionOption:
    group: NodeGroup
    node_count: int
    pods: tuple[Pod, ...]
    similar: tuple[NodeGroup, ...] = ()
    debug: str = ""


def regular_requests(pod: Pod) -> tuple[int, int]:
    """(cpu millicores, memory bytes) requested by the regular containers — what the
    expanders sum (``resourcesForPods``: init containers and overhead are not counted)."""
    cpu = memory = 0
    for container in spec_of(pod).get("containers") or ():
        requests = container_amounts(container)
        cpu += requests.get("cpu", 0)
        memory += requests.get("memory", 0)
    return cpu, memory
