"""Per-kind rules of kube-apiserver's registry strategies, on raw object dicts.

What the generic store needs to know about a kind, each rule taken from the upstream strategy
(``pkg/registry/<group>/<kind>/strategy.go``) or from API defaulting
(``pkg/apis/*/v1/defaults.go``):

* annotations: 256 KiB of keys and values at most (``ValidateAnnotationsSize``);
* labels: each key a qualified name, each value at most 63 characters of the label-value
  alphabet (``ValidateLabels``); their number is not limited;
* name validation: DNS-1123 subdomain for most kinds, DNS-1123 label for namespaces, a path
  segment for custom resources (``ValidatePathSegmentName``: custom resource names may contain
  upper case);
* create resets ``status`` for kinds with a status subresource ("create cannot set status"),
  except that pods start ``Pending`` with their QoS class, namespaces ``Active``, and nodes keep
  the status the kubelet registers them with;
* the ``kubernetes.io/metadata.name`` label of namespaces, and a handful of defaults that
  autoscaling code depends on (pod ``schedulerName``,
  ``terminationGracePeriodSeconds``, requests defaulted from limits; workload ``replicas: 1``;
  a LimitRange's ``Container`` items' ``default``/``defaultRequest`` from ``max``/``min``);
* graceful deletion exists for pods only (``podStrategy.CheckGracefulDelete``);
* PUT may create the object for leases and events (``AllowCreateOnUpdate``).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from kubescale.kube.resources import ResourceType
from kubescale.objects.label_validation import label_value_errors, qualified_name_errors

from .errors import FieldCause
from .limit_ranger import default_limit_range_items
from .registry import BUILTIN_GROUPS

__all__ = [
    "allow_create_on_update",
    "allow_unconditional_update",
    "apply_defaults",
    "fill_status_zero_values",
    "graceful_delete_period",
    "pod_qos_class",
    "reset_status_on_create",
    "spec_changed",
    "validate_labels",
    "validate_name",
    "validate_update",
]

_DNS1123_LABEL: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN: Final = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + ")*"
_LABEL_RE: Final = re.compile(_DNS1123_LABEL)
_SUBDOMAIN_RE: Final = re.compile(_DNS1123_SUBDOMAIN)
_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    f"for validation is '{_DNS1123_SUBDOMAIN}')"
)
_LABEL_MESSAGE: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    f"used for validation is '{_DNS1123_LABEL}')"
)
DEFAULT_TERMINATION_GRACE_PERIOD: Final = 30
"""``SetDefaults_PodSpec``: terminationGracePeriodSeconds defaults to 30."""


_STATUS_ZERO_VALUES: Final[dict[tuple[str, str], dict[str, int]]] = {
    ("apps", "statefulsets"): {"replicas": 0, "availableReplicas": 0},
    ("apps", "replicasets"): {"replicas": 0},
    ("apps", "daemonsets"): {
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "desiredNumberScheduled": 0,
        "numberReady": 0,
    },
    ("policy", "poddisruptionbudgets"): {
        "disruptionsAllowed": 0,
        "currentHealthy": 0,
        "desiredHealthy": 0,
        "expectedPods": 0,
    },
    ("autoscaling", "horizontalpodautoscalers"): {"desiredReplicas": 0},
}
"""Status fields without ``omitempty`` in the Go types: kube-apiserver always writes them, as 0
when unset, and clients (the Python models among them) require them."""


def _json_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def validate_name(rt: ResourceType, name: str) -> list[FieldCause]:
    """The ``metadata.name`` causes kube's ValidateObjectMeta reports for this kind."""
    shown = f"Invalid value: {_json_quote(name)}: "
    causes: list[FieldCause] = []
    if rt.group not in BUILTIN_GROUPS:
        # apimachinery path.ValidatePathSegmentName (custom resources)
        if name in {".", ".."}:
            causes.append(("FieldValueInvalid", "metadata.name", f"{shown}may not be '{name}'"))
        for bad in ("/", "%"):
            if bad in name:
                causes.append(
                    ("FieldValueInvalid", "metadata.name", f"{shown}may not contain '{bad}'")
                )
        return causes
    if rt.kind == "Namespace":
        if len(name) > 63:
            causes.append(
                ("FieldValueInvalid", "metadata.name", f"{shown}must be no more than 63 characters")
            )
        if not _LABEL_RE.fullmatch(name):
            causes.append(("FieldValueInvalid", "metadata.name", shown + _LABEL_MESSAGE))
        return causes
    if len(name) > 253:
        causes.append(
            ("FieldValueInvalid", "metadata.name", f"{shown}must be no more than 253 characters")
        )
    if not _SUBDOMAIN_RE.fullmatch(name):
        causes.append(("FieldValueInvalid", "metadata.name", shown + _SUBDOMAIN_MESSAGE))
    return causes


TOTAL_ANNOTATION_SIZE_LIMIT_B: Final = 256 * (1 << 10)
"""apimachinery ``validation.TotalAnnotationSizeLimitB`` (``pkg/api/validation/objectmeta.go``):
the keys and values of an object's annotations together, in bytes, at most 256 KiB."""


def validate_annotations_size(obj: dict[str, Any]) -> list[FieldCause]:
    """``ValidateAnnotationsSize`` (part of ``ValidateObjectMeta``, every kind, create and
    update): the sum of ``len(key) + len(value)`` (Go ``len``: UTF-8 bytes) over the
    annotations above :data:`TOTAL_ANNOTATION_SIZE_LIMIT_B` is ``field.TooLong`` on
    ``metadata.annotations``."""
    annotations = (obj.get("metadata") or {}).get("annotations")
    if not isinstance(annotations, dict):
        return []
    total = 0
    for key, value in annotations.items():
        total += len(str(key).encode()) + len(str(value).encode())
    if total <= TOTAL_ANNOTATION_SIZE_LIMIT_B:
        return []
    return [
        (
            "FieldValueTooLong",
            "metadata.annotations",
            f"Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT_B} bytes",
        )
    ]


def validate_labels(obj: dict[str, Any]) -> list[FieldCause]:
    """``ValidateLabels`` (apimachinery ``pkg/apis/meta/v1/validation``, part of
    ``ValidateObjectMeta``, every kind, create and update): each key must pass
    ``IsQualifiedName`` and each value ``IsValidLabelValue`` (at most 63 characters), each
    failure a ``field.Invalid`` on ``metadata.labels`` with the offending key or value. There
    is no limit on how many labels an object has. Keys are checked in sorted order (Go's map
    order is random; sorted makes the message stable)."""
    labels = (obj.get("metadata") or {}).get("labels")
    if not isinstance(labels, dict):
        return []
    causes: list[FieldCause] = []
    for key in sorted(labels, key=str):
        value = labels[key]
        for message in qualified_name_errors(str(key)):
            shown = f"Invalid value: {_json_quote(str(key))}: {message}"
            causes.append(("FieldValueInvalid", "metadata.labels", shown))
        for message in label_value_errors(str(value)):
            shown = f"Invalid value: {_json_quote(str(value))}: {message}"
            causes.append(("FieldValueInvalid", "metadata.labels", shown))
    return causes


POD_UPDATE_FORBIDDEN: Final = (
    "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
    "to 1 if it was previously negative)"
)


def _pod_spec_for_comparison(spec: dict[str, Any]) -> dict[str, Any]:
    """The pod spec without the fields ValidatePodUpdate lets an update change."""
    masked = {
        k: v
        for k, v in spec.items()
        if k not in {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds"}
    }
    for list_name in ("containers", "initContainers"):
        if isinstance(masked.get(list_name), list):
            masked[list_name] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c
                for c in masked[list_name]
            ]
    # schedulingGates may only be removed
    masked.pop("schedulingGates", None)
    return masked


def validate_update(
    rt: ResourceType, old: dict[str, Any], new: dict[str, Any], *, subresource: str
) -> list[FieldCause]:
    """Update rules of the kind's ValidateUpdate that controllers run into.

    Pods (``ValidatePodUpdate``): the spec is immutable except container images,
    activeDeadlineSeconds, added tolerations, terminationGracePeriodSeconds and removed
    scheduling gates; resources change through ``resize``, the node through ``binding``.
    """
    if not (rt.group == "" and rt.kind == "Pod") or subresource:
        return []
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes: list[FieldCause] = []
    if _pod_spec_for_comparison(old_spec) != _pod_spec_for_comparison(new_spec):
        causes.append(("FieldValueForbidden", "spec", POD_UPDATE_FORBIDDEN))
    old_tolerations = old_spec.get("tolerations") or []
    new_tolerations = new_spec.get("tolerations") or []
    if any(t not in new_tolerations for t in old_tolerations):
        causes.append(
            (
                "FieldValueForbidden",
                "spec.tolerations",
                "Forbidden: existing toleration can not be modified except its tolerationSeconds",
            )
        )
    old_gates = old_spec.get("schedulingGates") or []
    if any(g not in old_gates for g in new_spec.get("schedulingGates") or []):
        causes.append(
            (
                "FieldValueForbidden",
                "spec.schedulingGates",
                "Forbidden: only deletion is allowed, but found new scheduling gate",
            )
        )
    return causes


def spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether anything outside ``metadata`` and ``status`` differs (a generation bump)."""
    skip = {"metadata", "status"}
    return {k: v for k, v in old.items() if k not in skip} != {
        k: v for k, v in new.items() if k not in skip
    }


def allow_unconditional_update(rt: ResourceType) -> bool:
    """``AllowUnconditionalUpdate()``: false for leases, webhook configurations, CRDs and
    custom resources, whose PUT must carry a resourceVersion."""
    if rt.group not in BUILTIN_GROUPS:
        return False
    return rt.group not in {
        "coordination.k8s.io",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
    }


def allow_create_on_update(rt: ResourceType) -> bool:
    """``AllowCreateOnUpdate()`` of the lease and event strategies."""
    return rt.kind in {"Lease", "Event"}


def apply_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
    """The API defaults (absent fields only) that autoscaling code reads back."""
    if rt.group == "" and rt.kind == "Namespace":
        # namespace strategy: the immutable name label namespaceSelectors rely on
        meta = obj.setdefault("metadata", {})
        name = meta.get("name")
        if name:
            labels = meta.get("labels")
            if not isinstance(labels, dict):
                labels = meta["labels"] = {}
            labels["kubernetes.io/metadata.name"] = name
        return
    if rt.group == "" and rt.kind == "LimitRange":
        default_limit_range_items(obj)  # SetDefaults_LimitRangeItem
        return
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        if rt.kind in {"Deployment", "ReplicaSet", "StatefulSet", "Pod"}:
            spec = obj["spec"] = {}
        else:
            return
    if rt.kind == "Pod" and rt.group == "":
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_PERIOD)
        # SetDefaults_Pod: "If limits are specified, but requests are not, default requests to
        # limits" (per resource, per container).
        for list_name in ("initContainers", "containers"):
            for container in spec.get(list_name) or []:
                if not isinstance(container, dict):
                    continue
                resources = container.get("resources")
                if not isinstance(resources, dict):
                    continue
                limits = resources.get("limits")
                if isinstance(limits, dict) and limits:
                    requests = resources.setdefault("requests", {})
                    if isinstance(requests, dict):
                        for resource_name, quantity in limits.items():
                            requests.setdefault(resource_name, quantity)
    elif rt.kind in {"Deployment", "ReplicaSet", "StatefulSet"} and rt.group == "apps":
        spec.setdefault("replicas", 1)


def reset_status_on_create(rt: ResourceType, obj: dict[str, Any]) -> None:
    """The ``PrepareForCreate`` status rule of the kind's strategy."""
    if "status" not in rt.subresources:
        return
    if rt.group == "" and rt.kind == "Pod":
        obj["status"] = {"phase": "Pending", "qosClass": pod_qos_class(obj)}
    elif rt.group == "" and rt.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif rt.group == "" and rt.kind == "Node":
        return
    elif rt.group in BUILTIN_GROUPS:
        obj["status"] = {}
    else:
        obj.pop("status", None)


def fill_status_zero_values(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Add the always-serialised status fields a Go round trip would add (as 0)."""
    zeros = _STATUS_ZERO_VALUES.get(rt.key)
    if zeros is None:
        return
    status = obj.get("status")
    if not isinstance(status, dict):
        status = obj["status"] = {}
    for field, zero in zeros.items():
        if status.get(field) is None:
            status[field] = zero


def graceful_delete_period(
    rt: ResourceType, obj: dict[str, Any], requested: int | None
) -> int | None:
    """``CheckGracefulDelete``: the grace period for a pod, ``None`` for kinds without it.

    Upstream: the requested period, else ``spec.terminationGracePeriodSeconds``; 0 for a pod
    that is not scheduled or already Succeeded/Failed; a negative period becomes 1.
    """
    if not (rt.group == "" and rt.kind == "Pod"):
        return None
    spec = obj.get("spec") or {}
    if requested is not None:
        period = requested
    else:
        period = int(spec.get("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_PERIOD))
    if not spec.get("nodeName"):
        period = 0
    if (obj.get("status") or {}).get("phase") in {"Failed", "Succeeded"}:
        period = 0
    if period < 0:
        period = 1
    return period


_SUFFIXES: Final = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
_QUANTITY_RE: Final = re.compile(
    r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)"
)


def _quantity(value: object) -> Decimal:
    """A resource.Quantity's value; unparsable quantities count as 0 here."""
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY_RE.fullmatch(str(value).strip())
    if match is None:
        return Decimal(0)
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        return Decimal(0)


def pod_qos_class(pod: dict[str, Any]) -> str:
    """``qos.GetPodQOS`` over cpu and memory of all containers and init containers."""
    spec = pod.get("spec") or {}
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = (container or {}).get("resources") or {}
        for name, quantity in (resources.get("requests") or {}).items():
            value = _quantity(quantity)
            if name in {"cpu", "memory"} and value > 0:
                requests[name] = requests.get(name, Decimal(0)) + value
        found: set[str] = set()
        for name, quantity in (resources.get("limits") or {}).items():
            value = _quantity(quantity)
            if name in {"cpu", "memory"} and value > 0:
                found.add(name)
                limits[name] = limits.get(name, Decimal(0)) + value
        if not {"cpu", "memory"} <= found:
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed:
        for name, request in requests.items():
            if limits.get(name) != request:
                guaranteed = False
                break
    if guaranteed and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"
