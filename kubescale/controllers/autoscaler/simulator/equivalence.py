"""Pod equivalence groups: pods a simulation may treat as one (``scaleup/equivalence``).

``BuildPodGroups``: pods are grouped by their controller's uid and a semantically equal spec;
a controller keeps at most 10 distinct groups (pods of an 11th kind become groups of their
own); pods without a controller, and DaemonSet pods, are groups of one. Groups keep the order
in which their first pod came. The spec comparison ignores ``nodeName`` and the projected
service-account token volumes (``kube-api-access-*``), which differ between otherwise equal
pods (``PodSpecSemanticallyEqual``).

:func:`equivalence_key` gives the same answer as a value, for the "a similar pod did not fit"
shortcut of the scheduling simulation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from kubescale.controllers.autoscaler.model.pod_facts import controller_of
from kubescale.objects.containers import Container
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of

__all__ = ["MAX_GROUPS_PER_CONTROLLER", "build_pod_groups", "equivalence_key"]

MAX_GROUPS_PER_CONTROLLER: Final = 10
_TOKEN_VOLUME_PREFIX: Final = "kube-api-access-"


def _spec_text(pod: Pod) -> str:
    original = spec_of(pod)
    spec: dict[str, object] = dict(original)
    spec.pop("nodeName", None)
    volumes = original.get("volumes")
    if volumes:
        spec["volumes"] = [
            v for v in volumes if not str(v.get("name", "")).startswith(_TOKEN_VOLUME_PREFIX)
        ]
    containers: list[Container] = []
    for original_container in original.get("containers") or ():
        container = original_container
        mounts = container.get("volumeMounts")
        if mounts:
            container = original_container.copy()
            container["volumeMounts"] = [
                m for m in mounts if not str(m.get("name", "")).startswith(_TOKEN_VOLUME_PREFIX)
            ]
        containers.append(container)
    spec["containers"] = containers
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def equivalence_key(pod: Pod) -> tuple[str, str] | None:
    """(controller uid, spec) of a replicated pod; ``None`` for pods that are their own group."""
    owner = controller_of(pod)
    if owner is None or owner.kind == "DaemonSet" or not owner.uid:
        return None
    return owner.uid, _spec_text(pod)


def build_pod_groups(pods: Sequence[Pod]) -> list[list[Pod]]:
    """``BuildPodGroups`` (module docstring)."""
    groups: list[list[Pod]] = []
    by_controller: dict[str, list[tuple[str, int]]] = {}
    for pod in pods:
        key = equivalence_key(pod)
        if key is None:
            groups.append([pod])
            continue
        uid, spec = key
        known = by_controller.setdefault(uid, [])
        match = next((index for text, index in known if text == spec), None)
        if match is not None:
            groups[match].append(pod)
            continue
        if len(known) < MAX_GROUPS_PER_CONTROLLER:
            known.append((spec, len(groups)))
        groups.append([pod])
    return groups
