"""The VPA spec rules of upstream's ``resource/vpa/validation.go``, on decoded raw dicts.

Validation options come from the *old* object (``getValidationOptionsForVPA``): a feature-gated
field is allowed when its gate is on or when the old object already used it (``allowCPUBoost``,
``allowPerVPAConfig``, ``allowInPlace``), and unsupported ``controlledResources`` names already
in the old object are kept with a warning. The rules, in upstream's order:

* ``spec.updatePolicy``: ``updateMode`` Required when the policy is set, NotSupported outside
  Off/Initial/Recreate/Auto/InPlaceOrRecreate/InPlace (listing the non-deprecated ones, sorted),
  a deprecation warning for ``Auto`` (kubernetes/autoscaler#8424), Forbidden ``InPlace`` without
  its gate; ``minReplicas`` > 0; ``evictAfterOOMSeconds`` >= 1 behind ``PerVPAConfig``;
* each ``spec.resourcePolicy.containerPolicies[i]``: ``containerName`` Required; ``mode``
  Auto|Off; ``minAllowed``/``maxAllowed`` in whole milli-CPUs and whole bytes, ``maxAllowed`` not
  below ``minAllowed``; no ``controlledValues: RequestsAndLimits`` with ``mode: Off``;
  ``controlledResources`` only cpu/memory; ``oomBumpUpRatio`` >= 1.0 (read in milli-units),
  ``oomMinBumpUp`` >= 0, memory aggregation interval seconds and count >= 1, all behind
  ``PerVPAConfig``; the container's ``startupBoost``;
* ``spec.startupBoost``: Forbidden without ``CPUStartupBoost``; ``cpu.type`` Factor|Quantity;
  ``factor`` >= 1; ``quantity`` in whole milli-CPUs;
* at most one ``spec.recommenders`` entry.

Bad values print as current apimachinery prints them (:mod:`kubescale.webhook.field_errors`):
the enum fields (update mode, scaling mode, boost type, controlled resources) are Go named
string types, shown as JSON strings (``Unsupported value: "broken"``); quantities are passed
as ``String()`` and shown with ``%q``.

Upstream iterates ``minAllowed``/``maxAllowed`` as Go maps (random order); here resources are
visited sorted by name, so several errors in one map come out in a fixed order. The VPA is the
typed object :func:`kubescale.webhook.vpa_decoding.decode_vpa` made of the request (its fields
of upstream's Go types, ``null`` fields left out, quantities as text).

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kubescale.objects.meta import ResourceList
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import spec_of
from kubescale.objects.vpa import (
    ContainerResourcePolicy,
    PodUpdatePolicy,
    StartupBoost,
    VerticalPodAutoscaler,
    VerticalPodAutoscalerSpec,
)
from kubescale.webhook.field_errors import (
    FieldError,
    forbidden,
    go_float,
    go_json_string,
    go_quote,
    invalid,
    not_supported,
    required,
    too_many,
)

__all__ = [
    "CPU_STARTUP_BOOST_GATE",
    "IN_PLACE_GATE",
    "PER_VPA_CONFIG_GATE",
    "SUPPORTED_UPDATE_MODES",
    "validate_vpa",
]

# pkg/features: alpha gates, off by default.
CPU_STARTUP_BOOST_GATE = "CPUStartupBoost"
IN_PLACE_GATE = "InPlace"
PER_VPA_CONFIG_GATE = "PerVPAConfig"

# GetUpdateModes / GetUpdateModesList (the list skips the deprecated Auto and is sorted).
_AUTO = "Auto"
_IN_PLACE = "InPlace"
_UPDATE_MODES = frozenset({"Off", "Initial", "Recreate", _AUTO, "InPlaceOrRecreate", _IN_PLACE})
SUPPORTED_UPDATE_MODES = tuple(sorted(_UPDATE_MODES - {_AUTO}))
_SCALING_MODES = ("Auto", "Off")  # GetPossibleScalingModes, sorted
_CONTROLLED_RESOURCES = ("cpu", "memory")
_BOOST_TYPES = ("Factor", "Quantity")
_ISSUE_8424 = "https://github.com/kubernetes/autoscaler/issues/8424"
_NANOS_PER_MILLI = 10**6
_NANOS_PER_UNIT = 10**9
_MAX_INT64 = 2**63 - 1


@dataclass(frozen=True)
class _Options:
    """VPAValidationOptions."""

    allow_cpu_startup_boost: bool
    allow_per_vpa_config: bool
    allow_in_place: bool
    existing_controlled_resources: frozenset[str]


# ---------------------------------------------------------------------------------------------
# Reading decoded fields.


def _quantity(text: str) -> Quantity:
    # resource.Quantity.UnmarshalJSON; the decoder already proved this parses (and wrote a
    # bare number, or a null map value, as its text).
    return Quantity.parse(text)


def _policies(spec: VerticalPodAutoscalerSpec) -> list[ContainerResourcePolicy]:
    return spec.get("resourcePolicy", {}).get("containerPolicies", [])


# ---------------------------------------------------------------------------------------------
# Validation options (getValidationOptionsForVPA).


def _options(old_vpa: VerticalPodAutoscaler, gates: Mapping[str, bool]) -> _Options:
    spec = spec_of(old_vpa)
    policies = _policies(spec)
    boost = spec.get("startupBoost", {})
    update_policy = spec.get("updatePolicy", {})
    allow_boost = gates.get(CPU_STARTUP_BOOST_GATE, False) or (
        boost.get("cpu") is not None or any(p.get("startupBoost") is not None for p in policies)
    )
    per_vpa_fields = (
        "oomBumpUpRatio",
        "oomMinBumpUp",
        "memoryAggregationIntervalCount",
        "memoryAggregationIntervalSeconds",
    )
    allow_per_vpa = gates.get(PER_VPA_CONFIG_GATE, False) or (
        update_policy.get("evictAfterOOMSeconds") is not None
        or any(p.get(name) is not None for p in policies for name in per_vpa_fields)
    )
    allow_in_place = gates.get(IN_PLACE_GATE, False) or update_policy.get("updateMode") == _IN_PLACE
    # A null item (decoded as "") is left out, as it always was here.
    existing = frozenset(
        name for p in policies for name in p.get("controlledResources", []) if name
    )
    return _Options(
        allow_cpu_startup_boost=bool(allow_boost),
        allow_per_vpa_config=bool(allow_per_vpa),
        allow_in_place=bool(allow_in_place),
        existing_controlled_resources=existing,
    )


# ---------------------------------------------------------------------------------------------
# Rules (validateVPASpec and friends).


def _update_policy(
    policy: PodUpdatePolicy, path: str, opts: _Options, errors: list[FieldError]
) -> list[str]:
    warnings: list[str] = []
    mode = policy.get("updateMode")
    mode_path = f"{path}.updateMode"
    if mode is None:
        errors.append(required(mode_path, "updateMode is required if UpdatePolicy is used"))
    else:
        if mode not in _UPDATE_MODES:
            errors.append(not_supported(mode_path, go_json_string(mode), SUPPORTED_UPDATE_MODES))
        if mode == _AUTO:
            listed = "[" + " ".join(SUPPORTED_UPDATE_MODES) + "]"
            warnings.append(
                f"{path}: {go_quote(mode)} mode is deprecated and will be removed in a future"
                f" API version. Use explicit update modes like: {listed}. See {_ISSUE_8424}"
                " for more details."
            )
        if mode == _IN_PLACE and not opts.allow_in_place:
            errors.append(
                forbidden(
                    mode_path,
                    f"in order to use UpdateMode {_IN_PLACE}, you must enable feature gate"
                    f" {IN_PLACE_GATE} in the admission-controller args",
                )
            )
    min_replicas = policy.get("minReplicas")
    if min_replicas is not None and min_replicas <= 0:
        errors.append(
            invalid(f"{path}.minReplicas", str(min_replicas), "minReplicas has to be positive")
        )
    evict_after = policy.get("evictAfterOOMSeconds")
    if evict_after is not None:
        field_path = f"{path}.evictAfterOOMSeconds"
        if not opts.allow_per_vpa_config:
            errors.append(_per_vpa_forbidden(field_path))
        elif evict_after < 1:
            errors.append(
                invalid(field_path, str(evict_after), "must be greater than or equal to 1")
            )
    return warnings


def _per_vpa_forbidden(path: str) -> FieldError:
    return forbidden(path, f"not supported when feature flag {PER_VPA_CONFIG_GATE} is disabled")


def _resolution(path: str, resource: str, value: Quantity) -> list[FieldError]:
    # validateResourceResolution: cpu in whole milli-CPUs, memory in whole bytes, others free.
    if resource == "cpu":
        return _cpu_resolution(path, value)
    if resource == "memory" and value.nanos % _NANOS_PER_UNIT:
        return [invalid(path, go_quote(str(value)), "must be a whole number of bytes")]
    return []


def _cpu_resolution(path: str, value: Quantity) -> list[FieldError]:
    if value.nanos % _NANOS_PER_MILLI:
        return [invalid(path, go_quote(str(value)), "must be a whole number of milli CPUs")]
    return []


def _resource_list(resources: ResourceList | None) -> dict[str, Quantity]:
    return {name: _quantity(text) for name, text in sorted((resources or {}).items())}


def _container_policy(
    policy: ContainerResourcePolicy, path: str, opts: _Options, errors: list[FieldError]
) -> list[str]:
    warnings: list[str] = []
    if not policy.get("containerName"):
        errors.append(required(f"{path}.containerName"))
    mode = policy.get("mode")
    if mode is not None and mode not in _SCALING_MODES:
        errors.append(not_supported(f"{path}.mode", go_json_string(mode), _SCALING_MODES))
    minimum = _resource_list(policy.get("minAllowed"))
    maximum = _resource_list(policy.get("maxAllowed"))
    for resource, low in minimum.items():
        errors.extend(_resolution(f"{path}.minAllowed[{resource}]", resource, low))
        high = maximum.get(resource)
        if high is not None and high < low:
            errors.append(
                invalid(
                    f"{path}.maxAllowed[{resource}]",
                    go_quote(str(high)),
                    f'max resource for {resource} is lower than min of "{low}"',
                )
            )
    for resource, high in maximum.items():
        errors.extend(_resolution(f"{path}.maxAllowed[{resource}]", resource, high))
    controlled_values = policy.get("controlledValues")
    if mode == "Off" and controlled_values == "RequestsAndLimits":
        errors.append(
            forbidden(
                f"{path}.controlledValues",
                "controlledValues shouldn't be specified if container scaling mode is off",
            )
        )
    controlled = policy.get("controlledResources")
    if controlled is not None:
        for index, resource in enumerate(controlled):  # a null entry decoded as ""
            if resource in _CONTROLLED_RESOURCES:
                continue
            resource_path = f"{path}.controlledResources[{index}]"
            if resource in opts.existing_controlled_resources:
                warnings.append(
                    f"{resource_path}: unsupported value {go_quote(resource)} is allowed only"
                    " because it is present in the existing VPA object; supported values:"
                    ' "cpu", "memory"'
                )
            else:
                # a corev1.ResourceName: current apimachinery prints its JSON encoding.
                errors.append(
                    not_supported(resource_path, go_json_string(resource), _CONTROLLED_RESOURCES)
                )
    _per_vpa_policy_fields(policy, path, opts, errors)
    boost = policy.get("startupBoost")
    if boost is not None:
        errors.extend(_startup_boost(boost, f"{path}.startupBoost", opts))
    return warnings


def _per_vpa_policy_fields(
    policy: ContainerResourcePolicy, path: str, opts: _Options, errors: list[FieldError]
) -> None:
    ratio_raw = policy.get("oomBumpUpRatio")
    if ratio_raw is not None:
        if not opts.allow_per_vpa_config:
            errors.append(_per_vpa_forbidden(f"{path}.oomBumpUpRatio"))
        else:
            # float64(MilliValue()) / 1000.0, MilliValue being an int64.
            milli = min(max(_quantity(ratio_raw).milli_value(), -_MAX_INT64 - 1), _MAX_INT64)
            ratio = milli / 1000.0
            if ratio < 1.0:
                errors.append(
                    invalid(
                        f"{path}.oomBumpUpRatio",
                        go_float(ratio),
                        "must be greater than or equal to 1.0",
                    )
                )
    bump_raw = policy.get("oomMinBumpUp")
    if bump_raw is not None:
        if not opts.allow_per_vpa_config:
            errors.append(_per_vpa_forbidden(f"{path}.oomMinBumpUp"))
        else:
            bump = min(max(_quantity(bump_raw).value(), -_MAX_INT64 - 1), _MAX_INT64)
            if bump < 0:
                errors.append(
                    invalid(f"{path}.oomMinBumpUp", str(bump), "must be greater than or equal to 0")
                )
    intervals = (
        ("memoryAggregationIntervalSeconds", policy.get("memoryAggregationIntervalSeconds")),
        ("memoryAggregationIntervalCount", policy.get("memoryAggregationIntervalCount")),
    )
    for name, number in intervals:
        if number is None:
            continue
        if not opts.allow_per_vpa_config:
            errors.append(_per_vpa_forbidden(f"{path}.{name}"))
        elif number < 1:
            errors.append(
                invalid(f"{path}.{name}", str(number), "must be greater than or equal to 1")
            )


def _startup_boost(boost: StartupBoost, path: str, opts: _Options) -> list[FieldError]:
    # validateVPASpecStartupBoost.
    if not opts.allow_cpu_startup_boost:
        return [
            forbidden(
                path,
                "in order to use startupBoost, you must enable feature gate"
                f" {CPU_STARTUP_BOOST_GATE} in the admission-controller args",
            )
        ]
    cpu = boost.get("cpu")
    if cpu is None:
        return []
    cpu_path = f"{path}.cpu"
    boost_type = cpu.get("type") or ""
    if not boost_type:
        return [required(f"{cpu_path}.type", "must be either Factor or Quantity")]
    if boost_type == "Factor":
        factor = cpu.get("factor")
        if factor is None:
            return [required(f"{cpu_path}.factor", "required when type is Factor")]
        if factor < 1:
            return [invalid(f"{cpu_path}.factor", str(factor), "must be >= 1 for type Factor")]
        return []
    if boost_type == "Quantity":
        quantity = cpu.get("quantity")
        if quantity is None:
            return [required(f"{cpu_path}.quantity", "required when type is Quantity")]
        return _cpu_resolution(f"{cpu_path}.quantity", _quantity(quantity))
    return [not_supported(f"{cpu_path}.type", go_json_string(boost_type), _BOOST_TYPES)]


def validate_vpa(
    vpa: VerticalPodAutoscaler,
    *,
    old_vpa: VerticalPodAutoscaler,
    feature_gates: Mapping[str, bool],
) -> tuple[list[FieldError], list[str]]:
    """validateVPA: ``(errors, warnings)`` for a VPA :func:`~kubescale.webhook.vpa_decoding.
    decode_vpa` decoded.

    ``old_vpa`` is the object being replaced, ``{}`` on CREATE (upstream passes an empty VPA,
    never nil, so ``spec.targetRef: Required value`` cannot fire here).
    """
    opts = _options(old_vpa, feature_gates)
    errors: list[FieldError] = []
    warnings: list[str] = []
    spec = spec_of(vpa)
    update_policy = spec.get("updatePolicy")
    if update_policy is not None:
        warnings += _update_policy(update_policy, "spec.updatePolicy", opts, errors)
    for index, policy in enumerate(_policies(spec)):
        path = f"spec.resourcePolicy.containerPolicies[{index}]"
        warnings += _container_policy(policy, path, opts, errors)
    boost = spec.get("startupBoost")
    if boost is not None:
        errors.extend(_startup_boost(boost, "spec.startupBoost", opts))
    recommenders = spec.get("recommenders", [])
    if len(recommenders) > 1:
        errors.append(too_many("spec.recommenders", len(recommenders), 1))
    return errors, warnings
