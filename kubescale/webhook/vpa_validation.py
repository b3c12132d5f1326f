"""VPA object admission: upstream's ``resource/vpa/handler.go`` on the request's raw objects.

* the object (and on UPDATE the old object) is decoded first, the one place the untrusted JSON
  is read; a decoding failure is one ``InternalError`` at field path ``.``
  (:func:`kubescale.webhook.vpa_decoding.decode_vpa`); the rules read the typed VPA it gives;
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

from kubescale.objects.admission_review import JsonPatchOperation, Status
from kubescale.objects.views import Meta, spec_of
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.webhook.field_errors import FieldError, internal_error, invalid_status
from kubescale.webhook.vpa_decoding import VpaDecodeError, decode_vpa
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
    status: Status | None
    """``metav1.Status`` (``apierrors.NewInvalid``) when denied, else ``None``."""
    warnings: tuple[str, ...]
    patches: list[JsonPatchOperation]
    """The defaulting JSON patch (empty when denied or nothing to default)."""


def _name(vpa: object) -> str:
    # the raw object (untrusted): its metadata.name as Meta reads it, if it is an object
    return Meta(vpa).name if isinstance(vpa, Mapping) else ""


def _denied(vpa: object, errors: list[FieldError], warnings: list[str]) -> VpaAdmission:
    status = invalid_status(group=VPA_GROUP, kind=VPA_KIND, name=_name(vpa), errors=errors)
    return VpaAdmission(allowed=False, status=status, warnings=tuple(warnings), patches=[])


def admit_vpa(
    *,
    operation: str,
    vpa: object,
    old_vpa: object,
    feature_gates: Mapping[str, bool],
) -> VpaAdmission:
    """Validate and default one VPA (the admission request's ``object``/``oldObject``, raw JSON
    as sent: ``None`` when the request had none).

    ``operation`` is the AdmissionRequest's (``CREATE``/``UPDATE``); the old object is read
    only on UPDATE. ``feature_gates`` maps ``InPlace``, ``PerVPAConfig`` and
    ``CPUStartupBoost`` to on/off (missing = off, their default).
    """
    decoded = decode_vpa(vpa)
    if isinstance(decoded, VpaDecodeError):
        return _denied(vpa, [internal_error(".", decoded.message)], [])
    old: VerticalPodAutoscaler = {}
    if operation == "UPDATE":
        if old_vpa is None:
            return _denied(vpa, [internal_error(".", "unexpected end of JSON input")], [])
        old_decoded = decode_vpa(old_vpa)
        if isinstance(old_decoded, VpaDecodeError):
            return _denied(vpa, [internal_error(".", old_decoded.message)], [])
        old = old_decoded
    errors, warnings = validate_vpa(decoded, old_vpa=old, feature_gates=feature_gates)
    if errors:
        return _denied(vpa, errors, warnings)
    patches: list[JsonPatchOperation] = []
    spec = spec_of(decoded)
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
