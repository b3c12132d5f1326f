"""VPA validation rules and their exact messages (webhook/vpa_spec_rules.py).

The table is upstream's ``validation_test.go`` (TestValidateVPA) case by case: each VPA yields
exactly one error whose ``field.Error.Error()`` text must match upstream's expected string.
``old`` stands for the validation options upstream derives from the old object: the feature
gates, or an old VPA already using a gated field.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.webhook.vpa_decoding import VpaDecodeError, decode_vpa
from kubescale.webhook.vpa_spec_rules import validate_vpa

TARGET = {"kind": "Deployment", "name": "my-app"}
ALL_GATES = {"CPUStartupBoost": True, "PerVPAConfig": True, "InPlace": True}


def spec(**fields: Any) -> dict[str, Any]:
    return {"spec": {"targetRef": TARGET, **fields}}


def policy(**fields: Any) -> dict[str, Any]:
    return {"resourcePolicy": {"containerPolicies": [{"containerName": "loot box", **fields}]}}


def decoded(raw: dict[str, Any]) -> VerticalPodAutoscaler:
    """The typed VPA the rules read: ``raw`` through the webhook's decoder (it decodes)."""
    vpa = decode_vpa(raw)
    assert not isinstance(vpa, VpaDecodeError), vpa
    return vpa


def messages(
    vpa: dict[str, Any], gates: dict[str, bool] | None = None, old: dict[str, Any] | None = None
) -> list[str]:
    errors, _ = validate_vpa(decoded(vpa), old_vpa=decoded(old or {}), feature_gates=gates or {})
    return [error.message() for error in errors]


CASES = [
    pytest.param({}, {}, None, id="empty update (targetRef Required never fires from the webhook)"),
    pytest.param(
        spec(updatePolicy={}),
        {},
        "spec.updatePolicy.updateMode: Required value: updateMode is required if UpdatePolicy is"
        " used",
        id="no update mode",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "bad"}),
        {},
        'spec.updatePolicy.updateMode: Unsupported value: "bad": supported values: "InPlace",'
        ' "InPlaceOrRecreate", "Initial", "Off", "Recreate"',
        id="bad update mode",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": ""}),
        {},
        'spec.updatePolicy.updateMode: Unsupported value: "": supported values: "InPlace",'
        ' "InPlaceOrRecreate", "Initial", "Off", "Recreate"',
        id="empty update mode is not unset",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "InPlaceOrRecreate"}),
        {},
        None,
        id="InPlaceOrRecreate needs no gate",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Auto"}), {}, None, id="Auto is valid (with a warning)"
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Off", "minReplicas": 0}),
        {},
        "spec.updatePolicy.minReplicas: Invalid value: 0: minReplicas has to be positive",
        id="zero minReplicas",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Off", "minReplicas": -3}),
        {},
        "spec.updatePolicy.minReplicas: Invalid value: -3: minReplicas has to be positive",
        id="negative minReplicas",
    ),
    pytest.param(
        spec(resourcePolicy={"containerPolicies": [{}]}),
        {},
        "spec.resourcePolicy.containerPolicies[0].containerName: Required value",
        id="no policy name",
    ),
    pytest.param(
        spec(**policy(mode="bad")),
        {},
        'spec.resourcePolicy.containerPolicies[0].mode: Unsupported value: "bad": supported'
        ' values: "Auto", "Off"',
        id="invalid scaling mode",
    ),
    pytest.param(
        spec(
            updatePolicy={"updateMode": "Off"}, recommenders=[{"name": "test1"}, {"name": "test2"}]
        ),
        {},
        "spec.recommenders: Too many: 2: must have at most 1 item",
        id="more than one recommender",
    ),
    pytest.param(
        spec(**policy(minAllowed={"cpu": "100"}, maxAllowed={"cpu": "10"})),
        {},
        'spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: "10": max'
        " resource for cpu"
        ' is lower than min of "100"',
        id="bad limits",
    ),
    pytest.param(
        spec(**policy(minAllowed={"memory": "1Gi"}, maxAllowed={"memory": "1000Mi"})),
        {},
        'spec.resourcePolicy.containerPolicies[0].maxAllowed[memory]: Invalid value: "1000Mi": max'
        " resource"
        ' for memory is lower than min of "1Gi"',
        id="bad memory limits (values printed canonically)",
    ),
    pytest.param(
        spec(**policy(minAllowed={"cpu": "187500u"}, maxAllowed={"cpu": "275m"})),
        {},
        'spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]: Invalid value: "187500u": must'
        " be a whole"
        " number of milli CPUs",
        id="bad minAllowed cpu value",
    ),
    pytest.param(
        spec(
            **policy(
                minAllowed={"cpu": "1m", "memory": "100m"},
                maxAllowed={"cpu": "275m", "memory": "500M"},
            )
        ),
        {},
        'spec.resourcePolicy.containerPolicies[0].minAllowed[memory]: Invalid value: "100m": must'
        " be a whole"
        " number of bytes",
        id="bad minAllowed memory value",
    ),
    pytest.param(
        spec(**policy(minAllowed={}, maxAllowed={"cpu": "187500u"})),
        {},
        'spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]: Invalid value: "187500u": must'
        " be a whole"
        " number of milli CPUs",
        id="bad maxAllowed cpu value",
    ),
    pytest.param(
        spec(**policy(minAllowed={"cpu": "1m"}, maxAllowed={"cpu": "275m", "memory": "500m"})),
        {},
        'spec.resourcePolicy.containerPolicies[0].maxAllowed[memory]: Invalid value: "500m": must'
        " be a whole"
        " number of bytes",
        id="bad maxAllowed memory value",
    ),
    pytest.param(
        spec(**policy(minAllowed={"nvidia.com/gpu": "0.5"})),
        {},
        None,
        id="other resources have no resolution rule",
    ),
    pytest.param(
        spec(**policy(mode="Off", controlledValues="RequestsAndLimits")),
        {},
        "spec.resourcePolicy.containerPolicies[0].controlledValues: Forbidden: controlledValues"
        " shouldn't be"
        " specified if container scaling mode is off",
        id="scaling off with controlled values requests and limits",
    ),
    pytest.param(
        spec(**policy(mode="Off", controlledValues="RequestsOnly")),
        {},
        None,
        id="scaling off with RequestsOnly",
    ),
    pytest.param(
        spec(**policy(controlledResources=["cpu", "memory", "nvidia.com/gpu"])),
        {},
        "spec.resourcePolicy.containerPolicies[0].controlledResources[2]: Unsupported value:"
        ' "nvidia.com/gpu":'
        ' supported values: "cpu", "memory"',
        id="controlledResources beyond cpu/memory (a ResourceName prints as JSON)",
    ),
    pytest.param(
        spec(
            updatePolicy={"updateMode": "Off", "minReplicas": 1},
            **policy(mode="Auto", minAllowed={"cpu": "10"}, maxAllowed={"cpu": "100"}),
        ),
        {},
        None,
        id="all valid",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {"factor": 2}}),
        {},
        "spec.startupBoost: Forbidden: in order to use startupBoost, you must enable feature gate"
        " CPUStartupBoost in the admission-controller args",
        id="top-level startupBoost with feature gate disabled",
    ),
    pytest.param(
        spec(**policy(startupBoost={"cpu": {"factor": 2}})),
        {},
        "spec.resourcePolicy.containerPolicies[0].startupBoost: Forbidden: in order to use"
        " startupBoost, you"
        " must enable feature gate CPUStartupBoost in the admission-controller args",
        id="container startupBoost with feature gate disabled",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {"type": "Factor", "factor": 0}}),
        ALL_GATES,
        "spec.startupBoost.cpu.factor: Invalid value: 0: must be >= 1 for type Factor",
        id="top-level startupBoost with bad factor",
    ),
    pytest.param(
        spec(**policy(startupBoost={"cpu": {"type": "Factor", "factor": 0}})),
        ALL_GATES,
        "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.factor: Invalid value: 0: must"
        " be >= 1 for"
        " type Factor",
        id="container startupBoost with bad factor",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {"type": "Factor"}}),
        ALL_GATES,
        "spec.startupBoost.cpu.factor: Required value: required when type is Factor",
        id="Factor without factor",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {"type": "Quantity", "quantity": "187500u"}}),
        ALL_GATES,
        'spec.startupBoost.cpu.quantity: Invalid value: "187500u": must be a whole number of milli'
        " CPUs",
        id="top-level startupBoost with bad quantity",
    ),
    pytest.param(
        spec(**policy(startupBoost={"cpu": {"type": "Quantity", "quantity": "187500u"}})),
        ALL_GATES,
        "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.quantity: Invalid value:"
        ' "187500u": must'
        " be a whole number of milli CPUs",
        id="container startupBoost with bad quantity",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {"type": "Quantity"}}),
        ALL_GATES,
        "spec.startupBoost.cpu.quantity: Required value: required when type is Quantity",
        id="Quantity without quantity",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {"type": "bad"}}),
        ALL_GATES,
        'spec.startupBoost.cpu.type: Unsupported value: "bad": supported values: "Factor",'
        ' "Quantity"',
        id="top-level startupBoost with bad type",
    ),
    pytest.param(
        spec(**policy(startupBoost={"cpu": {"type": "bad"}})),
        ALL_GATES,
        'spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.type: Unsupported value: "bad":'
        " supported"
        ' values: "Factor", "Quantity"',
        id="container startupBoost with bad type",
    ),
    pytest.param(
        spec(startupBoost={"cpu": {}}),
        ALL_GATES,
        "spec.startupBoost.cpu.type: Required value: must be either Factor or Quantity",
        id="top-level startupBoost with empty type",
    ),
    pytest.param(
        spec(**policy(startupBoost={"cpu": {}})),
        ALL_GATES,
        "spec.resourcePolicy.containerPolicies[0].startupBoost.cpu.type: Required value: must be"
        " either Factor"
        " or Quantity",
        id="container startupBoost with empty type",
    ),
    pytest.param(spec(startupBoost={}), ALL_GATES, None, id="startupBoost without cpu"),
    pytest.param(
        spec(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
        ALL_GATES,
        None,
        id="valid factor",
    ),
    pytest.param(
        spec(
            startupBoost={"cpu": {"type": "Factor", "factor": 2}},
            **policy(startupBoost={"cpu": {"type": "Quantity", "quantity": "100m"}}),
        ),
        ALL_GATES,
        None,
        id="top-level and container startupBoost",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Off"}, **policy(oomBumpUpRatio="2")),
        {"PerVPAConfig": True},
        None,
        id="per-vpa config active and used",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 600}),
        {"PerVPAConfig": True},
        None,
        id="per-vpa config active and used evictAfterOOMSeconds",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 600}),
        {},
        "spec.updatePolicy.evictAfterOOMSeconds: Forbidden: not supported when feature flag"
        " PerVPAConfig is"
        " disabled",
        id="evictAfterOOMSeconds without the gate",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 0}),
        {"PerVPAConfig": True},
        "spec.updatePolicy.evictAfterOOMSeconds: Invalid value: 0: must be greater than or equal"
        " to 1",
        id="evictAfterOOMSeconds zero",
    ),
    pytest.param(
        spec(**policy(mode="Auto", oomBumpUpRatio="-1", oomMinBumpUp="104857600")),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: -1: must be"
        " greater than or"
        " equal to 1.0",
        id="Invalid oomBumpUpRatio (negative value)",
    ),
    pytest.param(
        spec(**policy(mode="Auto", oomBumpUpRatio="0.5", oomMinBumpUp="104857600")),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: 0.5: must be"
        " greater than or"
        " equal to 1.0",
        id="Invalid oomBumpUpRatio (less than 1)",
    ),
    pytest.param(
        spec(**policy(oomBumpUpRatio="999m")),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].oomBumpUpRatio: Invalid value: 0.999: must be"
        " greater than"
        " or equal to 1.0",
        id="oomBumpUpRatio read in milli-units: 999m is 0.999",
    ),
    pytest.param(
        spec(**policy(oomBumpUpRatio="2", oomMinBumpUp="-1")),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].oomMinBumpUp: Invalid value: -1: must be greater"
        " than or"
        " equal to 0",
        id="Invalid oomMinBumpUp (negative value)",
    ),
    pytest.param(
        spec(
            **policy(
                mode="Auto", minAllowed={"cpu": "10"}, maxAllowed={"cpu": "100"}, oomMinBumpUp="2"
            )
        ),
        {},
        "spec.resourcePolicy.containerPolicies[0].oomMinBumpUp: Forbidden: not supported when"
        " feature flag"
        " PerVPAConfig is disabled",
        id="per-vpa config disabled and used",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalSeconds=3600)),
        {"PerVPAConfig": True},
        None,
        id="per-vpa config active with MemoryAggregationIntervalSeconds",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalSeconds=3600)),
        {},
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalSeconds: Forbidden: not"
        " supported"
        " when feature flag PerVPAConfig is disabled",
        id="per-vpa config disabled with MemoryAggregationIntervalSeconds",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalCount=10)),
        {},
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalCount: Forbidden: not"
        " supported"
        " when feature flag PerVPAConfig is disabled",
        id="per-vpa config disabled with MemoryAggregationIntervalCount",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalSeconds=0)),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalSeconds: Invalid value:"
        " 0: must be"
        " greater than or equal to 1",
        id="invalid MemoryAggregationIntervalSeconds zero",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalSeconds=-5)),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalSeconds: Invalid value:"
        " -5: must be"
        " greater than or equal to 1",
        id="invalid MemoryAggregationIntervalSeconds negative",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalCount=0)),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalCount: Invalid value:"
        " 0: must be"
        " greater than or equal to 1",
        id="invalid MemoryAggregationIntervalCount zero",
    ),
    pytest.param(
        spec(**policy(memoryAggregationIntervalCount=-3)),
        {"PerVPAConfig": True},
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalCount: Invalid value:"
        " -3: must be"
        " greater than or equal to 1",
        id="invalid MemoryAggregationIntervalCount negative",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "InPlace"}),
        {},
        "spec.updatePolicy.updateMode: Forbidden: in order to use UpdateMode InPlace, you must"
        " enable feature"
        " gate InPlace in the admission-controller args",
        id="creating VPA with InPlace update mode not allowed by disabled feature gate",
    ),
    pytest.param(
        spec(updatePolicy={"updateMode": "InPlace", "minReplicas": 1}),
        {"InPlace": True},
        None,
        id="InPlace update mode with minReplicas",
    ),
    pytest.param(
        spec(
            updatePolicy={"updateMode": "InPlace", "minReplicas": 1},
            resourcePolicy={
                "containerPolicies": [
                    {
                        "containerName": "test-container",
                        "mode": "Auto",
                        "minAllowed": {"cpu": "10m", "memory": "100Mi"},
                        "maxAllowed": {"cpu": "1000m", "memory": "1Gi"},
                    }
                ]
            },
        ),
        {"InPlace": True},
        None,
        id="InPlace update mode with complete resource policy",
    ),
]


@pytest.mark.parametrize(("vpa", "gates", "expected"), CASES)
def test_validate_vpa(vpa: dict[str, Any], gates: dict[str, bool], expected: str | None) -> None:
    assert messages(vpa, gates) == ([] if expected is None else [expected])


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            spec(updatePolicy={"updateMode": "InPlace"}),
            spec(updatePolicy={"updateMode": "InPlace", "minReplicas": 2}),
            [],
            id="InPlace kept on update when the old object already had it",
        ),
        pytest.param(
            spec(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
            spec(startupBoost={"cpu": {"type": "Factor", "factor": 3}}),
            [],
            id="top-level boost already present",
        ),
        pytest.param(
            spec(**policy(startupBoost={"cpu": {"type": "Factor", "factor": 2}})),
            spec(startupBoost={"cpu": {"type": "Factor", "factor": 0}}),
            ["spec.startupBoost.cpu.factor: Invalid value: 0: must be >= 1 for type Factor"],
            id="container boost present allows boosts everywhere, still validated",
        ),
        pytest.param(
            spec(startupBoost={}),
            spec(startupBoost={"cpu": {"type": "Factor", "factor": 2}}),
            [
                "spec.startupBoost: Forbidden: in order to use startupBoost, you must enable"
                " feature gate"
                " CPUStartupBoost in the admission-controller args"
            ],
            id="old boost without cpu does not count (allowCPUBoost checks StartupBoost.CPU)",
        ),
        pytest.param(
            spec(updatePolicy={"updateMode": "Off", "evictAfterOOMSeconds": 60}),
            spec(**policy(oomBumpUpRatio="1.5")),
            [],
            id="evictAfterOOMSeconds in the old object allows per-VPA fields",
        ),
        pytest.param(
            spec(**policy(memoryAggregationIntervalCount=4)),
            spec(**policy(memoryAggregationIntervalCount=0)),
            [
                "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalCount: Invalid"
                " value: 0:"
                " must be greater than or equal to 1"
            ],
            id="memory aggregation count in the old object allows and validates",
        ),
    ],
)
def test_gated_fields_allowed_by_old_object(
    old: dict[str, Any], new: dict[str, Any], expected: list[str]
) -> None:
    assert messages(new, {}, old) == expected


def test_very_invalid_vpa_reports_every_field() -> None:
    """TestVeryInvalidateVPA: errors in upstream's order, one per broken field."""
    vpa = {
        "spec": {
            "resourcePolicy": {
                "containerPolicies": [
                    {
                        "containerName": "loot box",
                        "startupBoost": {"cpu": {}},
                        "controlledResources": ["cpu", "memory", "broken"],
                    }
                ]
            },
            "startupBoost": {},
            "updatePolicy": {"minReplicas": -1, "updateMode": "bad", "evictAfterOOMSeconds": -1},
            "recommenders": [{"name": "test1"}, {"name": "test2"}],
        }
    }
    errors, warnings = validate_vpa(decoded(vpa), old_vpa={}, feature_gates={})
    assert [error.field for error in errors] == [
        "spec.updatePolicy.updateMode",
        "spec.updatePolicy.minReplicas",
        "spec.updatePolicy.evictAfterOOMSeconds",
        "spec.resourcePolicy.containerPolicies[0].controlledResources[2]",
        "spec.resourcePolicy.containerPolicies[0].startupBoost",
        "spec.startupBoost",
        "spec.recommenders",
    ]
    assert warnings == []


def test_resources_in_a_map_are_checked_in_name_order() -> None:
    vpa = spec(**policy(minAllowed={"memory": "1.5", "cpu": "0.0001"}))
    assert messages(vpa) == [
        'spec.resourcePolicy.containerPolicies[0].minAllowed[cpu]: Invalid value: "100u": must be'
        " a whole"
        " number of milli CPUs",
        'spec.resourcePolicy.containerPolicies[0].minAllowed[memory]: Invalid value: "1500m": must'
        " be a"
        " whole number of bytes",
    ]


# Current apimachinery (field.Error.ErrorBody) prints a bad value of type string with %q and a
# value of any other type -- the VPA's named string types UpdateMode, ContainerScalingMode,
# StartupBoostType and corev1.ResourceName among them -- as its JSON encoding; both quote it.
# JSON differs from %q only on HTML characters (\u003c \u003e \u0026), U+2028/U+2029, control
# characters (\u00XX) and non-ASCII text (written as it is).
@pytest.mark.parametrize(
    ("vpa", "expected"),
    [
        (spec(**policy(controlledResources=["broken"])),
         'spec.resourcePolicy.containerPolicies[0].controlledResources[0]: Unsupported value: '
         '"broken": supported values: "cpu", "memory"'),
        (spec(**policy(controlledResources=["a<b>&c"])),
         'spec.resourcePolicy.containerPolicies[0].controlledResources[0]: Unsupported value: '
         '"a\\u003cb\\u003e\\u0026c": supported values: "cpu", "memory"'),
        (spec(updatePolicy={"updateMode": "Füll\x7f"}),
         'spec.updatePolicy.updateMode: Unsupported value: "Füll\x7f": supported values: '
         '"InPlace", "InPlaceOrRecreate", "Initial", "Off", "Recreate"'),
        (spec(**policy(mode="\x01<")),
         'spec.resourcePolicy.containerPolicies[0].mode: Unsupported value: "\\u0001\\u003c": '
         'supported values: "Auto", "Off"'),
        (spec(startupBoost={"cpu": {"type": "Fac\ntor"}}),
         'spec.startupBoost.cpu.type: Unsupported value: "Fac\\ntor": supported values: '
         '"Factor", "Quantity"'),
    ],
)  # fmt: skip
def test_unsupported_values_print_as_current_apimachinery_does(
    vpa: dict[str, Any], expected: str
) -> None:
    assert messages(vpa, gates={"CPUStartupBoost": True}) == [expected]
