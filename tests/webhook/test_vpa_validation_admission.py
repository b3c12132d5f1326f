"""VPA admission decisions (webhook/vpa_validation.py ``admit_vpa``) and their Status.

Denials carry exactly what ``apierrors.NewInvalid(GroupKind{autoscaling.k8s.io,
VerticalPodAutoscaler}, name, errs)`` serialises to; allowed VPAs without ``updatePolicy`` get
the Recreate default patch; warnings follow upstream's texts (``Auto`` deprecation,
kubernetes/autoscaler#8424; unsupported controlled resources kept from the old object).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.webhook.field_errors import FieldError, invalid_status
from kubescale.webhook.vpa_validation import SUPPORTED_UPDATE_MODES, VpaAdmission, admit_vpa
from tests import builders

VPA = functools.partial(builders.vpas.vpa, name="web-vpa", target=builders.vpas.target_ref())

TARGET = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
DEFAULT_PATCH: list[JsonPatchOperation] = [
    {"op": "add", "path": "/spec/updatePolicy", "value": {"updateMode": "Recreate"}}
]
AUTO_WARNING = (
    'spec.updatePolicy: "Auto" mode is deprecated and will be removed in a future API version. Use'
    " explicit update modes like: [InPlace InPlaceOrRecreate Initial Off Recreate]. See"
    " https://github.com/kubernetes/autoscaler/issues/8424 for more details."
)


def admit(
    new: dict[str, Any], old: dict[str, Any] | None = None, operation: str = "CREATE", **gates: bool
) -> VpaAdmission:
    return admit_vpa(operation=operation, vpa=new, old_vpa=old, feature_gates=gates)


def test_supported_update_modes_sorted_without_auto() -> None:
    assert SUPPORTED_UPDATE_MODES == ("InPlace", "InPlaceOrRecreate", "Initial", "Off", "Recreate")


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        pytest.param(
            VPA(),
            VpaAdmission(True, None, (), DEFAULT_PATCH),
            id="no updatePolicy: default Recreate",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": None}),
            VpaAdmission(True, None, (), DEFAULT_PATCH),
            id="null updatePolicy: defaulted",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": {"updateMode": "Initial"}}),
            VpaAdmission(True, None, (), []),
            id="Initial",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": {"updateMode": "Auto"}}),
            VpaAdmission(True, None, (AUTO_WARNING,), []),
            id="Auto: allowed with a deprecation warning",
        ),
    ],
)
def test_allowed(new: dict[str, Any], expected: VpaAdmission) -> None:
    assert admit(new) == expected


def test_invalid_status_is_new_invalid() -> None:
    result = admit(VPA(spec={"updatePolicy": {"updateMode": "bad", "minReplicas": 0}}))
    unsupported = (
        'Unsupported value: "bad": supported values: "InPlace", "InPlaceOrRecreate", "Initial",'
        ' "Off",'
        ' "Recreate"'
    )
    assert result == VpaAdmission(
        allowed=False,
        status={
            "metadata": {},
            "status": "Failure",
            "message": 'VerticalPodAutoscaler.autoscaling.k8s.io "web-vpa" is invalid: ['
            f"spec.updatePolicy.updateMode: {unsupported}, spec.updatePolicy.minReplicas: Invalid"
            f" value:"
            " 0: minReplicas has to be positive]",
            "reason": "Invalid",
            "details": {
                "name": "web-vpa",
                "group": "autoscaling.k8s.io",
                "kind": "VerticalPodAutoscaler",
                "causes": [
                    {
                        "reason": "FieldValueNotSupported",
                        "message": unsupported,
                        "field": "spec.updatePolicy.updateMode",
                    },
                    {
                        "reason": "FieldValueInvalid",
                        "message": "Invalid value: 0: minReplicas has to be positive",
                        "field": "spec.updatePolicy.minReplicas",
                    },
                ],
            },
            "code": 422,
        },
        warnings=(),
        patches=[],
    )


def test_single_error_message_is_not_bracketed() -> None:
    result = admit(VPA(spec={"recommenders": [{"name": "a"}, {"name": "b"}]}))
    assert result.status is not None
    assert result.status["message"] == (
        'VerticalPodAutoscaler.autoscaling.k8s.io "web-vpa" is invalid: spec.recommenders: Too'
        " many: 2:"
        " must have at most 1 item"
    )
    assert result.status["details"]["causes"] == [
        {
            "reason": "FieldValueTooMany",
            "message": "Too many: 2: must have at most 1 item",
            "field": "spec.recommenders",
        }
    ]


def test_denied_vpa_still_carries_warnings_and_no_patch() -> None:
    result = admit(VPA(spec={"updatePolicy": {"updateMode": "Auto", "minReplicas": -1}}))
    assert not result.allowed
    assert result.warnings == (AUTO_WARNING,)
    assert result.patches == []


def test_create_ignores_old_object_and_gates_default_off() -> None:
    """On CREATE the old object is an empty VPA: gated fields need their gates."""
    boosted = VPA(
        spec={
            "updatePolicy": {"updateMode": "Off"},
            "startupBoost": {"cpu": {"type": "Factor", "factor": 2}},
        }
    )
    assert not admit(boosted, old=boosted).allowed
    assert admit(boosted, CPUStartupBoost=True).allowed


def test_update_allows_gated_fields_already_present() -> None:
    old = VPA(spec={"updatePolicy": {"updateMode": "InPlace"}})
    new = VPA(spec={"updatePolicy": {"updateMode": "InPlace", "minReplicas": 3}})
    assert admit(new, old, "UPDATE").allowed
    assert not admit(new, VPA(spec={"updatePolicy": {"updateMode": "Off"}}), "UPDATE").allowed
    assert admit(
        new, VPA(spec={"updatePolicy": {"updateMode": "Off"}}), "UPDATE", InPlace=True
    ).allowed


def test_unsupported_controlled_resource_kept_from_old_object_is_a_warning() -> None:
    def with_resources(*names: str) -> dict[str, Any]:
        return VPA(
            spec={
                "updatePolicy": {"updateMode": "Off"},
                "resourcePolicy": {
                    "containerPolicies": [
                        {"containerName": "*", "controlledResources": list(names)}
                    ]
                },
            }
        )

    old = with_resources("cpu", "nvidia.com/gpu")
    result = admit(with_resources("memory", "nvidia.com/gpu"), old, "UPDATE")
    assert result == VpaAdmission(
        allowed=True,
        status=None,
        warnings=(
            "spec.resourcePolicy.containerPolicies[0].controlledResources[1]: unsupported value"
            ' "nvidia.com/gpu"'
            " is allowed only because it is present in the existing VPA object; supported values:"
            ' "cpu", "memory"',
        ),
        patches=[],
    )
    created = admit(with_resources("memory", "nvidia.com/gpu"), old, "CREATE")
    assert created.status is not None
    assert created.status["details"]["causes"] == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "nvidia.com/gpu": supported values: "cpu", "memory"',
            "field": "spec.resourcePolicy.containerPolicies[0].controlledResources[1]",
        }
    ]


@pytest.mark.parametrize(
    ("new", "old", "operation", "message"),
    [
        pytest.param(
            VPA(spec={"updatePolicy": {"updateMode": "Off", "minReplicas": "2"}}),
            None,
            "CREATE",
            "json: cannot unmarshal string into Go struct field"
            " PodUpdatePolicy.spec.updatePolicy.minReplicas"
            " of type int32",
            id="string for an int32",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": {"updateMode": 3}}),
            None,
            "CREATE",
            "json: cannot unmarshal number into Go struct field"
            " PodUpdatePolicy.spec.updatePolicy.updateMode"
            " of type v1.UpdateMode",
            id="number for a typed string",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": {"updateMode": "Off", "minReplicas": 1.5}}),
            None,
            "CREATE",
            "json: cannot unmarshal number 1.5 into Go struct field"
            " PodUpdatePolicy.spec.updatePolicy.minReplicas"
            " of type int32",
            id="fraction for an int32",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": {"updateMode": "Off", "minReplicas": 2**31}}),
            None,
            "CREATE",
            "json: cannot unmarshal number 2147483648 into Go struct field"
            " PodUpdatePolicy.spec.updatePolicy.minReplicas of type int32",
            id="int32 overflow",
        ),
        pytest.param(
            VPA(spec={"updatePolicy": "Off"}),
            None,
            "CREATE",
            "json: cannot unmarshal string into Go struct field"
            " VerticalPodAutoscalerSpec.spec.updatePolicy"
            " of type v1.PodUpdatePolicy",
            id="string for an object",
        ),
        pytest.param(
            VPA(
                spec={
                    "resourcePolicy": {
                        "containerPolicies": [{"containerName": "c", "controlledResources": "cpu"}]
                    }
                }
            ),
            None,
            "CREATE",
            "json: cannot unmarshal string into Go struct field"
            " ContainerResourcePolicy.spec.resourcePolicy.containerPolicies.controlledResources of"
            " type"
            " []v1.ResourceName",
            id="string for a list (array indices are not in the path)",
        ),
        pytest.param(
            VPA(
                spec={
                    "resourcePolicy": {
                        "containerPolicies": [{"containerName": "c", "minAllowed": {"cpu": "lots"}}]
                    }
                }
            ),
            None,
            "CREATE",
            "quantities must match the regular expression"
            " '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="quantity that does not parse",
        ),
        pytest.param(
            VPA(
                spec={
                    "resourcePolicy": {
                        "containerPolicies": [{"containerName": "c", "oomMinBumpUp": "1ki"}]
                    }
                }
            ),
            None,
            "CREATE",
            "unable to parse quantity's suffix",
            id="quantity with an unknown suffix",
        ),
        pytest.param(
            VPA(spec={"recommenders": [{"name": True}]}),
            None,
            "CREATE",
            "json: cannot unmarshal bool into Go struct field"
            " VerticalPodAutoscalerRecommenderSelector.spec.recommenders.name of type string",
            id="bool for a string inside a list",
        ),
        pytest.param(
            VPA(), None, "UPDATE", "unexpected end of JSON input", id="UPDATE without old object"
        ),
        pytest.param(
            VPA(),
            VPA(spec={"updatePolicy": []}),
            "UPDATE",
            "json: cannot unmarshal array into Go struct field"
            " VerticalPodAutoscalerSpec.spec.updatePolicy of"
            " type v1.PodUpdatePolicy",
            id="old object that does not decode",
        ),
    ],
)
def test_undecodable_vpa_is_an_internal_error(
    new: dict[str, Any], old: dict[str, Any] | None, operation: str, message: str
) -> None:
    result = admit(new, old, operation)
    assert not result.allowed
    assert result.status is not None
    assert result.status["details"]["causes"] == [
        {"reason": "InternalError", "message": f"Internal error: {message}", "field": "."}
    ]
    assert result.status["message"] == (
        f'VerticalPodAutoscaler.autoscaling.k8s.io "web-vpa" is invalid: .: Internal error:'
        f" {message}"
    )


def test_first_type_error_wins_but_a_quantity_error_stops_decoding() -> None:
    both = VPA(
        spec={
            "updatePolicy": {"updateMode": 1, "minReplicas": "x"},
            "resourcePolicy": {
                "containerPolicies": [{"containerName": "c", "maxAllowed": {"memory": "x"}}]
            },
        }
    )
    result = admit(both)
    assert result.status is not None
    assert result.status["details"]["causes"][0]["message"].startswith(
        "Internal error: quantities must match the regular expression"
    )
    first_only = VPA(spec={"updatePolicy": {"updateMode": 1, "minReplicas": "x"}})
    result = admit(first_only)
    assert result.status is not None
    assert "updateMode of type v1.UpdateMode" in result.status["details"]["causes"][0]["message"]


def test_aggregate_drops_repeated_messages_but_causes_keep_them() -> None:
    error = FieldError("FieldValueRequired", "spec.x", '""', "")
    status = invalid_status(group="g.io", kind="K", name="n", errors=[error, error])
    assert status["message"] == 'K.g.io "n" is invalid: spec.x: Required value'
    assert len(status["details"]["causes"]) == 2


def test_unnamed_object_has_no_name_in_details() -> None:
    status = invalid_status(group="g.io", kind="K", name="", errors=[])
    assert status["message"] == 'K.g.io "" is invalid'
    assert status["details"] == {"group": "g.io", "kind": "K"}


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
FIELD_NAMES = st.sampled_from(
    [
        "targetRef",
        "updatePolicy",
        "resourcePolicy",
        "recommenders",
        "startupBoost",
        "updateMode",
        "minReplicas",
        "evictAfterOOMSeconds",
        "containerPolicies",
        "containerName",
        "mode",
        "minAllowed",
        "maxAllowed",
        "controlledResources",
        "controlledValues",
        "oomBumpUpRatio",
        "oomMinBumpUp",
        "cpu",
        "memory",
        "type",
        "factor",
        "quantity",
    ]
)
SPEC_LIKE = st.recursive(
    JSON_VALUES,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(FIELD_NAMES, children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(
    spec=SPEC_LIKE,
    old_spec=SPEC_LIKE,
    operation=st.sampled_from(["CREATE", "UPDATE"]),
    gates=st.booleans(),
)
def test_never_raises_and_always_answers(
    spec: Any, old_spec: Any, operation: str, gates: bool
) -> None:
    """Any JSON under ``spec`` gets a well-formed decision (allowed, or a 422 Status)."""
    new = {"metadata": {"name": "fuzz"}, "spec": spec}
    old = {"metadata": {"name": "fuzz"}, "spec": old_spec}
    flags = {"InPlace": gates, "PerVPAConfig": gates, "CPUStartupBoost": gates}
    result = admit_vpa(operation=operation, vpa=new, old_vpa=old, feature_gates=flags)
    json.dumps(result.status)  # serialisable
    if result.allowed:
        assert result.status is None
    else:
        assert result.status is not None
        assert result.status["code"] == 422
        assert result.status["details"]["causes"]
        assert result.patches == []
