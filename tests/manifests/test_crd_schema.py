"""The VPA and checkpoint CRDs against upstream's, field by field; upstream's objects against them.

Structure is compared with the facts read off upstream's vpa-v1-crd-gen.yaml
(:mod:`.upstream_crd_facts`); then upstream's example objects are evaluated against the schema as
kube-apiserver would (:mod:`.structural_schema`): no error and nothing pruned means they apply
unchanged. The bad-object table shows the schema refuses what upstream's refuses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from . import upstream_crd_facts as facts
from .manifest_files import crd, version_schema
from .structural_schema import SchemaReport, check_object, structural_errors
from .upstream_examples import checkpoint_example, vpa_examples, vpa_status

VPA = "verticalpodautoscalers"
CHECKPOINTS = "verticalpodautoscalercheckpoints"


def describe(schema: dict[str, Any], path: str = "") -> dict[str, str]:
    """``path: descriptor`` for every node, in :mod:`.upstream_crd_facts`' notation."""
    if schema.get("x-kubernetes-int-or-string"):
        assert schema.get("pattern") == facts.QUANTITY_PATTERN, path
        return {path: "quantity"}
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict) and additional.get("x-kubernetes-int-or-string"):
        assert additional.get("pattern") == facts.QUANTITY_PATTERN, path
        return {path: "resources"}
    parts = [str(schema["type"])]
    if "format" in schema:
        parts.append(str(schema["format"]))
    if "minimum" in schema:
        parts.append(f"min={schema['minimum']}")
    if schema.get("nullable"):
        parts.append("nullable")
    if "enum" in schema:
        parts.append("enum=" + "|".join(schema["enum"]))
    if schema.get("required"):
        parts.append("required=" + ",".join(schema["required"]))
    if schema.get("x-kubernetes-map-type"):
        parts.append(str(schema["x-kubernetes-map-type"]))
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        parts.append("preserve-unknown")
    if schema.get("x-kubernetes-validations"):
        parts.append(f"cel={len(schema['x-kubernetes-validations'])}")
    described = {path or ".": " ".join(parts)}
    for name, child in (schema.get("properties") or {}).items():
        described.update(describe(child, f"{path}.{name}" if path else name))
    if "items" in schema:
        described.update(describe(schema["items"], f"{path}[]"))
    return described


def _without_schema(version: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in version.items() if k not in ("schema", "additionalPrinterColumns")}


@pytest.mark.parametrize(
    ("plural", "names", "versions"),
    [
        (VPA, facts.VPA_NAMES, facts.VPA_VERSIONS),
        (CHECKPOINTS, facts.CHECKPOINT_NAMES, facts.CHECKPOINT_VERSIONS),
    ],
    ids=["vpa", "checkpoint"],
)
def test_names_scope_and_versions_are_upstreams(
    plural: str, names: dict[str, Any], versions: list[dict[str, Any]]
) -> None:
    document = crd(plural)
    assert document["apiVersion"] == "apiextensions.k8s.io/v1"
    assert document["metadata"]["name"] == f"{plural}.{facts.GROUP}"
    key, value = facts.APPROVAL_ANNOTATION
    assert document["metadata"]["annotations"][key] == value
    assert document["spec"]["group"] == facts.GROUP
    assert document["spec"]["scope"] == "Namespaced"
    assert document["spec"]["names"] == names
    assert [_without_schema(v) for v in document["spec"]["versions"]] == versions


def test_vpa_printer_columns_are_upstreams() -> None:
    versions = {v["name"]: v for v in crd(VPA)["spec"]["versions"]}
    assert versions["v1"]["additionalPrinterColumns"] == facts.VPA_PRINTER_COLUMNS
    assert "additionalPrinterColumns" not in versions["v1beta2"]


@pytest.mark.parametrize(
    ("plural", "version", "expected"),
    [
        (VPA, "v1", facts.VPA_V1_FIELDS),
        (VPA, "v1beta2", facts.VPA_V1BETA2_FIELDS),
        (CHECKPOINTS, "v1", facts.CHECKPOINT_FIELDS),
        (CHECKPOINTS, "v1beta2", facts.CHECKPOINT_FIELDS),
    ],
    ids=["vpa-v1", "vpa-v1beta2", "checkpoint-v1", "checkpoint-v1beta2"],
)
def test_every_field_has_upstreams_type_and_constraints(
    plural: str, version: str, expected: dict[str, str]
) -> None:
    schema = version_schema(crd(plural), version)
    assert structural_errors(schema) == []
    described = describe(schema)
    assert sorted(set(described) - set(expected)) == [], "fields upstream does not have"
    assert sorted(set(expected) - set(described)) == [], "upstream fields missing"
    assert described == expected


def test_startup_boost_cel_rules_are_upstreams() -> None:
    spec = version_schema(crd(VPA), "v1")["properties"]["spec"]["properties"]
    policy = spec["resourcePolicy"]["properties"]["containerPolicies"]["items"]["properties"]
    for boost in (spec["startupBoost"], policy["startupBoost"]):
        assert boost["properties"]["cpu"]["x-kubernetes-validations"] == facts.STARTUP_BOOST_RULES


def _v1() -> dict[str, Any]:
    return version_schema(crd(VPA), "v1")


@pytest.mark.parametrize("example", vpa_examples(), ids=lambda e: e["metadata"]["name"])
def test_upstream_examples_are_valid_and_nothing_is_pruned(example: dict[str, Any]) -> None:
    assert check_object(_v1(), example) == SchemaReport(errors=(), pruned=())


def test_a_recommender_status_is_valid_and_nothing_is_pruned() -> None:
    vpa = {**vpa_examples()[0], "status": vpa_status()}
    assert check_object(_v1(), vpa) == SchemaReport(errors=(), pruned=())


def test_an_upstream_checkpoint_with_histograms_is_valid_and_nothing_is_pruned() -> None:
    checkpoint = checkpoint_example()
    schema = version_schema(crd(CHECKPOINTS), "v1")
    assert check_object(schema, checkpoint) == SchemaReport(errors=(), pruned=())
    # bucketWeights keeps any bucket index (x-kubernetes-preserve-unknown-fields).
    checkpoint["status"]["cpuHistogram"]["bucketWeights"]["175"] = 1
    checkpoint["status"]["memoryHistogram"]["referenceTimestamp"] = None  # nullable
    assert check_object(schema, checkpoint) == SchemaReport(errors=(), pruned=())


def _hamster() -> dict[str, Any]:
    return copy.deepcopy(vpa_examples()[0])


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        node[last] = value

    return change


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def change(obj: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        del node[last]

    return change


POLICY = "spec.resourcePolicy.containerPolicies.0"

BAD_OBJECTS = [
    (
        "unknown update mode",
        _set("spec.updatePolicy.updateMode", "Sometimes"),
        'spec.updatePolicy.updateMode: Unsupported value: "Sometimes": supported values: '
        '"Off", "Initial", "Recreate", "InPlaceOrRecreate", "InPlace", "Auto"',
    ),
    ("no targetRef", _delete("spec.targetRef"), "spec.targetRef: Required value"),
    (
        "targetRef without name",
        _delete("spec.targetRef.name"),
        "spec.targetRef.name: Required value",
    ),
    (
        "evictAfterOOMSeconds below 1",
        _set("spec.updatePolicy.evictAfterOOMSeconds", 0),
        "spec.updatePolicy.evictAfterOOMSeconds: Invalid value: 0: "
        "spec.updatePolicy.evictAfterOOMSeconds in body should be greater than or equal to 1",
    ),
    (
        "memoryAggregationIntervalCount below 1",
        _set(f"{POLICY}.memoryAggregationIntervalCount", 0),
        "spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalCount: Invalid "
        "value: 0: spec.resourcePolicy.containerPolicies[0].memoryAggregationIntervalCount in "
        "body should be greater than or equal to 1",
    ),
    (
        "minReplicas beyond int32",
        _set("spec.updatePolicy.minReplicas", 2**31),
        f"spec.updatePolicy.minReplicas: Invalid value: {2**31}: out of range for int32",
    ),
    (
        "minReplicas as a string",
        _set("spec.updatePolicy.minReplicas", "2"),
        'spec.updatePolicy.minReplicas: Invalid value: "string": spec.updatePolicy.minReplicas '
        'in body must be of type integer: "string"',
    ),
    (
        "quantity that is not a Quantity",
        _set(f"{POLICY}.minAllowed.cpu", "1.5 cores"),
        'spec.resourcePolicy.containerPolicies[0].minAllowed.cpu: Invalid value: "1.5 cores": '
        "spec.resourcePolicy.containerPolicies[0].minAllowed.cpu in body should match "
        f"'{facts.QUANTITY_PATTERN}'",
    ),
    (
        "fractional YAML number as a quantity",
        _set(f"{POLICY}.maxAllowed.cpu", 0.5),
        'spec.resourcePolicy.containerPolicies[0].maxAllowed.cpu: Invalid value: "number": '
        "spec.resourcePolicy.containerPolicies[0].maxAllowed.cpu in body must be of type "
        "integer,string",
    ),
    (
        "unknown controlledValues",
        _set(f"{POLICY}.controlledValues", "Limits"),
        'spec.resourcePolicy.containerPolicies[0].controlledValues: Unsupported value: "Limits": '
        'supported values: "RequestsAndLimits", "RequestsOnly"',
    ),
    (
        "container mode Disabled",
        _set(f"{POLICY}.mode", "Disabled"),
        'spec.resourcePolicy.containerPolicies[0].mode: Unsupported value: "Disabled": '
        'supported values: "Auto", "Off"',
    ),
    (
        "eviction requirement without resources",
        _set(
            "spec.updatePolicy.evictionRequirements",
            [{"changeRequirement": "TargetHigherThanRequests"}],
        ),
        "spec.updatePolicy.evictionRequirements[0].resources: Required value",
    ),
    (
        "recommender without a name",
        _set("spec.recommenders", [{}]),
        "spec.recommenders[0].name: Required value",
    ),
    (
        "Factor boost with a quantity (CEL)",
        _set("spec.startupBoost", {"cpu": {"type": "Factor", "quantity": "1"}}),
        'spec.startupBoost.cpu: Invalid value: "object": factor is required when type is Factor '
        "and forbidden otherwise",
    ),
    (
        "Quantity boost without a quantity (CEL)",
        _set(f"{POLICY}.startupBoost", {"cpu": {"type": "Quantity", "factor": 2}}),
        'spec.resourcePolicy.containerPolicies[0].startupBoost.cpu: Invalid value: "object": '
        "quantity is required when type is Quantity and forbidden otherwise",
    ),
    (
        "condition without a type",
        _set("status", {"conditions": [{"status": "True"}]}),
        "status.conditions[0].type: Required value",
    ),
    (
        "condition time that is not a time",
        _set(
            "status", {"conditions": [{"type": "X", "status": "True", "lastTransitionTime": "x"}]}
        ),
        'status.conditions[0].lastTransitionTime: Invalid value: "x": '
        "status.conditions[0].lastTransitionTime in body must be of type date-time",
    ),
    (
        "recommendation without a target",
        _set("status", {"recommendation": {"containerRecommendations": [{"containerName": "a"}]}}),
        "status.recommendation.containerRecommendations[0].target: Required value",
    ),
]


@pytest.mark.parametrize(
    ("change", "error"), [(c, e) for _, c, e in BAD_OBJECTS], ids=[n for n, _, _ in BAD_OBJECTS]
)
def test_objects_upstream_refuses_are_refused(
    change: Callable[[dict[str, Any]], None], error: str
) -> None:
    vpa = _hamster()
    change(vpa)
    report = check_object(_v1(), vpa)
    assert error in report.errors, report.errors
    assert report.pruned == ()


def test_undeclared_fields_are_pruned() -> None:
    vpa = _hamster()
    vpa["spec"]["updatePolicy"] = {"updateMod": "Off"}  # a typo kube-apiserver drops silently
    vpa["spec"]["resourcePolicy"]["containerPolicies"][0]["maxLimitAllowed"] = {"cpu": "2"}
    report = check_object(_v1(), vpa)
    assert report == SchemaReport(
        errors=(),
        pruned=(
            "spec.resourcePolicy.containerPolicies[0].maxLimitAllowed",
            "spec.updatePolicy.updateMod",
        ),
    )


def test_the_early_startup_boost_draft_is_refused() -> None:
    # An early draft of upstream's docs wrote `cpu: {value: "3", duration: 10s}`; the released
    # API has `type`/`factor`/`durationSeconds`, so that object loses both fields and fails.
    vpa = _hamster()
    vpa["spec"]["startupBoost"] = {"cpu": {"value": "3", "duration": "10s"}}
    report = check_object(_v1(), vpa)
    assert "spec.startupBoost.cpu.type: Required value" in report.errors
    assert report.pruned == ("spec.startupBoost.cpu.value", "spec.startupBoost.cpu.duration")


def test_v1beta2_is_the_old_schema() -> None:
    schema = version_schema(crd(VPA), "v1beta2")
    old: dict[str, Any] = {
        "apiVersion": "autoscaling.k8s.io/v1beta2",
        "kind": "VerticalPodAutoscaler",
        "metadata": {"name": "hamster-vpa"},
        "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "hamster"}},
    }
    assert check_object(schema, old) == SchemaReport(errors=(), pruned=())
    old["spec"]["updatePolicy"] = {"updateMode": "InPlaceOrRecreate", "minReplicas": 1}
    report = check_object(schema, old)
    assert report.pruned == ("spec.updatePolicy.minReplicas",)
    assert report.errors == (
        'spec.updatePolicy.updateMode: Unsupported value: "InPlaceOrRecreate": supported '
        'values: "Off", "Initial", "Recreate", "Auto"',
    )


def test_the_schema_checker_reports_what_it_does_not_understand() -> None:
    # A keyword or CEL rule the checker cannot evaluate must fail the tests, not pass them.
    assert structural_errors(
        {
            "type": "object",
            "properties": {
                "a": {"type": "string", "maxLength": 3},
                "b": {
                    "type": "object",
                    "properties": {"c": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "size(self.c) > 1", "message": "m"}],
                },
                "d": {"anyOf": [{"type": "string"}]},
                "e": {"type": "array"},
            },
        }
    ) == [
        "a: keywords the checker does not know: ['maxLength']",
        "b: CEL rule the checker cannot evaluate: 'size(self.c) > 1'",
        "d: anyOf is only allowed with x-kubernetes-int-or-string",
        "e: an array needs items",
    ]
