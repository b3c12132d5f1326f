"""The in-tree steps around the admission webhooks that pod resources run into.

kube-apiserver's write path for a pod is: decode with defaults → in-tree mutating plugins
(LimitRanger's defaults among them) → mutating webhooks → defaults again on what the webhooks
returned → the pod's validation (``422 Invalid``) → in-tree validating plugins (LimitRanger's
checks, ``403 Forbidden``) → validating webhooks → storage. This module holds the two in-tree
steps the server models (:mod:`.limit_ranger`, :mod:`.pod_validation`):

* :func:`mutate` — LimitRanger's defaults, pods CREATE only;
* :func:`validate` — on pods CREATE and ``pods/resize``: the resource rules of pod validation,
  then LimitRanger's checks against the namespace's LimitRanges (LimitRanger validates a resize
  since Kubernetes 1.33; it does not default one).

Other pod updates change no resources (``ValidatePodUpdate`` forbids it), so they are left
alone, as LimitRanger does.
"""

from __future__ import annotations

from typing import Any, Final

from kubescale.kube.resources import LIMIT_RANGES, PODS, ResourceType

from . import errors, strategy
from .json_copy import json_copy
from .limit_ranger import limit_range_violation, with_limit_range_defaults
from .pod_validation import pod_resource_causes
from .storage import Storage

__all__ = ["mutate", "validate"]

_RESIZE: Final = "resize"


def _is_pod(rt: ResourceType) -> bool:
    return rt.key == PODS.key


def _namespace_and_name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def mutate(
    store: Storage, *, operation: str, rt: ResourceType, subresource: str, obj: dict[str, Any]
) -> dict[str, Any]:
    """The object after the in-tree mutating plugins (a new dict when something changed)."""
    if not _is_pod(rt) or operation != "CREATE" or subresource:
        return obj
    namespace, _ = _namespace_and_name(obj)
    return with_limit_range_defaults(obj, store.snapshots(LIMIT_RANGES, namespace))


def validate(
    store: Storage, *, operation: str, rt: ResourceType, subresource: str, obj: dict[str, Any]
) -> None:
    """Raise the :class:`~.errors.ApiError` pod validation or LimitRanger answers, if any.

    ``obj`` is what the mutating webhooks returned; the API defaults are applied to a copy
    first (a request defaults to its limit), as kube-apiserver decodes webhook output.
    """
    if not _is_pod(rt):
        return
    creating = operation == "CREATE" and not subresource
    resizing = operation == "UPDATE" and subresource == _RESIZE
    if not (creating or resizing):
        return
    defaulted = json_copy(obj)
    strategy.apply_defaults(rt, defaulted)
    namespace, name = _namespace_and_name(defaulted)
    causes = pod_resource_causes(defaulted)
    if causes:
        raise errors.invalid(rt, name, causes)
    violation = limit_range_violation(defaulted, store.snapshots(LIMIT_RANGES, namespace))
    if violation is not None:
        raise errors.status_error(
            code=403,
            reason="Forbidden",
            message=f'{errors.qualified_resource(rt)} "{name}" is forbidden: {violation}',
            details={"name": name, "kind": rt.plural},
        )
