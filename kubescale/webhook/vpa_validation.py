"""VPA object admission: upstream's ``resource/vpa/handler.go`` on raw API dicts.

* the object (and on UPDATE the old object) is decoded first; a decoding failure is one
  ``InternalError`` at field path ``.`` (:mod:`kubescale.webhook.vpa_decoding`);
* the old object is an empty VPA on CREATE, not nil -- so ``spec.targetRef: Required value``
  never fires from the webhook (the CRD schema requires ``targetRef`` instead) -- and decides,
  with the feature gates, which gated fields are allowed;
* the rules of :mod:`kubescale.webhook.vpa_spec_rules` (upstream's ``validation.go``) give errors
  and warnings; any error denies the request with ``apierrors.NewInvalid`` (group
  ``autoscaling.k8s.io``, kind ``VerticalPodAutoscaler``, :func:`kubescale.webhook.field_errors.
  invalid_status`);
* an allowed VPA without ``spec.updatePolicy`` gets
  ``add /spec/updatePolicy {"updateMode": "Recreate"}`` (Recreate since ``Auto`` was
  deprecated, kubernetes/autoscaler#8424).

Warnings are returned whether or not the object is denied.

Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubescale.objects.views import Meta, spec_of
from kubescale.webhook.field_errors import FieldError, internal_error, invalid_status
from kubescale.webhook.vpa_decoding import vpa_decode_error
from kubescale.webhook.vpa_spec_rules import (
    CPU_STARTUP_BOOST_GATE,
    IN_PLACE_GATE,
    PER_VPA_CONFIG_GATE,
    SUPPORTED_UPDATE_MODES,
    validate_vpa,
)

__all__ = [
    "CPU_STARTUP_BOOST_GATE",
    "IN_PLACE_GATE",
    "PER_VPA_CONFIG_GATE",
    "SUPPORTED_UPDATE_MODES",
    "VPA_GROUP",
    "VPA_KIND",
    "VpaAdmission",
    "admit_vpa",
    "validate_vpa",
]

VPA_GROUP = "autoscaling.k8s.io"
VPA_KIND = "VerticalPodAutoscaler"
_DEFAULT_UPDATE_MODE = "Recreate"


@dataclass(frozen=True)
class VpaAdmission:
    """The decision for one VPA CREATE or UPDATE."""

    allowed: bool
    status: dict[str, Any] | None
    """``metav1.Status`` (``apierrors.NewInvalid``) when denied, else ``None``."""
    warnings: tuple[str, ...]
    patches: list[dict[str, Any]]
    """The defaulting JSON patch (empty when denied or nothing to default)."""


def _obj(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _name(vpa: object) -> str:
    obj = _obj(vpa)
    return Meta(obj).name if obj is not None else ""


def _denied(vpa: object, errors: list[FieldError], warnings: list[str]) -> VpaAdmission:
    status = invalid_status(group=VPA_GROUP, kind=VPA_KIND, name=_name(vpa), errors=errors)
    return VpaAdmission(allowed=False, status=status, warnings=tuple(warnings), patches=[])


def admit_vpa(
    *,
    operation: str,
    vpa: dict[str, Any],
    old_vpa: dict[str, Any] | None,
    feature_gates: Mapping[str, bool],
) -> VpaAdmission:
    """Validate and default one VPA (the admission request's ``object``/``oldObject``).

    ``operation`` is the AdmissionRequest's (``CREATE``/``UPDATE``); the old object is read
    only on UPDATE. ``feature_gates`` maps ``InPlace``, ``PerVPAConfig`` and
    ``CPUStartupBoost`` to on/off (missing = off, their default).
    """
    decode_error = vpa_decode_error(vpa)
    if decode_error is not None:
        return _denied(vpa, [internal_error(".", decode_error)], [])
    old: Mapping[str, Any] = {}
    if operation == "UPDATE":
        if old_vpa is None:
            return _denied(vpa, [internal_error(".", "unexpected end of JSON input")], [])
        old_error = vpa_decode_error(old_vpa)
        if old_error is not None:
            return _denied(vpa, [internal_error(".", old_error)], [])
        old = old_vpa
    errors, warnings = validate_vpa(vpa, old_vpa=old, feature_gates=feature_gates)
    if errors:
        return _denied(vpa, errors, warnings)
    patches: list[dict[str, Any]] = []
    spec = spec_of(vpa)
    if spec.get("updatePolicy") is None:
        # Sets the default updatePolicy (Recreate since Auto's deprecation).
        patches.append(
            {
                "op": "add",
                "path": "/spec/updatePolicy",
                "value": {"updateMode": _DEFAULT_UPDATE_MODE},
            }
        )
    return VpaAdmission(allowed=True, status=None, warnings=tuple(warnings), patches=patches)
