"""A VPA's policy as every part reads it (upstream ``pkg/utils/vpa/api.go`` and ``capping.go``).

One implementation of the rules the admission webhook, the recommender's post-processors and
the updater all apply to a VPA object:

* :func:`update_mode` — ``GetUpdateMode``: ``spec.updatePolicy.updateMode``, ``Recreate`` when
  unset or empty;
* :func:`container_policy` — ``GetContainerResourcePolicy``: the ``containerPolicies`` entry
  named after the container, else the ``*`` entry, else none;
* :func:`controlled_values` — ``GetContainerControlledValues``: the entry's
  ``controlledValues``, ``RequestsAndLimits`` when unset;
* :func:`cap_to_min` / :func:`cap_to_max` — ``maybeCapToMin`` / ``maybeCapToMax``: a quantity
  raised to ``minAllowed`` / lowered to ``maxAllowed`` of its resource, a zero bound being no
  bound;
* :func:`allowed_bounds` — a container policy's ``minAllowed`` and ``maxAllowed`` as quantities
  (unparsable values left out).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import mapping, spec_of
from kubescale.objects.vpa import (
    ContainerResourcePolicy,
    PodResourcePolicy,
    VerticalPodAutoscaler,
)

__all__ = [
    "DEFAULT_CONTAINER_POLICY",
    "DEFAULT_UPDATE_MODE",
    "REQUESTS_AND_LIMITS",
    "REQUESTS_ONLY",
    "UPDATE_MODE_OFF",
    "allowed_bounds",
    "cap_to_max",
    "cap_to_min",
    "container_policy",
    "controlled_values",
    "update_mode",
]

DEFAULT_UPDATE_MODE: Final = "Recreate"
UPDATE_MODE_OFF: Final = "Off"
DEFAULT_CONTAINER_POLICY: Final = "*"
REQUESTS_AND_LIMITS: Final = "RequestsAndLimits"
REQUESTS_ONLY: Final = "RequestsOnly"


def update_mode(vpa: VerticalPodAutoscaler) -> str:
    """``GetUpdateMode``: ``spec.updatePolicy.updateMode``, or ``Recreate``."""
    mode: object = mapping(spec_of(vpa).get("updatePolicy")).get("updateMode")
    return mode if isinstance(mode, str) and mode else DEFAULT_UPDATE_MODE


def container_policy(
    container_name: str, resource_policy: PodResourcePolicy | None
) -> ContainerResourcePolicy | None:
    """``GetContainerResourcePolicy``: the entry named after the container, else the ``*``
    one."""
    # Read as sent: a malformed list or entry reads as none (an unvalidated VPA object).
    policies: object = mapping(resource_policy).get("containerPolicies")
    default: ContainerResourcePolicy | None = None
    if isinstance(policies, list):
        for entry in policies:
            if not isinstance(entry, Mapping):
                continue
            policy = cast(ContainerResourcePolicy, entry)
            if policy.get("containerName") == container_name:
                return policy
            if policy.get("containerName") == DEFAULT_CONTAINER_POLICY:
                default = policy
    return default


def controlled_values(container_name: str, resource_policy: PodResourcePolicy | None) -> str:
    """``GetContainerControlledValues``: the policy's value; ``RequestsAndLimits`` when unset."""
    policy = container_policy(container_name, resource_policy)
    value: object = policy.get("controlledValues") if policy is not None else None
    return value if isinstance(value, str) and value else REQUESTS_AND_LIMITS


def cap_to_min(
    value: Quantity, resource: str, minimum: Mapping[str, Quantity]
) -> tuple[Quantity, bool]:
    """``maybeCapToMin``: ``value`` raised to the resource's minimum (a zero minimum is none);
    whether it was raised."""
    bound = minimum.get(resource)
    if bound is not None and not bound.is_zero() and value < bound:
        return bound, True
    return value, False


def cap_to_max(
    value: Quantity, resource: str, maximum: Mapping[str, Quantity]
) -> tuple[Quantity, bool]:
    """``maybeCapToMax``: ``value`` lowered to the resource's maximum (a zero maximum is none);
    whether it was lowered."""
    bound = maximum.get(resource)
    if bound is not None and not bound.is_zero() and value > bound:
        return bound, True
    return value, False


def _quantities(value: object) -> dict[str, Quantity]:
    result: dict[str, Quantity] = {}
    for name, raw in mapping(value).items():
        try:
            result[str(name)] = Quantity.from_json(raw)
        except QuantityError:
            continue
    return result


def allowed_bounds(
    policy: ContainerResourcePolicy | None,
) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """A container policy's ``(minAllowed, maxAllowed)`` (empty without a policy)."""
    if policy is None:
        return {}, {}
    return _quantities(policy.get("minAllowed")), _quantities(policy.get("maxAllowed"))
