"""CPU startup boost at admission (gate ``CPUStartupBoost``): upstream's
``resource_updates.go`` (``applyCPUStartupBoost``) on the pod of ``test_pod_admission``.

The pod: ``app`` requests cpu 100m / memory 100Mi with limits 200m / 200Mi, ``sidecar`` requests
cpu 50m with a memory limit of 128Mi. The VPA recommends app 250m / 256Mi, sidecar 25m / 64Mi.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kubescale.controllers.vpa.api.pod_admission import PodAdmissionError, admit_pod
from kubescale.controllers.vpa.api.startup_boost import (
    StartupBoostSettings,
    boosted_cpu,
    expired_boost_annotations,
    original_resources_value,
)
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import StartupBoostCPU
from tests.controllers.vpa.api.test_pod_admission import (
    EMPTY_ANNOTATIONS,
    FULL_PATCH,
    NO_CPU_LIMIT,
    OBSERVED,
    add,
    build_pod,
    build_vpa,
    updates,
)

q = Quantity.parse
ON = StartupBoostSettings()
APP_ORIGINAL = (
    '{"requests":{"cpu":"100m","memory":"100Mi"},"limits":{"cpu":"200m","memory":"200Mi"}}'
)
SIDECAR_ORIGINAL = '{"requests":{"cpu":"50m"},"limits":{"memory":"128Mi"}}'


def boost(kind: str = "Factor", **cpu: Any) -> dict[str, Any]:
    return {"cpu": {"type": kind, **cpu}}


def app_boost(value: str) -> JsonPatchOperation:
    return add("/metadata/annotations/vpaCpuStartupBoost~1app", value)


def sidecar_boost(value: str) -> JsonPatchOperation:
    return add("/metadata/annotations/vpaCpuStartupBoost~1sidecar", value)


@pytest.mark.parametrize(
    ("base", "cpu", "cap", "expected"),
    [
        # Factor: int64(float64(250) * 3) = 750m
        ("250m", {"type": "Factor", "factor": 3}, None, "750m"),
        # type unset means Factor
        ("250m", {"factor": 2}, None, "500m"),
        # Quantity: 250m + 1 core (1000m) = 1250m
        ("250m", {"type": "Quantity", "quantity": "1"}, None, "1250m"),
        # MilliValue rounds up: 0.5m -> 1m; 100m + 1m = 101m
        ("100m", {"type": "Quantity", "quantity": "0.0005"}, None, "101m"),
        # capped at --max-allowed-cpu-boost (the cap as written)
        ("2", {"type": "Factor", "factor": 4}, "4", "4"),
        ("2", {"type": "Factor", "factor": 2}, "4", "4"),  # 4000m, not above: NewMilliQuantity
        # a zero cap is no cap
        ("2", {"type": "Factor", "factor": 4}, "0", "8"),
    ],
)
def test_boosted_cpu_table(base: str, cpu: StartupBoostCPU, cap: str | None, expected: str) -> None:
    boosted = boosted_cpu(q(base), {"cpu": cpu}, max_allowed=q(cap) if cap else None)
    assert str(boosted) == expected


@pytest.mark.parametrize(
    ("cpu", "message"),
    [
        ({"type": "Factor"}, "Factor is required"),
        ({"type": "Factor", "factor": 0}, "boost factor must be >= 1"),
        ({"type": "Quantity"}, "Quantity is required"),
        ({"type": "Other", "factor": 2}, "unsupported startup boost type: Other"),
    ],
)
def test_boosted_cpu_errors(cpu: StartupBoostCPU, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        boosted_cpu(q("1"), {"cpu": cpu})


def test_the_annotation_is_the_original_resources_as_go_marshals_them() -> None:
    app, sidecar = build_pod()["spec"]["containers"]
    assert original_resources_value(app) == APP_ORIGINAL
    assert original_resources_value(sidecar) == SIDECAR_ORIGINAL
    assert original_resources_value({"name": "bare"}) == '{"requests":{},"limits":{}}'


def test_gate_off_changes_nothing() -> None:
    vpa = build_vpa(spec={"startupBoost": boost(factor=2)})
    admitted = admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[])
    assert admitted.patches == [*FULL_PATCH]


def test_pod_level_factor_boosts_every_container_after_the_recommendation() -> None:
    # app: base = recommended 250m; x2 = 500m; RequestsAndLimits: limit 200m * 500m / 100m =
    #      1000m = "1" (NewMilliQuantity prints whole cores). Memory as without the boost.
    # sidecar: base = recommended 25m; x2 = 50m; no cpu limit -> none to scale.
    vpa = build_vpa(spec={"startupBoost": boost(factor=2)})
    admitted = admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[], startup_boost=ON)
    assert admitted.patches == [
        EMPTY_ANNOTATIONS,
        app_boost(APP_ORIGINAL),
        add("/spec/containers/0/resources/requests/cpu", "500m"),
        add("/spec/containers/0/resources/requests/memory", "256Mi"),
        add("/spec/containers/0/resources/limits/cpu", "1"),
        add("/spec/containers/0/resources/limits/memory", "512Mi"),
        sidecar_boost(SIDECAR_ORIGINAL),
        add("/spec/containers/1/resources/requests/cpu", "50m"),
        add("/spec/containers/1/resources/requests/memory", "64Mi"),
        add("/spec/containers/1/resources/limits/memory", "64Mi"),
        updates(
            "container 0: cpu request, memory request, cpu limit, memory limit;"
            f" container 1: {NO_CPU_LIMIT}, cpu request, memory request, memory limit"
        ),
        OBSERVED,
    ]


def test_container_policy_wins_and_mode_off_containers_are_not_boosted() -> None:
    # app's own policy: Quantity +1 core -> 250m + 1000m = 1250m; limit 200m * 1250 / 100 =
    # 2500m = "2500m". sidecar: mode Off -> no boost (its recommendation is still applied by
    # admission, which reads no container mode: test_pod_admission).
    policies: list[dict[str, Any]] = [
        {"containerName": "app", "startupBoost": boost("Quantity", quantity="1")},
        {"containerName": "sidecar", "mode": "Off"},
    ]
    vpa = build_vpa(container_policies=policies, spec={"startupBoost": boost(factor=4)})
    admitted = admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[], startup_boost=ON)
    assert admitted.patches[1] == app_boost(APP_ORIGINAL)
    assert add("/spec/containers/0/resources/requests/cpu", "1250m") in admitted.patches
    assert add("/spec/containers/0/resources/limits/cpu", "2500m") in admitted.patches
    assert not any("vpaCpuStartupBoost~1sidecar" in p["path"] for p in admitted.patches)
    assert add("/spec/containers/1/resources/requests/cpu", "25m") in admitted.patches


def test_requests_only_caps_the_boost_1m_below_the_limit() -> None:
    # app RequestsOnly: 250m x 4 = 1000m > limit 200m -> 200m - 1m = 199m; limits untouched.
    # (The recommendation's RequestsOnly cap already set the memory target <= 200Mi limit.)
    policies = [{"containerName": "app", "controlledValues": "RequestsOnly"}]
    vpa = build_vpa(container_policies=policies, spec={"startupBoost": boost(factor=4)})
    admitted = admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[], startup_boost=ON)
    assert add("/spec/containers/0/resources/requests/cpu", "199m") in admitted.patches
    assert not any(
        p["path"].startswith("/spec/containers/0/resources/limits") for p in admitted.patches
    )


def test_mode_off_applies_only_the_boost_from_the_original_request() -> None:
    # Mode Off: no recommendation applied; base = the container's own request.
    # app: 100m x 3 = 300m; limit 200m * 300 / 100 = 600m. sidecar: 50m x 3 = 150m, no cpu limit.
    vpa = build_vpa(update_mode="Off", spec={"startupBoost": boost(factor=3)})
    admitted = admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[], startup_boost=ON)
    assert admitted.patches == [
        EMPTY_ANNOTATIONS,
        app_boost(APP_ORIGINAL),
        add("/spec/containers/0/resources/requests/cpu", "300m"),
        add("/spec/containers/0/resources/limits/cpu", "600m"),
        sidecar_boost(SIDECAR_ORIGINAL),
        add("/spec/containers/1/resources/requests/cpu", "150m"),
        updates("container 0: cpu request, cpu limit; container 1: cpu request"),
        OBSERVED,
    ]


def test_max_allowed_cpu_boost_caps_the_request() -> None:
    # app: 250m x 10 = 2500m > cap 400m -> 400m; limit 200m * 400 / 100 = 800m.
    vpa = build_vpa(spec={"startupBoost": boost(factor=10)})
    settings = StartupBoostSettings(max_allowed_cpu_boost=q("400m"))
    admitted = admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[], startup_boost=settings)
    assert add("/spec/containers/0/resources/requests/cpu", "400m") in admitted.patches
    assert add("/spec/containers/0/resources/limits/cpu", "800m") in admitted.patches


def test_an_invalid_boost_admits_the_pod_unchanged() -> None:
    vpa = build_vpa(spec={"startupBoost": boost(factor=0)})
    with pytest.raises(PodAdmissionError, match="boost factor must be >= 1"):
        admit_pod(pod=build_pod(), vpa=vpa, limit_ranges=[], startup_boost=ON)


def _ready_pod(since: str, annotations: dict[str, str]) -> Pod:
    pod = build_pod()
    pod["metadata"]["annotations"] = annotations
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}],
    }
    return pod


def test_expiry_counts_from_ready() -> None:
    keys = {"vpaCpuStartupBoost/app": APP_ORIGINAL, "vpaCpuStartupBoost/sidecar": "{}"}
    pod = _ready_pod("2024-01-01T00:00:00Z", keys)
    vpa = build_vpa(
        container_policies=[
            {"containerName": "sidecar", "startupBoost": boost(factor=2, durationSeconds=0)}
        ],
        spec={"startupBoost": boost(factor=2, durationSeconds=60)},
    )
    at = datetime(2024, 1, 1, 0, 1, tzinfo=UTC)  # exactly 60 s after Ready: not past it yet
    assert expired_boost_annotations(pod, vpa, now=at) == ["vpaCpuStartupBoost/sidecar"]
    later = datetime(2024, 1, 1, 0, 1, 1, tzinfo=UTC)
    assert expired_boost_annotations(pod, vpa, now=later) == sorted(keys)
    pod["status"]["conditions"][0]["status"] = "False"
    assert expired_boost_annotations(pod, vpa, now=later) == []
