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
the field): malformed JSON, a body that is not an object, a missing or malformed ``Pod``
(``metadata.name``; the fields the decisions read must have their API types), neither
``NodeNames`` nor ``Nodes``, node entries that are not names / Node objects. Pod fields this
code does not know are ignored, as Go's decoder ignores them: a newer kube-scheduler sends
fields an older extender has never heard of.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "ExtenderArgs",
    "ExtenderInputError",
    "decode_args",
    "filter_error",
    "filter_result",
    "host_priority_list",
]

_POD_OBJECT_FIELDS: Final = ("metadata", "spec", "status")
_METADATA_MAPS: Final = ("labels", "annotations")
_SPEC_LISTS: Final = (
    "containers",
    "initContainers",
    "tolerations",
    "topologySpreadConstraints",
    "volumes",
)
_SPEC_OBJECTS: Final = ("affinity", "nodeSelector", "overhead")


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
    pod: Mapping[str, Any]
    node_names: list[str] | None
    """Set for a ``nodeCacheCapable`` extender."""
    nodes: list[Mapping[str, Any]] | None
    """The NodeList's items otherwise."""

    @property
    def names(self) -> list[str]:
        """The candidate nodes' names, in the request's order."""
        if self.node_names is not None:
            return list(self.node_names)
        return [str(n["metadata"]["name"]) for n in self.nodes or ()]


def _type_name(value: object) -> str:
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return "null" if value is None else type(value).__name__


def _check_pod(pod: object) -> Mapping[str, Any]:
    if not isinstance(pod, Mapping):
        raise ExtenderInputError(f"Pod: must be a v1.Pod object, got {_type_name(pod)}")
    for field in _POD_OBJECT_FIELDS:
        value = pod.get(field)
        if value is not None and not isinstance(value, Mapping):
            raise ExtenderInputError(f"Pod.{field}: must be an object, got {_type_name(value)}")
    meta = pod.get("metadata") or {}
    if not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise ExtenderInputError("Pod.metadata.name: is required")
    namespace = meta.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise ExtenderInputError("Pod.metadata.namespace: must be a string")
    for field in _METADATA_MAPS:
        value = meta.get(field)
        if value is not None and not (
            isinstance(value, Mapping) and all(isinstance(v, str) for v in value.values())
        ):
            raise ExtenderInputError(f"Pod.metadata.{field}: must be an object of strings")
    refs = meta.get("ownerReferences")
    if refs is not None and not (
        isinstance(refs, list) and all(isinstance(r, Mapping) for r in refs)
    ):
        raise ExtenderInputError("Pod.metadata.ownerReferences: must be a list of objects")
    spec = pod.get("spec") or {}
    for field in _SPEC_LISTS:
        value = spec.get(field)
        if value is not None and not (
            isinstance(value, list) and all(isinstance(v, Mapping) for v in value)
        ):
            raise ExtenderInputError(f"Pod.spec.{field}: must be a list of objects")
    for field in _SPEC_OBJECTS:
        value = spec.get(field)
        if value is not None and not isinstance(value, Mapping):
            raise ExtenderInputError(
                f"Pod.spec.{field}: must be an object, got {_type_name(value)}"
            )
    return pod


def decode_args(body: bytes) -> ExtenderArgs:
    """``ExtenderArgs`` from a request body (module docstring)."""
    try:
        raw = json.loads(body)
    except ValueError as err:
        raise ExtenderInputError(f"malformed JSON in ExtenderArgs: {err}") from None
    if not isinstance(raw, Mapping):
        raise ExtenderInputError(f"ExtenderArgs: must be a JSON object, got {_type_name(raw)}")
    pod = _check_pod(_get(raw, "Pod"))
    names_raw = _get(raw, "NodeNames")
    nodes_raw = _get(raw, "Nodes")
    node_names: list[str] | None = None
    nodes: list[Mapping[str, Any]] | None = None
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
            name = (
                ((item or {}).get("metadata") or {}).get("name")
                if isinstance(item, Mapping)
                else None
            )
            if not isinstance(name, str) or not name:
                raise ExtenderInputError(f"Nodes.items[{index}].metadata.name: is required")
            nodes.append(item)
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
        result["NodeNames"] = list(passed)
    else:
        keep = set(passed)
        items = [n for n in args.nodes or () if n["metadata"]["name"] in keep]
        result["Nodes"] = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items}
    return result


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
