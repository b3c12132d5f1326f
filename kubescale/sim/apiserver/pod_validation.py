"""The resource rules of kube-apiserver's pod validation (``ValidateResourceRequirements``).

``pkg/apis/core/validation`` checks every container's and init container's resources when a pod
is created and when it is resized (``pods/resize``); a violation is ``422 Invalid`` with one
cause per error, after the mutating webhooks have run — so a webhook that writes a request
above its limit makes the pod uncreatable, which is what these rules let tests see:

* a quantity below zero: ``spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must
  be greater than or equal to 0`` (limits first, then requests);
* a request above its limit: ``spec.containers[0].resources.requests: Invalid value: "4": must be
  less than or equal to cpu limit of 50m`` (the path names the whole ``requests`` map, as
  upstream's);
* a resource that cannot be overcommitted (extended resources such as ``nvidia.com/gpu``, huge
  pages): a request must equal its limit (``must be equal to <res> limit of <limit>``), and a
  request without a limit is ``spec.containers[0].resources.limits: Required value: Limit must
  be set for non overcommitable resources``.

Resource names are not checked here. Maps are visited in the stored order (Go: random).

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubescale.objects.quantities import Quantity, QuantityError

from .errors import FieldCause

__all__ = ["pod_resource_causes"]

_NATIVE_DOMAIN: Final = "kubernetes.io/"
_HUGE_PAGES_PREFIX: Final = "hugepages-"


def _overcommit_allowed(name: str) -> bool:
    """helper.IsOvercommitAllowed: native resources other than huge pages."""
    native = "/" not in name or _NATIVE_DOMAIN in name
    return native and not name.startswith(_HUGE_PAGES_PREFIX)


def _quantities(value: object) -> dict[str, Quantity]:
    if not isinstance(value, Mapping):
        return {}
    parsed: dict[str, Quantity] = {}
    for name, raw in value.items():
        try:
            parsed[str(name)] = Quantity.from_json(raw)
        except QuantityError:
            continue
    return parsed


def _quoted(quantity: Quantity) -> str:
    return f'"{quantity}"'


def _container_causes(container: Mapping[str, Any], path: str) -> list[FieldCause]:
    resources = container.get("resources")
    if not isinstance(resources, Mapping):
        return []
    limits = _quantities(resources.get("limits"))
    requests = _quantities(resources.get("requests"))
    causes: list[FieldCause] = []
    for name, bound in limits.items():
        if bound.sign() < 0:
            message = f"Invalid value: {_quoted(bound)}: must be greater than or equal to 0"
            causes.append(("FieldValueInvalid", f"{path}.limits[{name}]", message))
    for name, request in requests.items():
        if request.sign() < 0:
            message = f"Invalid value: {_quoted(request)}: must be greater than or equal to 0"
            causes.append(("FieldValueInvalid", f"{path}.requests[{name}]", message))
        limit = limits.get(name)
        if limit is not None:
            if request != limit and not _overcommit_allowed(name):
                message = (
                    f"Invalid value: {_quoted(request)}: must be equal to {name} limit of {limit}"
                )
                causes.append(("FieldValueInvalid", f"{path}.requests", message))
            elif request > limit:
                message = (
                    f"Invalid value: {_quoted(request)}: must be less than or equal to {name} "
                    f"limit of {limit}"
                )
                causes.append(("FieldValueInvalid", f"{path}.requests", message))
        elif not _overcommit_allowed(name):
            message = "Required value: Limit must be set for non overcommitable resources"
            causes.append(("FieldValueRequired", f"{path}.limits", message))
    return causes


def pod_resource_causes(pod: Mapping[str, Any]) -> list[FieldCause]:
    """The resource causes of ``ValidatePodCreate`` / ``ValidatePodResize`` for ``pod``."""
    spec = pod.get("spec")
    if not isinstance(spec, Mapping):
        return []
    causes: list[FieldCause] = []
    for list_name in ("containers", "initContainers"):
        containers = spec.get(list_name)
        for index, container in enumerate(containers if isinstance(containers, list) else ()):
            if isinstance(container, Mapping):
                causes.extend(_container_causes(container, f"spec.{list_name}[{index}].resources"))
    return causes
