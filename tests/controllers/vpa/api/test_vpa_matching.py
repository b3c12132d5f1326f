"""Choosing the VPA for a pod (webhook/vpa_matching.py).

Tables follow upstream's ``matcher_test.go`` (TestGetMatchingVpa: matching selector, orphan
pod, selector mismatch, Off mode, Off plus Auto, Initial mode, no VPAs) and ``api_test.go``
(GetControllingVPAForPod / Stronger: the oldest VPA wins, a tie goes to the smaller name), plus
the rules of the index-based matcher (Off skipped unless a startup boost is set, a VPA whose
selector cannot be fetched is skipped, namespaces must be equal).
"""

from __future__ import annotations

import functools

import pytest

from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.vpa_matching import (
    choose_vpa,
    has_startup_boost,
    target_ref_of,
)
from kubescale.controllers.vpa.api.vpa_policy import update_mode
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector, parse_label_selector
from kubescale.objects.vpa import VerticalPodAutoscaler
from tests import builders

POD = functools.partial(
    builders.pods.typed_pod,
    name="test-pod",
    labels={"app": "test"},
    containers=[builders.pods.container("i-am-container")],
    api_version=None,
)

STS = ControllerRef(api_version="apps/v1", kind="StatefulSet", name="sts", namespace="default")


build_vpa = functools.partial(
    builders.vpas.typed_vpa,
    update_mode="Auto",
    creation_timestamp="2024-01-01T00:00:00Z",
    target=builders.vpas.target_ref(api_version=STS.api_version, kind=STS.kind, name=STS.name),
    spec={},
)
"""A VPA in Auto mode created 2024-01-01 aiming at :data:`STS` (``spec`` always present)."""


def choose(
    the_pod: Pod,
    vpas: list[VerticalPodAutoscaler],
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
            POD(),
            [build_vpa(name="auto-vpa")],
            "app = test",
            STS,
            "auto-vpa",
            id="matching selector",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="auto-vpa")],
            "app = test",
            None,
            None,
            id="matching selector but not match ownerRef (orphan pod)",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="auto-vpa")],
            "app = differentApp",
            STS,
            None,
            id="not matching selector",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="off-vpa", update_mode="Off")],
            "app = test",
            STS,
            None,
            id="off mode",
        ),
        pytest.param(
            POD(),
            [
                build_vpa(name="off-vpa", update_mode="Off"),
                build_vpa(name="auto-vpa", update_mode="Auto"),
            ],
            "app = test",
            STS,
            "auto-vpa",
            id="two vpas one in off mode",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="initial-vpa", update_mode="Initial")],
            "app = test",
            STS,
            "initial-vpa",
            id="initial mode",
        ),
        pytest.param(POD(), [], "app = test", STS, None, id="no vpa objects"),
        pytest.param(
            POD(),
            [build_vpa(name="default-mode", update_mode=None)],
            "app = test",
            STS,
            "default-mode",
            id="no updatePolicy",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="empty-mode", update_mode="")],
            "app = test",
            STS,
            "empty-mode",
            id="empty updateMode is the default",
        ),
        pytest.param(
            POD(),
            [
                build_vpa(
                    name="boosted-off",
                    update_mode="Off",
                    spec={"startupBoost": {"cpu": {"type": "Factor", "factor": 2}}},
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
                build_vpa(
                    name="boosted-container",
                    update_mode="Off",
                    spec={
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
        pytest.param(
            POD(), [build_vpa(name="no-selector")], None, STS, None, id="selector cannot be fetched"
        ),
        pytest.param(
            POD(namespace="other"),
            [build_vpa(name="auto-vpa")],
            "app = test",
            ControllerRef(api_version="apps/v1", kind="StatefulSet", name="sts", namespace="other"),
            None,
            id="pod namespace differs from the VPA's",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="no-target", target=None)],
            "app = test",
            STS,
            None,
            id="VPA without targetRef",
        ),
        pytest.param(
            POD(),
            [
                build_vpa(
                    name="other-target",
                    target=builders.vpas.target_ref(
                        api_version="apps/v1", kind="Deployment", name="sts"
                    ),
                )
            ],
            "app = test",
            STS,
            None,
            id="VPA indexed under another controller",
        ),
        pytest.param(
            POD(),
            [build_vpa(name="everything")],
            "",
            STS,
            "everything",
            id="empty selector selects every pod",
        ),
    ],
)
def test_choose_vpa(
    the_pod: Pod,
    vpas: list[VerticalPodAutoscaler],
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
                build_vpa(name="newer", creation_timestamp="2024-01-02T00:00:00Z"),
                build_vpa(name="older", creation_timestamp="2024-01-01T00:00:00Z"),
            ],
            "older",
            id="earliest creationTimestamp wins",
        ),
        pytest.param(
            [
                build_vpa(name="older", creation_timestamp="2024-01-01T00:00:00Z"),
                build_vpa(name="newer", creation_timestamp="2024-01-01T00:00:01Z"),
            ],
            "older",
            id="one second is enough",
        ),
        pytest.param(
            [
                build_vpa(name="b", creation_timestamp="2024-01-01T00:00:00Z"),
                build_vpa(name="a", creation_timestamp="2024-01-01T00:00:00Z"),
            ],
            "a",
            id="same timestamp: lexicographically smaller name",
        ),
        pytest.param(
            [
                build_vpa(name="B", creation_timestamp="2024-01-01T00:00:00Z"),
                build_vpa(name="a", creation_timestamp="2024-01-01T00:00:00Z"),
            ],
            "B",
            id="name order is byte order (upper case first)",
        ),
        pytest.param(
            [
                build_vpa(
                    name="z-old", update_mode="Off", creation_timestamp="2020-01-01T00:00:00Z"
                ),
                build_vpa(name="a-new", creation_timestamp="2024-01-01T00:00:00Z"),
            ],
            "a-new",
            id="an older Off VPA does not win",
        ),
        pytest.param(
            [
                build_vpa(name="dated", creation_timestamp="2024-01-01T00:00:00Z"),
                build_vpa(name="undated", creation_timestamp=""),
            ],
            "undated",
            id="missing creationTimestamp is the zero time (earliest)",
        ),
    ],
)
def test_stronger_vpa_wins(vpas: list[VerticalPodAutoscaler], expected: str) -> None:
    assert choose(POD(), vpas) == expected
    assert choose(POD(), list(reversed(vpas))) == expected


def test_helpers() -> None:
    assert update_mode(build_vpa(name="x", update_mode=None)) == "Recreate"
    assert update_mode(build_vpa(name="x", update_mode="Initial")) == "Initial"
    assert not has_startup_boost(build_vpa(name="x"))
    assert has_startup_boost(build_vpa(name="x", spec={"startupBoost": {}}))
    assert target_ref_of(build_vpa(name="x")) == STS
    assert target_ref_of(build_vpa(name="x", target=None)) is None
