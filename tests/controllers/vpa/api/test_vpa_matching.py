"""Choosing the VPA for a pod (webhook/vpa_matching.py).

Tables follow upstream's ``matcher_test.go`` (TestGetMatchingVpa: matching selector, orphan
pod, selector mismatch, Off mode, Off plus Auto, Initial mode, no VPAs) and ``api_test.go``
(GetControllingVPAForPod / Stronger: the oldest VPA wins, a tie goes to the smaller name), plus
the rules of the index-based matcher (Off skipped unless a startup boost is set, a VPA whose
selector cannot be fetched is skipped, namespaces must be equal).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.vpa_matching import (
    choose_vpa,
    has_startup_boost,
    target_ref_of,
)
from kubescale.controllers.vpa.api.vpa_policy import update_mode
from kubescale.objects.selectors import LabelSelector, parse_label_selector
from tests import builders

POD = functools.partial(
    builders.pods.pod,
    name="test-pod",
    labels={"app": "test"},
    containers=[builders.pods.container("i-am-container")],
    api_version=None,
)

STS = ControllerRef(api_version="apps/v1", kind="StatefulSet", name="sts", namespace="default")


def vpa(
    name: str,
    mode: str | None = "Auto",
    *,
    created: str = "2024-01-01T00:00:00Z",
    namespace: str = "default",
    target: ControllerRef | None = STS,
    spec_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if target is not None:
        spec["targetRef"] = {
            "apiVersion": target.api_version,
            "kind": target.kind,
            "name": target.name,
        }
    if mode is not None:
        spec["updatePolicy"] = {"updateMode": mode}
    spec.update(spec_extra or {})
    return {
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": created},
        "spec": spec,
    }


def choose(
    the_pod: dict[str, Any],
    vpas: list[dict[str, Any]],
    selector: str | None = "app = test",
    controller: ControllerRef | None = STS,
) -> str | None:
    fetched: list[ControllerRef] = []

    def selector_of(target: ControllerRef) -> LabelSelector | None:
        fetched.append(target)
        return parse_label_selector(selector) if selector is not None else None

    chosen = choose_vpa(
        the_pod, controller=controller, candidate_vpas=vpas, selector_of=selector_of
    )
    for target in fetched:  # selectors are fetched for the VPA's own targetRef
        assert target == STS or target.namespace != STS.namespace
    return None if chosen is None else chosen["metadata"]["name"]


@pytest.mark.parametrize(
    ("the_pod", "vpas", "selector", "controller", "expected"),
    [
        pytest.param(
            POD(), [vpa("auto-vpa")], "app = test", STS, "auto-vpa", id="matching selector"
        ),
        pytest.param(
            POD(),
            [vpa("auto-vpa")],
            "app = test",
            None,
            None,
            id="matching selector but not match ownerRef (orphan pod)",
        ),
        pytest.param(
            POD(), [vpa("auto-vpa")], "app = differentApp", STS, None, id="not matching selector"
        ),
        pytest.param(POD(), [vpa("off-vpa", "Off")], "app = test", STS, None, id="off mode"),
        pytest.param(
            POD(),
            [vpa("off-vpa", "Off"), vpa("auto-vpa", "Auto")],
            "app = test",
            STS,
            "auto-vpa",
            id="two vpas one in off mode",
        ),
        pytest.param(
            POD(),
            [vpa("initial-vpa", "Initial")],
            "app = test",
            STS,
            "initial-vpa",
            id="initial mode",
        ),
        pytest.param(POD(), [], "app = test", STS, None, id="no vpa objects"),
        pytest.param(
            POD(),
            [vpa("default-mode", None)],
            "app = test",
            STS,
            "default-mode",
            id="no updatePolicy",
        ),
        pytest.param(
            POD(),
            [vpa("empty-mode", "")],
            "app = test",
            STS,
            "empty-mode",
            id="empty updateMode is the default",
        ),
        pytest.param(
            POD(),
            [
                vpa(
                    "boosted-off",
                    "Off",
                    spec_extra={"startupBoost": {"cpu": {"type": "Factor", "factor": 2}}},
                )
            ],
            "app = test",
            STS,
            "boosted-off",
            id="off mode with pod-level startup boost is kept",
        ),
        pytest.param(
            POD(),
            [
                vpa(
                    "boosted-container",
                    "Off",
                    spec_extra={
                        "resourcePolicy": {
                            "containerPolicies": [
                                {
                                    "containerName": "c",
                                    "startupBoost": {"cpu": {"type": "Factor", "factor": 2}},
                                }
                            ]
                        }
                    },
                )
            ],
            "app = test",
            STS,
            "boosted-container",
            id="off mode with container startup boost is kept",
        ),
        pytest.param(POD(), [vpa("no-selector")], None, STS, None, id="selector cannot be fetched"),
        pytest.param(
            POD(namespace="other"),
            [vpa("auto-vpa")],
            "app = test",
            ControllerRef(api_version="apps/v1", kind="StatefulSet", name="sts", namespace="other"),
            None,
            id="pod namespace differs from the VPA's",
        ),
        pytest.param(
            POD(),
            [vpa("no-target", target=None)],
            "app = test",
            STS,
            None,
            id="VPA without targetRef",
        ),
        pytest.param(
            POD(),
            [vpa("other-target", target=ControllerRef("apps/v1", "Deployment", "sts", "default"))],
            "app = test",
            STS,
            None,
            id="VPA indexed under another controller",
        ),
        pytest.param(
            POD(), [vpa("everything")], "", STS, "everything", id="empty selector selects every pod"
        ),
    ],
)
def test_choose_vpa(
    the_pod: dict[str, Any],
    vpas: list[dict[str, Any]],
    selector: str | None,
    controller: ControllerRef | None,
    expected: str | None,
) -> None:
    assert choose(the_pod, vpas, selector, controller) == expected


@pytest.mark.parametrize(
    ("vpas", "expected"),
    [
        pytest.param(
            [
                vpa("newer", created="2024-01-02T00:00:00Z"),
                vpa("older", created="2024-01-01T00:00:00Z"),
            ],
            "older",
            id="earliest creationTimestamp wins",
        ),
        pytest.param(
            [
                vpa("older", created="2024-01-01T00:00:00Z"),
                vpa("newer", created="2024-01-01T00:00:01Z"),
            ],
            "older",
            id="one second is enough",
        ),
        pytest.param(
            [vpa("b", created="2024-01-01T00:00:00Z"), vpa("a", created="2024-01-01T00:00:00Z")],
            "a",
            id="same timestamp: lexicographically smaller name",
        ),
        pytest.param(
            [vpa("B", created="2024-01-01T00:00:00Z"), vpa("a", created="2024-01-01T00:00:00Z")],
            "B",
            id="name order is byte order (upper case first)",
        ),
        pytest.param(
            [
                vpa("z-old", "Off", created="2020-01-01T00:00:00Z"),
                vpa("a-new", created="2024-01-01T00:00:00Z"),
            ],
            "a-new",
            id="an older Off VPA does not win",
        ),
        pytest.param(
            [vpa("dated", created="2024-01-01T00:00:00Z"), vpa("undated", created="")],
            "undated",
            id="missing creationTimestamp is the zero time (earliest)",
        ),
    ],
)
def test_stronger_vpa_wins(vpas: list[dict[str, Any]], expected: str) -> None:
    assert choose(POD(), vpas) == expected
    assert choose(POD(), list(reversed(vpas))) == expected


def test_helpers() -> None:
    assert update_mode(vpa("x", None)) == "Recreate"
    assert update_mode(vpa("x", "Initial")) == "Initial"
    assert not has_startup_boost(vpa("x"))
    assert has_startup_boost(vpa("x", spec_extra={"startupBoost": {}}))
    assert target_ref_of(vpa("x")) == STS
    assert target_ref_of(vpa("x", target=None)) is None
