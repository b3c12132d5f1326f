"""The requests a pod will have once the VPA is done with it — for the cluster autoscaler.

With ``--coordination one-brain`` the cluster autoscaler binpacks a pod with the requests the
VPA admission webhook would give it (its pure decision, :func:`~.pod_admission.admit_pod`,
through the webhook's cached path), not the stale ones in the pod spec:

* a **pending** pod of a VPA in an updating mode is replaced by the updater (pending pods are
  always evictable) and recreated by the webhook with the recommended requests, so it is
  counted with exactly those — a scale-up is sized for the pods that will actually run;
* a **scheduled** pod is counted with the larger of its requests and the webhook's, per
  resource (``only_raise``): the next VPA update may raise them, and a scale-down must not remove
  the room that update needs; a lowering is not counted before it happens.

Pure: a pod and the webhook's JSON patches in, a pod out (the same object when nothing changes,
so per-pod caches keyed by the object stay valid).

An answer comes with what it was decided from (:class:`AheadAnswer`): the autoscaler keeps a
pod's answer across scans while the pod is the same (its resourceVersion) and the provider says
the answer still holds (:meth:`~.ports.RequestsAhead.still_current`: for the webhook, the VPA
and the other objects its match read are the informers' same objects), instead of asking again
for every pod every scan.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from kubescale.coordination.disruption_ledger import resize_targets
from kubescale.objects.containers import ResourceRequirements
from kubescale.objects.pod import Pod, PodSpec
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import mapping, raw_spec, spec_of

__all__ = ["AheadAnswer", "pod_with_admitted_resources"]

_KINDS: Final[tuple[Literal["requests"], Literal["limits"]]] = ("requests", "limits")


@dataclass(frozen=True, slots=True)
class AheadAnswer:
    """A pod as the VPA will make it, with what that answer was decided from."""

    pod: Pod
    """The pod with the requests the VPA will give it (the pod itself when none)."""
    pod_only: bool = False
    """The answer depends on the pod alone: the same pod always gets it."""
    basis: object | None = None
    """What the provider checks the answer against (its own type); ``None`` with
    ``pod_only`` false: nothing to check it by, ask again."""


def pod_with_admitted_resources(
    pod: Pod,
    patches: Sequence[Mapping[str, Any]],
    *,
    only_raise: bool,
) -> Pod:
    """``pod`` with the container resources ``patches`` set (``only_raise``: only where they
    are larger than the pod's); ``pod`` itself when nothing changes."""
    targets = resize_targets(pod, patches)
    if not targets:
        return pod
    containers: list[Any] = list(mapping(raw_spec(pod)).get("containers") or [])
    changed: dict[int, dict[str, Any]] = {}
    for index, container in enumerate(containers):
        if not isinstance(container, Mapping):  # a malformed entry: left as it is
            continue
        wanted = targets.get(str(container.get("name") or ""))
        if wanted is None:
            continue
        resources = copy.deepcopy(container.get("resources") or ResourceRequirements())
        touched = False
        for kind in _KINDS:
            have = dict(resources.get(kind) or {})
            for resource, quantity in (wanted.get(kind) or {}).items():
                current = have.get(resource)
                if _same_or_skip(current, quantity, only_raise=only_raise):
                    continue
                have[resource] = quantity
                touched = True
            if have:
                resources[kind] = have
        if touched:
            changed[index] = {**container, "resources": resources}
    if not changed:
        return pod
    spec: PodSpec = {
        **spec_of(pod),
        "containers": [changed.get(i, c) for i, c in enumerate(containers)],
    }
    return {**pod, "spec": spec}


def _same_or_skip(current: object, wanted: str, *, only_raise: bool) -> bool:
    """Whether ``wanted`` leaves ``current`` as it is."""
    if current is None:
        return False
    try:
        have, want = Quantity.from_json(current), Quantity.parse(wanted)
    except QuantityError:
        return str(current) == wanted
    return have >= want if only_raise else have == want
