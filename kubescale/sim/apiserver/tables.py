"""Server-side printing: ``meta.k8s.io/v1`` Table answers for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` (then ``v1beta1``,
then plain JSON) and prints whatever columns the server sends. kube-apiserver's columns are
those of its printers (``pkg/printers/internalversion/printers.go``); for a CRD they are its
version's ``additionalPrinterColumns`` after ``Name`` (an ``Age`` column on
``.metadata.creationTimestamp`` when it declares none: apiextensions' default), each cell the
first result of the column's JSONPath (``type: date`` as an age, ``integer``/``number``/
``boolean`` as JSON values, ``string`` as text).

Served here with kube's columns: pods, deployments, horizontalpodautoscalers, nodes,
namespaces, and every CRD. Other kinds are answered in plain JSON, which the Accept header
allows and kubectl prints as NAME and AGE itself.

Rows carry the object as ``includeObject`` asks: ``Metadata`` (the default) a
``PartialObjectMetadata``, ``Object`` the whole object, ``None`` nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, cast

from kubescale.base.times import parse_time
from kubescale.kube.resources import ResourceType
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.rendering.kube_columns import hpa_targets, human_duration

from . import errors

__all__ = ["has_printer", "jsonpath_first", "table_version", "to_table"]

_NAME_DOC: Final = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_AGE_DOC: Final = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC."
)


def table_version(accept: str) -> str | None:
    """``v1`` or ``v1beta1`` when the Accept header's first usable entry asks for a Table of
    that version, else None (plain JSON)."""
    for entry in accept.split(","):
        media, *params = [part.strip() for part in entry.split(";")]
        if media not in ("application/json", "*/*", "application/*"):
            continue
        values = dict(p.split("=", 1) for p in params if "=" in p)
        if values.get("as") != "Table":
            if not values.get("as"):
                return None  # plain JSON comes first
            continue
        if values.get("g") == "meta.k8s.io" and values.get("v") in ("v1", "v1beta1"):
            return values["v"]
    return None


def _age(obj: Mapping[str, Any], now: datetime) -> str:
    created = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if created is None:
        return "<unknown>"
    return human_duration((now - created).total_seconds())


# -- JSONPath (the subset CRD printer columns use) ---------------------------------------------

_STEP: Final = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_$-]+)
      | \[(?P<index>-?\d+)\]
      | \[\?\(@\.(?P<key>[A-Za-z0-9_.-]+)\s*==\s*(?P<quote>['"])(?P<value>.*?)(?P=quote)\)\]
      | \[\*\]
      | \[['"](?P<quoted>[^'"]+)['"]\]""",
    re.VERBOSE,
)


def _lookup(value: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def jsonpath_first(obj: Any, path: str) -> tuple[bool, Any]:
    """The first value ``path`` selects (``.a.b``, ``[0]``, ``[*]``, ``['k']``,
    ``[?(@.k=='v')]``; ``{...}`` braces optional); ``(False, None)`` when it selects none."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    current: list[Any] = [obj]
    position = 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            return False, None
        position = match.end()
        following: list[Any] = []
        for value in current:
            if match.group("field") is not None or match.group("quoted") is not None:
                key = match.group("field") or match.group("quoted")
                if isinstance(value, Mapping) and key in value:
                    following.append(value[key])
            elif match.group("index") is not None:
                index = int(match.group("index"))
                if isinstance(value, list) and -len(value) <= index < len(value):
                    following.append(value[index])
            elif match.group("key") is not None:
                wanted = match.group("value")
                for item in value if isinstance(value, list) else ():
                    found = _lookup(item, match.group("key"))
                    if found is not None and str(found) == wanted:
                        following.append(item)
            elif isinstance(value, list):
                following.extend(value)
            elif isinstance(value, Mapping):
                following.extend(value.values())
        current = following
    return (True, current[0]) if current else (False, None)


def _crd_cell(column: Mapping[str, Any], obj: Mapping[str, Any], now: datetime) -> Any:
    """``tableconvertor``: nil when nothing is selected; dates as ages; typed JSON values."""
    found, value = jsonpath_first(obj, str(column.get("jsonPath") or ""))
    if not found or value is None:
        return None
    kind = column.get("type")
    if kind == "date":
        moment = parse_time(value)
        if moment is None:
            return "<invalid>"
        return human_duration((now - moment).total_seconds())
    if kind == "integer":
        return (
            int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None
    if kind == "boolean":
        return value if isinstance(value, bool) else None
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def _crd_columns(crd: Mapping[str, Any] | None, version: str) -> list[dict[str, Any]]:
    for served in ((crd or {}).get("spec") or {}).get("versions") or []:
        if served.get("name") == version:
            columns = served.get("additionalPrinterColumns")
            if columns:
                return [dict(c) for c in columns]
    return [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


# -- built-in printers --------------------------------------------------------------------------


def _column(
    name: str, description: str, *, priority: int = 0, kind: str = "string"
) -> dict[str, Any]:
    column: dict[str, Any] = {"name": name, "type": kind, "format": "", "description": description}
    if priority:
        column["priority"] = priority
    return column


_NAME_COLUMN: Final = {"name": "Name", "type": "string", "format": "name", "description": _NAME_DOC}


def _pod_status(pod: Mapping[str, Any]) -> tuple[str, int, int, int]:
    """``printPod``: (reason, ready containers, containers, restarts)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    total = len(spec.get("containers") or [])
    reason = str(status.get("reason") or status.get("phase") or "")
    ready = restarts = 0
    initializing = False
    init_specs = spec.get("initContainers") or []
    for index, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(container.get("restartCount") or 0)
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and int(terminated.get("exitCode") or 0) == 0:
            continue
        if terminated is not None:
            reason = "Init:" + str(
                terminated.get("reason")
                or (f"Signal:{terminated['signal']}" if terminated.get("signal") else "")
                or f"ExitCode:{terminated.get('exitCode')}"
            )
        elif waiting is not None and waiting.get("reason") not in (None, "", "PodInitializing"):
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing:
        running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += int(container.get("restartCount") or 0)
            state = container.get("state") or {}
            waiting, terminated = state.get("waiting"), state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = str(waiting["reason"])
            elif terminated is not None and terminated.get("reason"):
                reason = str(terminated["reason"])
            elif terminated is not None:
                signal = terminated.get("signal")
                reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode')}"
            elif container.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            conditions = status.get("conditions") or []
            ready_true = any(
                c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
            )
            reason = "Running" if ready_true else "NotReady"
    metadata = pod.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason, ready, total, restarts


_POD_COLUMNS: Final = [
    _NAME_COLUMN,
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last "
        "container in this pod has restarted.",
    ),
    _column("Age", _AGE_DOC),
    _column("IP", "podIP address allocated to the pod.", priority=1),
    _column("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
    _column("Nominated Node", "nominatedNodeName of the pod.", priority=1),
    _column("Readiness Gates", "If specified, all readiness gates will be evaluated.", priority=1),
]


def _pod_cells(pod: Mapping[str, Any], now: datetime) -> list[Any]:
    reason, ready, total, restarts = _pod_status(pod)
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    gates = spec.get("readinessGates") or []
    if gates:
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
        passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
        gate_cell = f"{passed}/{len(gates)}"
    else:
        gate_cell = "<none>"
    return [
        (pod.get("metadata") or {}).get("name", ""),
        f"{ready}/{total}",
        reason,
        str(restarts),
        _age(pod, now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gate_cell,
    ]


_DEPLOYMENT_COLUMNS: Final = [
    _NAME_COLUMN,
    _column("Ready", "Number of the pod with ready state"),
    _column(
        "Up-to-date",
        "Total number of non-terminated pods targeted by this deployment that "
        "have the desired template spec.",
    ),
    _column(
        "Available",
        "Total number of available pods (ready for at least minReadySeconds) "
        "targeted by this deployment.",
    ),
    _column("Age", _AGE_DOC),
    _column("Containers", "Names of each container in the template.", priority=1),
    _column("Images", "Images referenced by each container in the template.", priority=1),
    _column("Selector", "Label selector for pods.", priority=1),
]


def _selector_text(selector: Any) -> str:
    try:
        text = str(label_selector_from_dict(selector if isinstance(selector, Mapping) else None))
    except SelectorError:
        return "<error>"
    return text or "<none>"


def _deployment_cells(deployment: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    desired = spec.get("replicas")
    return [
        (deployment.get("metadata") or {}).get("name", ""),
        f"{int(status.get('readyReplicas') or 0)}/{int(desired if desired is not None else 1)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        _age(deployment, now),
        ",".join(str(c.get("name", "")) for c in containers),
        ",".join(str(c.get("image", "")) for c in containers),
        _selector_text(spec.get("selector")),
    ]


_HPA_COLUMNS: Final = [
    _NAME_COLUMN,
    _column(
        "Reference",
        "reference to scaled resource; horizontal pod autoscaler will learn "
        "the current resource consumption and will set the desired number of pods by using "
        "its Scale subresource.",
    ),
    _column(
        "Targets",
        "metrics contains the specifications for which to use to calculate the "
        "desired replica count",
    ),
    _column(
        "MinPods",
        "minReplicas is the lower limit for the number of replicas to which "
        "the autoscaler can scale down.",
    ),
    _column(
        "MaxPods",
        "maxReplicas is the upper limit for the number of replicas to which "
        "the autoscaler can scale up.",
    ),
    _column(
        "Replicas",
        "currentReplicas is current number of replicas of pods managed by "
        "this autoscaler, as last seen by the autoscaler.",
    ),
    _column("Age", _AGE_DOC),
]


def _hpa_cells(hpa: Mapping[str, Any], now: datetime) -> list[Any]:
    spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
    ref = spec.get("scaleTargetRef") or {}
    minimum = spec.get("minReplicas")
    return [
        (hpa.get("metadata") or {}).get("name", ""),
        f"{ref.get('kind', '')}/{ref.get('name', '')}",
        hpa_targets(cast(HorizontalPodAutoscaler, hpa)),  # the stored HPA, as JSON
        "<unset>" if minimum is None else str(minimum),
        str(spec.get("maxReplicas", 0)),
        str(status.get("currentReplicas", 0)),
        _age(hpa, now),
    ]


_NODE_COLUMNS: Final = [
    _NAME_COLUMN,
    _column("Status", "The status of the node"),
    _column("Roles", "The roles of the node"),
    _column("Age", _AGE_DOC),
    _column("Version", "Kubelet Version reported by the node."),
    _column("Internal-IP", "List of addresses reachable to the node.", priority=1),
    _column("External-IP", "List of addresses reachable to the node.", priority=1),
    _column("OS-Image", "OS Image reported by the node from /etc/os-release.", priority=1),
    _column("Kernel-Version", "Kernel Version reported by the node.", priority=1),
    _column("Container-Runtime", "Container runtime reported by the node.", priority=1),
]
_ROLE_PREFIX: Final = "node-role.kubernetes.io/"


def _node_cells(node: Mapping[str, Any], now: datetime) -> list[Any]:
    metadata, spec, status = (
        node.get("metadata") or {},
        node.get("spec") or {},
        node.get("status") or {},
    )
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    states = (
        ["Ready" if conditions.get("Ready") == "True" else "NotReady"]
        if "Ready" in conditions
        else ["Unknown"]
    )
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = metadata.get("labels") or {}
    roles = sorted(
        {k[len(_ROLE_PREFIX) :] for k in labels if k.startswith(_ROLE_PREFIX) and k != _ROLE_PREFIX}
        | ({str(labels["kubernetes.io/role"])} if labels.get("kubernetes.io/role") else set())
    )
    addresses = status.get("addresses") or []
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        for entry in addresses:
            if entry.get("type") == kind:
                return str(entry.get("address", ""))
        return "<none>"

    return [
        metadata.get("name", ""),
        ",".join(states),
        ",".join(roles) or "<none>",
        _age(node, now),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


_NAMESPACE_COLUMNS: Final = [
    _NAME_COLUMN,
    _column("Status", "The status of the namespace"),
    _column("Age", _AGE_DOC),
]


def _namespace_cells(namespace: Mapping[str, Any], now: datetime) -> list[Any]:
    return [
        (namespace.get("metadata") or {}).get("name", ""),
        (namespace.get("status") or {}).get("phase", ""),
        _age(namespace, now),
    ]


_Printer = tuple[list[dict[str, Any]], Callable[[Mapping[str, Any], datetime], list[Any]]]
_PRINTERS: Final[dict[tuple[str, str], _Printer]] = {
    ("", "pods"): (_POD_COLUMNS, _pod_cells),
    ("apps", "deployments"): (_DEPLOYMENT_COLUMNS, _deployment_cells),
    ("autoscaling", "horizontalpodautoscalers"): (_HPA_COLUMNS, _hpa_cells),
    ("", "nodes"): (_NODE_COLUMNS, _node_cells),
    ("", "namespaces"): (_NAMESPACE_COLUMNS, _namespace_cells),
}


def has_printer(rt: ResourceType, *, builtin: bool) -> bool:
    """Whether a Table can be served for ``rt`` (every CRD; the built-in kinds above)."""
    return not builtin or (rt.group, rt.plural) in _PRINTERS


def _row_object(obj: Mapping[str, Any], include: str, version: str) -> dict[str, Any] | None:
    if include == "None":
        return None
    if include == "Object":
        return dict(obj)
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": obj.get("metadata") or {},
    }


def to_table(
    rt: ResourceType,
    body: Mapping[str, Any],
    *,
    version: str,
    crd: Mapping[str, Any] | None,
    builtin: bool,
    now: datetime,
    include_object: str = "Metadata",
) -> dict[str, Any]:
    """The Table of ``body`` — one object, or a ``<Kind>List`` — for ``rt``."""
    if include_object not in ("None", "Metadata", "Object"):
        raise errors.bad_request(
            f'includeObject: Unsupported value: "{include_object}": supported values: '
            '"Metadata", "None", "Object"'
        )
    is_list = "items" in body and str(body.get("kind", "")).endswith("List")
    items: Sequence[Mapping[str, Any]] = (body.get("items") or []) if is_list else [body]
    if builtin:
        columns, cells_of = _PRINTERS[(rt.group, rt.plural)]
        definitions = [dict(c) for c in columns]

        def cells(obj: Mapping[str, Any]) -> list[Any]:
            return cells_of(obj, now)
    else:
        extra = _crd_columns(crd, rt.version)
        definitions = [dict(_NAME_COLUMN)] + [
            {
                "name": c.get("name", ""),
                "type": c.get("type", "string"),
                "format": c.get("format", ""),
                "description": c.get("description", ""),
                **({"priority": c["priority"]} if c.get("priority") else {}),
            }
            for c in extra
        ]

        def cells(obj: Mapping[str, Any]) -> list[Any]:
            name = (obj.get("metadata") or {}).get("name", "")
            return [name] + [_crd_cell(c, obj, now) for c in extra]

    rows = []
    for item in items:
        row: dict[str, Any] = {"cells": cells(item)}
        shown = _row_object(
            {"kind": rt.kind, "apiVersion": rt.group_version, **item}, include_object, version
        )
        if shown is not None:
            row["object"] = shown
        rows.append(row)
    source_meta = body.get("metadata") or {}
    metadata = {
        k: source_meta[k]
        for k in ("resourceVersion", "continue", "remainingItemCount")
        if k in source_meta and is_list
    }
    if not is_list and "resourceVersion" in source_meta:
        metadata["resourceVersion"] = source_meta["resourceVersion"]
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": rows,
    }
