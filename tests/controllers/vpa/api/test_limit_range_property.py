"""Property: the webhook never makes a pod uncreatable (issue 19).

For random pods, LimitRanges and VPAs (recommendations, minAllowed/maxAllowed,
controlledValues, update and container modes, the node-fit option), every pod the API server
would accept unmutated is still accepted after kubescale's patch.

"Would accept" is the in-process API server's model of kube-apiserver
(:mod:`kubescale.sim.apiserver.limit_ranger`, :mod:`kubescale.sim.apiserver.pod_validation`) --
written from upstream's LimitRanger and pod validation, independently of the webhook's code:

1. the pod as posted gets the API defaults (a request defaults to its limit) and LimitRanger's
   defaults; that is what the webhook sees;
2. unmutated, it must pass pod validation and LimitRanger's checks (else the example is
   discarded: the API server refuses it whatever the webhook does);
3. the webhook's patch is applied, the API defaults again, and the same checks must pass.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.pod_admission import admit_pod
from kubescale.kube.resources import PODS
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.sim.apiserver.limit_ranger import (
    default_limit_range_items,
    limit_range_violation,
    with_limit_range_defaults,
)
from kubescale.sim.apiserver.patching import apply_json_patch
from kubescale.sim.apiserver.pod_validation import pod_resource_causes
from kubescale.sim.apiserver.strategy import apply_defaults
from tests.builders.meta import stored_as

RESOURCES = ("cpu", "memory")
NAMES = ("app", "sidecar", "proxy")

# Values around the bounds that matter: zero, tiny, odd (rounding), typical, large; as numbers
# (milli-CPUs, bytes) so generators can order them, printed as the API writes them.
MI = 1024 * 1024
CPU_MILLI = (0, 1, 3, 10, 33, 50, 100, 150, 250, 333, 500, 1000, 1500, 4000)
MEMORY_BYTES = (0, MI, 3 * MI + 7, 16 * MI, 64 * MI, 100 * MI + 1, 128 * MI, 200 * MI,
                256 * MI, 333 * MI, 512 * MI, 1024 * MI, 4096 * MI)  # fmt: skip
VALUES = {"cpu": st.sampled_from(CPU_MILLI), "memory": st.sampled_from(MEMORY_BYTES)}


def text(resource: str, number: int) -> str:
    if resource == "cpu":
        return f"{number}m" if number % 1000 else str(number // 1000)
    return str(number)


def quantity(resource: str, draw: Any) -> str:
    return text(resource, draw(VALUES[resource]))


@st.composite
def resource_lists(draw: st.DrawFn) -> dict[str, str]:
    return {r: quantity(r, draw) for r in RESOURCES if draw(st.booleans())}


@st.composite
def containers(draw: st.DrawFn, name: str) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    for field in ("requests", "limits"):
        values = draw(st.one_of(st.none(), resource_lists()))
        if values is not None:
            resources[field] = values
    container: dict[str, Any] = {"name": name, "image": "app"}
    if draw(st.booleans()) or resources:
        container["resources"] = resources
    return container


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(min_value=1, max_value=3))
    spec: dict[str, Any] = {"containers": [draw(containers(NAMES[i])) for i in range(count)]}
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        spec["initContainers"] = [draw(containers("init"))]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": "default"},
        "spec": spec,
    }


@st.composite
def limit_range_items(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    item: dict[str, Any] = {"type": kind}
    fields = ("min", "defaultRequest", "default", "max") if kind == "Container" else ("min", "max")
    for resource in RESOURCES:
        # min <= defaultRequest <= default <= max, each one present or not.
        values = sorted(draw(VALUES[resource]) for _ in fields)
        for field, value in zip(fields, values, strict=True):
            if draw(st.integers(min_value=0, max_value=2)) == 0:
                item.setdefault(field, {})[resource] = text(resource, value)
        if draw(st.integers(min_value=0, max_value=3)) == 0:
            ratio = draw(st.sampled_from(["1", "1500m", "2", "4", "10"]))
            item.setdefault("maxLimitRequestRatio", {})[resource] = ratio
    return item


@st.composite
def limit_ranges(draw: st.DrawFn) -> list[dict[str, Any]]:
    ranges = []
    for index in range(draw(st.integers(min_value=0, max_value=2))):
        kinds = draw(st.sampled_from([["Container"], ["Pod"], ["Container", "Pod"]]))
        limit_range: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": {"name": f"limits-{index}", "namespace": "default"},
            "spec": {"limits": [draw(limit_range_items(kind)) for kind in kinds]},
        }
        default_limit_range_items(limit_range)  # as the API server stores it
        ranges.append(limit_range)
    return ranges


@st.composite
def policies(draw: st.DrawFn) -> list[dict[str, Any]]:
    result = []
    for name in draw(st.lists(st.sampled_from([*NAMES, "*"]), unique=True, max_size=3)):
        policy: dict[str, Any] = {"containerName": name}
        if draw(st.booleans()):
            policy["mode"] = draw(st.sampled_from(["Auto", "Off"]))
        if draw(st.booleans()):
            policy["controlledValues"] = draw(
                st.sampled_from(["RequestsAndLimits", "RequestsOnly"])
            )
        if draw(st.booleans()):
            policy["controlledResources"] = draw(
                st.sampled_from([["cpu"], ["memory"], list(RESOURCES)])
            )
        for resource in RESOURCES:
            low, high = sorted(draw(VALUES[resource]) for _ in range(2))
            if draw(st.booleans()):
                policy.setdefault("minAllowed", {})[resource] = text(resource, low)
            if draw(st.booleans()):
                policy.setdefault("maxAllowed", {})[resource] = text(resource, high)
        result.append(policy)
    return result


@st.composite
def vpas(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "resourcePolicy": {"containerPolicies": draw(policies())},
    }
    mode = draw(st.sampled_from([None, "Off", "Initial", "Recreate", "Auto", "InPlaceOrRecreate"]))
    if mode is not None:
        spec["updatePolicy"] = {"updateMode": mode}
    entries = []
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=3)):
        entry: dict[str, Any] = {"containerName": name}
        for bound in ("target", "lowerBound", "upperBound"):
            entry[bound] = draw(resource_lists())
        entries.append(entry)
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "web-vpa", "namespace": "default"},
        "spec": spec,
        "status": {"recommendation": {"containerRecommendations": entries}},
    }


def as_the_webhook_sees_it(posted: dict[str, Any], ranges: list[dict[str, Any]]) -> dict[str, Any]:
    """Decode defaults, then LimitRanger's mutating step (it runs before the webhooks)."""
    defaulted = copy.deepcopy(posted)
    apply_defaults(PODS, defaulted)
    return with_limit_range_defaults(defaulted, ranges)


def refusal(pod: dict[str, Any], ranges: list[dict[str, Any]]) -> str | None:
    """Why the API server would refuse ``pod`` as the webhooks left it, or ``None``."""
    validated = copy.deepcopy(pod)
    apply_defaults(PODS, validated)
    causes = pod_resource_causes(validated)
    if causes:
        return "; ".join(f"{field}: {message}" for _, field, message in causes)
    return limit_range_violation(validated, ranges)


NODES = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {"cpu": st.sampled_from(["100m", "1", "4"]), "memory": st.sampled_from(["256Mi", "8Gi"])}
    ),
)


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(posted=pods(), ranges=limit_ranges(), vpa=vpas(), node=NODES)
def test_a_pod_the_api_server_accepts_unmutated_is_accepted_after_the_patch(
    posted: dict[str, Any],
    ranges: list[dict[str, Any]],
    vpa: dict[str, Any],
    node: dict[str, str] | None,
) -> None:
    seen = as_the_webhook_sees_it(posted, ranges)
    assume(refusal(seen, ranges) is None)
    admission = admit_pod(  # the JSON the simulated API server holds, as the webhook types it
        pod=stored_as(seen, Pod),
        vpa=stored_as(vpa, VerticalPodAutoscaler),
        limit_ranges=[stored_as(r, LimitRange) for r in ranges],
        largest_node_allocatable=(
            {name: Quantity.parse(value) for name, value in node.items()} if node else None
        ),
    )
    patched = apply_json_patch(seen, admission.patches)
    assert refusal(patched, ranges) is None, admission.patches
