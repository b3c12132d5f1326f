"""The scheduler extender wire protocol (``k8s.io/kube-scheduler/extender/v1``), both ways.

kube-scheduler sends ``ExtenderArgs`` — ``{"Pod": <v1.Pod>, "Nodes": <v1.NodeList>|null,
"NodeNames": [...]|null}``: ``NodeNames`` to a ``nodeCacheCapable`` extender, ``Nodes``
otherwise. The current Go types have no JSON tags, so the scheduler writes the Go field names
(PascalCase) and reads answers case-insensitively (``encoding/json``); extenders built on the
pre-1.16 types used lowercase tags (``pod``, ``nodes``, ``nodenames``, ``failedNodes``,
``error``, ``host``, ``score``). Here request keys are matched case-insensitively (both
spellings work) and answers are written in PascalCase:

* filter → ``ExtenderFilterResult`` ``{"Nodes", "NodeNames", "FailedNodes",
  "FailedAndUnresolvableNodes", "Error"}``. The list of passing nodes is always written, in the
  request's own form (``NodeNames``, or ``Nodes`` with the request's Node objects): a missing
  list would make the scheduler drop every node. An error answer carries ``Error`` (the
  scheduler then fails the pod's cycle, or skips an ``ignorable`` extender) and no list.
* prioritize → ``HostPriorityList`` ``[{"Host": name, "Score": 0..10}]`` for every input node.

Input checks (:func:`decode_args`, :class:`ExtenderInputError` with a one-line message naming
the field): malformed JSON, JSON nested deeper than the decoder's recursion (or a ``Pod`` deeper
than :data:`MAX_POD_DEPTH`), a body that is not an object, a missing or malformed ``Pod``,
neither ``NodeNames`` nor ``Nodes``, node entries that are not names / Node objects. Every pod
field the decisions read must have its API type, as Go's ``encoding/json`` into ``v1.Pod``
demands before kube-scheduler could ever send it (:data:`_POD`): strings, int32/int64 integers
(a float or a number out of range does not decode), objects and lists of objects (affinity
terms, tolerations, spread constraints, label selectors, owner references), RFC 3339
timestamps, and quantities — parsed, not negative, and within int64 in the unit the decisions
use (millicores for cpu): the usage table and the utilization arithmetic are int64. Pod fields
this code does not know are ignored, as Go's decoder ignores them: a newer kube-scheduler sends
fields an older extender has never heard of.

An answer that cannot be encoded (Node objects nested too deeply to echo) becomes an error
answer too (:func:`encode_answer`): kube-scheduler reads any status but 200 as a failure of the
extender, and a 200 with ``Error`` as its refusal, which an ``ignorable`` extender may give.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, cast

from kubescale.objects.node import Node
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import Meta

__all__ = [
    "MAX_POD_DEPTH",
    "ExtenderArgs",
    "ExtenderInputError",
    "decode_args",
    "encode_answer",
    "filter_error",
    "filter_result",
    "host_priority_list",
]


class ExtenderInputError(ValueError):
    """A request the extender cannot answer; the message is the answer's ``Error``."""


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    """Go ``encoding/json``'s field match: exact name first, then case-insensitive."""
    if key in mapping:
        return mapping[key]
    lowered = key.lower()
    for name, value in mapping.items():
        if str(name).lower() == lowered:
            return value
    return None


@dataclass(frozen=True)
class ExtenderArgs:
    pod: Pod
    node_names: list[str] | None
    """Set for a ``nodeCacheCapable`` extender."""
    nodes: list[Node] | None
    """The NodeList's items otherwise."""

    @property
    def names(self) -> list[str]:
        """The candidate nodes' names, in the request's order."""
        if self.node_names is not None:
            return list(self.node_names)
        return [Meta(n).name for n in self.nodes or ()]


def _type_name(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "null" if value is None else type(value).__name__


# -- the pod's schema: the fields the decisions read, with their API types --------------------

Check = Callable[[object, str], None]
"""Raises :class:`ExtenderInputError` naming ``path`` when the value is not of its type; a
``null`` field is never checked (Go decodes it as the zero value)."""

MAX_POD_DEPTH: Final = 64
"""Deeper than any ``v1.Pod`` (managedFields included); a deeper Pod is not one."""
_INT64_MAX: Final = 2**63 - 1


def _fail(path: str, problem: str) -> ExtenderInputError:
    return ExtenderInputError(f"{path}: {problem}")


def _string(value: object, path: str) -> None:
    if not isinstance(value, str):
        raise _fail(path, f"must be a string, got {_type_name(value)}")


def _boolean(value: object, path: str) -> None:
    if not isinstance(value, bool):
        raise _fail(path, f"must be a boolean, got {_type_name(value)}")


def _integer(bits: int) -> Check:
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: object, path: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(path, f"must be an integer, got {_type_name(value)}")
        if not low <= value <= high:
            raise _fail(path, f"{value} is out of the int{bits} range")

    return check


def _timestamp(value: object, path: str) -> None:
    """``metav1.Time``: RFC 3339 with a zone."""
    _string(value, path)
    assert isinstance(value, str)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise _fail(path, f"{value[:40]!r} is not an RFC 3339 time")


def _list_of(item: Check, what: str = "objects") -> Check:
    def check(value: object, path: str) -> None:
        if not isinstance(value, list):
            raise _fail(path, f"must be a list of {what}, got {_type_name(value)}")
        for index, entry in enumerate(value):
            if entry is None:
                raise _fail(f"{path}[{index}]", "must not be null")
            item(entry, f"{path}[{index}]")

    return check


def _strings_map(value: object, path: str) -> None:
    if not isinstance(value, Mapping):
        raise _fail(path, f"must be an object of strings, got {_type_name(value)}")
    for key, entry in value.items():
        if not isinstance(entry, str):
            # the key is the client's: quoted, so the one-line Error stays one line
            raise _fail(
                f"{path}[{json.dumps(str(key))}]", f"must be a string, got {_type_name(entry)}"
            )


def _object(fields: Mapping[str, Check]) -> Check:
    def check(value: object, path: str) -> None:
        if not isinstance(value, Mapping):
            raise _fail(path, f"must be an object, got {_type_name(value)}")
        for name, field_check in fields.items():
            entry = value.get(name)
            if entry is not None:
                field_check(entry, f"{path}.{name}")

    return check


def _resource_list(value: object, path: str) -> None:
    """``v1.ResourceList``: quantities (a JSON string or number, as ``Quantity.UnmarshalJSON``
    takes), not negative, within int64 in the decisions' unit (millicores for cpu)."""
    if not isinstance(value, Mapping):
        raise _fail(path, f"must be an object of quantities, got {_type_name(value)}")
    for name, raw in value.items():
        where = f"{path}.{name}"
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise _fail(where, f"must be a quantity, got {_type_name(raw)}")
        try:
            quantity = Quantity.from_json(raw)
        except QuantityError as err:
            raise _fail(where, str(err)) from None
        amount = quantity.milli_value() if name == "cpu" else quantity.value()
        if amount < 0:
            raise _fail(where, f"{str(raw)[:40]} must not be negative")
        if amount > _INT64_MAX:
            unit = "millicores" if name == "cpu" else "units"
            raise _fail(where, f"{str(raw)[:40]} is out of range (more than 2^63-1 {unit})")


_STRINGS: Final = _list_of(_string, "strings")
_REQUIREMENT: Final = _object({"key": _string, "operator": _string, "values": _STRINGS})
_LABEL_SELECTOR: Final = _object(
    {"matchLabels": _strings_map, "matchExpressions": _list_of(_REQUIREMENT)}
)
_NODE_SELECTOR_TERM: Final = _object(
    {"matchExpressions": _list_of(_REQUIREMENT), "matchFields": _list_of(_REQUIREMENT)}
)
_POD_AFFINITY_TERM: Final = _object(
    {
        "labelSelector": _LABEL_SELECTOR,
        "namespaces": _STRINGS,
        "topologyKey": _string,
        "namespaceSelector": _LABEL_SELECTOR,
        "matchLabelKeys": _STRINGS,
        "mismatchLabelKeys": _STRINGS,
    }
)
_POD_AFFINITY: Final = _object(
    {
        "requiredDuringSchedulingIgnoredDuringExecution": _list_of(_POD_AFFINITY_TERM),
        "preferredDuringSchedulingIgnoredDuringExecution": _list_of(
            _object({"weight": _integer(32), "podAffinityTerm": _POD_AFFINITY_TERM})
        ),
    }
)
_AFFINITY: Final = _object(
    {
        "nodeAffinity": _object(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": _object(
                    {"nodeSelectorTerms": _list_of(_NODE_SELECTOR_TERM)}
                ),
                "preferredDuringSchedulingIgnoredDuringExecution": _list_of(
                    _object({"weight": _integer(32), "preference": _NODE_SELECTOR_TERM})
                ),
            }
        ),
        "podAffinity": _POD_AFFINITY,
        "podAntiAffinity": _POD_AFFINITY,
    }
)
_CONTAINER: Final = _object(
    {
        "name": _string,
        "image": _string,
        "resources": _object({"requests": _resource_list, "limits": _resource_list}),
    }
)
_POD: Final = _object(
    {
        "metadata": _object(
            {
                "name": _string,
                "namespace": _string,
                "uid": _string,
                "labels": _strings_map,
                "annotations": _strings_map,
                "creationTimestamp": _timestamp,
                "deletionTimestamp": _timestamp,
                "ownerReferences": _list_of(
                    _object(
                        {
                            "apiVersion": _string,
                            "kind": _string,
                            "name": _string,
                            "uid": _string,
                            "controller": _boolean,
                        }
                    )
                ),
            }
        ),
        "spec": _object(
            {
                "containers": _list_of(_CONTAINER),
                "initContainers": _list_of(_CONTAINER),
                "overhead": _resource_list,
                "affinity": _AFFINITY,
                "nodeSelector": _strings_map,
                "nodeName": _string,
                "priority": _integer(32),
                "priorityClassName": _string,
                "tolerations": _list_of(
                    _object(
                        {
                            "key": _string,
                            "operator": _string,
                            "value": _string,
                            "effect": _string,
                            "tolerationSeconds": _integer(64),
                        }
                    )
                ),
                "topologySpreadConstraints": _list_of(
                    _object(
                        {
                            "maxSkew": _integer(32),
                            "topologyKey": _string,
                            "whenUnsatisfiable": _string,
                            "labelSelector": _LABEL_SELECTOR,
                            "matchLabelKeys": _STRINGS,
                            "nodeAffinityPolicy": _string,
                            "nodeTaintsPolicy": _string,
                            "minDomains": _integer(32),
                        }
                    )
                ),
                "volumes": _list_of(
                    _object(
                        {
                            "name": _string,
                            "persistentVolumeClaim": _object({"claimName": _string}),
                            "hostPath": _object({"path": _string}),
                            "emptyDir": _object({}),
                        }
                    )
                ),
                "resourceClaims": _list_of(_object({"name": _string})),
            }
        ),
        "status": _object(
            {
                "phase": _string,
                "reason": _string,
                "qosClass": _string,
                "startTime": _timestamp,
                "conditions": _list_of(_object({"type": _string, "status": _string})),
                "containerStatuses": _list_of(_object({"name": _string})),
                "initContainerStatuses": _list_of(_object({"name": _string})),
            }
        ),
    }
)


def _depth_exceeds(value: object, limit: int) -> bool:
    """Whether ``value`` nests objects/lists deeper than ``limit`` (iterative: no recursion
    to exhaust)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, Mapping):
            children: Any = current.values()
        elif isinstance(current, list):
            children = current
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _check_pod(pod: object) -> Pod:
    if not isinstance(pod, Mapping):
        raise ExtenderInputError(f"Pod: must be a v1.Pod object, got {_type_name(pod)}")
    if _depth_exceeds(pod, MAX_POD_DEPTH):
        raise ExtenderInputError(f"Pod: nested deeper than {MAX_POD_DEPTH} levels")
    _POD(pod, "Pod")
    meta = Meta(pod).raw
    if not meta.get("name"):
        raise ExtenderInputError("Pod.metadata.name: is required")
    return cast(Pod, pod)  # raw JSON enters here, checked against the pod's schema above


def decode_args(body: bytes) -> ExtenderArgs:
    """``ExtenderArgs`` from a request body (module docstring)."""
    try:
        raw = json.loads(body)
    except ValueError as err:
        raise ExtenderInputError(f"malformed JSON in ExtenderArgs: {err}") from None
    except RecursionError:
        raise ExtenderInputError("ExtenderArgs: nested too deeply") from None
    if not isinstance(raw, Mapping):
        raise ExtenderInputError(f"ExtenderArgs: must be a JSON object, got {_type_name(raw)}")
    pod = _check_pod(_get(raw, "Pod"))
    names_raw = _get(raw, "NodeNames")
    nodes_raw = _get(raw, "Nodes")
    node_names: list[str] | None = None
    nodes: list[Node] | None = None
    if names_raw is not None:
        if not isinstance(names_raw, list) or not all(isinstance(n, str) for n in names_raw):
            raise ExtenderInputError("NodeNames: must be a list of node names")
        node_names = list(names_raw)
    elif nodes_raw is not None:
        items = _get(nodes_raw, "Items") if isinstance(nodes_raw, Mapping) else None
        if not isinstance(nodes_raw, Mapping) or not isinstance(items or [], list):
            raise ExtenderInputError("Nodes: must be a v1.NodeList object")
        nodes = []
        for index, item in enumerate(items or []):
            name = Meta(item).name if isinstance(item, Mapping) else ""
            if not name:
                raise ExtenderInputError(f"Nodes.items[{index}].metadata.name: is required")
            nodes.append(cast(Node, item))  # raw JSON enters here (an echoed NodeList item)
    else:
        raise ExtenderInputError("ExtenderArgs: neither NodeNames nor Nodes is set")
    return ExtenderArgs(pod=pod, node_names=node_names, nodes=nodes)


def filter_result(
    args: ExtenderArgs,
    *,
    passed: Sequence[str],
    failed: Mapping[str, str],
    unresolvable: Mapping[str, str],
) -> dict[str, Any]:
    """``ExtenderFilterResult`` listing ``passed`` in the request's form."""
    result: dict[str, Any] = {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": dict(unresolvable),
        "Error": "",
    }
    if args.node_names is not None:
        result["NodeNames"] = list(dict.fromkeys(passed))
    else:
        keep = set(passed)
        items: dict[str, Node] = {}
        for item in args.nodes or ():
            name = Meta(item).name
            if name in keep:
                items.setdefault(name, item)  # a node offered twice is answered once
        result["Nodes"] = {
            "kind": "NodeList",
            "apiVersion": "v1",
            "metadata": {},
            "items": list(items.values()),
        }
    return result


def encode_answer(answer: Mapping[str, Any]) -> bytes:
    """A filter answer as JSON; one that cannot be encoded (Node objects of the request nested
    too deeply to echo, values JSON has no form for) is an error answer instead."""
    try:
        return json.dumps(answer, allow_nan=False).encode()
    except (RecursionError, ValueError, TypeError) as err:
        problem = "nested too deeply" if isinstance(err, RecursionError) else str(err)
        return json.dumps(filter_error(f"ExtenderArgs: cannot answer: {problem}")).encode()


def filter_error(message: str) -> dict[str, Any]:
    return {
        "Nodes": None,
        "NodeNames": None,
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": message,
    }


def host_priority_list(scores: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    return [{"Host": host, "Score": score} for host, score in scores]
