"""``pod_with_admitted_resources``: a pod with the requests the VPA webhook's patches give it
(module docstring of :mod:`kubescale.coordination.requests_ahead`)."""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.coordination.requests_ahead import pod_with_admitted_resources
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of
from tests import builders


def _set(resource: str, quantity: str) -> dict[str, Any]:
    return {
        "op": "add",
        "path": f"/spec/containers/0/resources/requests/{resource}",
        "value": quantity,
    }


@pytest.mark.parametrize(
    ("only_raise", "expected"),
    [
        # a pending pod gets the webhook's requests: cpu 100m -> 250m, memory 100Mi -> 50Mi
        (False, {"cpu": "250m", "memory": "50Mi"}),
        # a scheduled one the larger per resource: max(100m, 250m) = 250m,
        # max(100Mi, 50Mi) = 100Mi (a lowering is not counted before it happens)
        (True, {"cpu": "250m", "memory": "100Mi"}),
    ],
)
def test_the_pod_gets_the_admitted_requests(only_raise: bool, expected: dict[str, str]) -> None:
    pod = builders.pods.typed_pod(
        containers=[builders.pods.container(requests={"cpu": "100m", "memory": "100Mi"})]
    )
    patches = [_set("cpu", "250m"), _set("memory", "50Mi")]
    ahead = pod_with_admitted_resources(pod, patches, only_raise=only_raise)
    resources = (spec_of(ahead).get("containers") or [])[0].get("resources") or {}
    assert resources.get("requests") == expected
    # the pod itself is left as it was
    assert (spec_of(pod).get("containers") or [])[0].get("resources") == {
        "requests": {"cpu": "100m", "memory": "100Mi"}
    }


@pytest.mark.parametrize(
    ("patches", "only_raise"),
    [
        ([], False),  # nothing admitted
        ([_set("cpu", "0.1")], False),  # 0.1 is 100m: the same quantity
        ([_set("cpu", "50m")], True),  # a lowering of a scheduled pod
        ([{"op": "add", "path": "/metadata/annotations/x", "value": "y"}], False),
    ],
)
def test_nothing_changes_the_same_object(patches: list[dict[str, Any]], only_raise: bool) -> None:
    pod = builders.pods.typed_pod(containers=[builders.pods.container(requests={"cpu": "100m"})])
    assert pod_with_admitted_resources(pod, patches, only_raise=only_raise) is pod


def test_a_malformed_container_entry_is_left_as_it_is() -> None:
    body = builders.pods.pod(containers=[builders.pods.container(name="app")])
    body["spec"]["containers"].append("junk")
    pod = builders.meta.stored_as(body, Pod)
    ahead = pod_with_admitted_resources(pod, [_set("cpu", "250m")], only_raise=False)
    containers: list[Any] = list(spec_of(ahead).get("containers") or [])
    assert containers[1] == "junk"
    assert containers[0]["resources"] == {"requests": {"cpu": "250m"}}
