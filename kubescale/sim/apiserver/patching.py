"""The three PATCH content types of the Kubernetes API, as pure functions over JSON values.

* ``application/json-patch+json``: RFC 6902 JSON Patch (:func:`apply_json_patch`);
* ``application/merge-patch+json``: RFC 7386 JSON Merge Patch (:func:`apply_merge_patch`);
* ``application/strategic-merge-patch+json``: Kubernetes' strategic merge patch, accepted for
  built-in kinds only (:func:`supports_strategic_merge`, :func:`apply_strategic_merge_patch`;
  the algorithm lives in :mod:`kubescale.sim.apiserver.strategic_merge`).

The contract shared by all three: inputs are never mutated and the result shares no dict or
list with them (the server may go on to edit it), and a patch that cannot be applied raises
:class:`PatchError`, whose message names the operation and the path and is meant for the
``message`` of the 422 Status kube-apiserver answers with.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kubescale.sim.apiserver.strategic_merge import StrategicMergeError, copy_json, strategic_merge
from kubescale.sim.apiserver.strategic_schema import root_type

__all__ = [
    "PatchError",
    "apply_json_patch",
    "apply_merge_patch",
    "apply_strategic_merge_patch",
    "supports_strategic_merge",
]


class PatchError(ValueError):
    """A patch that cannot be applied; the message is safe to show in a 422 Status."""


# --- RFC 6902 JSON Patch ---------------------------------------------------------------------

_OPERATIONS = ("add", "remove", "replace", "move", "copy", "test")
_NEEDS_VALUE = ("add", "replace", "test")
_NEEDS_FROM = ("move", "copy")
# RFC 6901 §4 / RFC 6902 §4: an array index is "0" or digits without a leading zero.
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_BAD_ESCAPE = re.compile(r"~(?![01])")


def apply_json_patch(document: Any, patch: Any) -> Any:
    """``document`` with the RFC 6902 operations of ``patch`` applied in order.

    All or nothing: the first failing operation raises and no result exists. Members of an
    operation other than ``op``/``path``/``value``/``from`` are ignored (RFC 6902 §4).
    """
    if not isinstance(patch, list):
        raise PatchError("a JSON patch must be a JSON array of operations")
    result = copy_json(document)
    for number, operation in enumerate(patch):
        result = _apply_operation(result, operation, number)
    return result


def _apply_operation(root: Any, operation: Any, number: int) -> Any:
    if not isinstance(operation, dict):
        raise PatchError(f"jsonpatch operation {number} is not a JSON object")
    op = operation.get("op")
    if op not in _OPERATIONS:
        raise PatchError(f"jsonpatch operation {number}: unexpected kind {json.dumps(op)}")
    pointer = _member(operation, "path", op, number)
    path = _parse_pointer(pointer, op)
    if op in _NEEDS_VALUE and "value" not in operation:
        raise PatchError(f"jsonpatch {op} operation on {pointer}: missing value")
    if op == "add":
        return _add(root, path, copy_json(operation["value"]), pointer, op)
    if op == "remove":
        root, _removed = _remove(root, path, pointer, op)
        return root
    if op == "replace":
        return _replace(root, path, copy_json(operation["value"]), pointer)
    if op == "test":
        actual = _get(root, path, pointer, op)
        if not _json_equal(actual, operation["value"]):
            raise PatchError(
                f"jsonpatch test operation failed: the value at {pointer} is not the expected value"
            )
        return root
    source_pointer = _member(operation, "from", op, number)
    source = _parse_pointer(source_pointer, op)
    if op == "copy":
        value = copy_json(_get(root, source, source_pointer, op, member="from path"))
        return _add(root, path, value, pointer, op)
    # move (RFC 6902 §4.4): the source must exist and must not be a proper prefix of the target.
    if source == path:
        _get(root, source, source_pointer, op, member="from path")
        return root
    if path[: len(source)] == source:
        raise PatchError(
            f"jsonpatch move operation does not apply: {source_pointer} cannot be moved into "
            f"its own child {pointer}"
        )
    root, value = _remove(root, source, source_pointer, op, member="from path")
    return _add(root, path, value, pointer, op)


def _member(operation: dict[str, Any], name: str, op: str, number: int) -> str:
    value = operation.get(name)
    if not isinstance(value, str):
        raise PatchError(
            f'jsonpatch {op} operation {number}: "{name}" must be a JSON pointer string'
        )
    return value


def _parse_pointer(pointer: str, op: str) -> list[str]:
    """RFC 6901: ``""`` is the whole document, else ``/``-separated tokens where ``~1`` is
    ``/`` and ``~0`` is ``~`` (decoded in that order)."""
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(
            f'jsonpatch {op} operation: invalid JSON pointer "{pointer}": it must be empty or '
            'start with "/"'
        )
    tokens = pointer[1:].split("/")
    for token in tokens:
        if _BAD_ESCAPE.search(token):
            raise PatchError(
                f'jsonpatch {op} operation: invalid JSON pointer "{pointer}": "~" must be '
                'followed by "0" or "1"'
            )
    return [token.replace("~1", "/").replace("~0", "~") for token in tokens]


def _missing(op: str, pointer: str, member: str = "path") -> PatchError:
    # evanphx/json-patch wording, which kube-apiserver passes through in its 422 message.
    noun = "key" if op == "replace" and member == "path" else member
    return PatchError(f"jsonpatch {op} operation does not apply: doc is missing {noun}: {pointer}")


def _index(token: str, length: int, op: str, pointer: str, *, allow_end: bool) -> int:
    """An array index token; ``allow_end`` admits ``length`` itself (and ``-``) for add."""
    if token == "-" and allow_end:
        return length
    if not _ARRAY_INDEX.fullmatch(token):
        raise PatchError(
            f'jsonpatch {op} operation does not apply: "{token}" is not a valid array index '
            f"in {pointer}"
        )
    index = int(token)
    if index > length or (index == length and not allow_end):
        raise PatchError(
            f"jsonpatch {op} operation does not apply: index {index} is out of bounds for an "
            f"array of length {length} at {pointer}"
        )
    return index


def _get(root: Any, path: list[str], pointer: str, op: str, *, member: str = "path") -> Any:
    node = root
    for token in path:
        if isinstance(node, dict):
            if token not in node:
                raise _missing(op, pointer, member)
            node = node[token]
        elif isinstance(node, list):
            if token == "-":
                raise _missing(op, pointer, member)
            node = node[_index(token, len(node), op, pointer, allow_end=False)]
        else:
            raise _missing(op, pointer, member)
    return node


def _add(root: Any, path: list[str], value: Any, pointer: str, op: str) -> Any:
    """RFC 6902 §4.1: set an object member, insert into an array, or replace the root."""
    if not path:
        return value
    parent = _get(root, path[:-1], pointer, op)
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), op, pointer, allow_end=True), value)
    else:
        raise _missing(op, pointer)
    return root


def _remove(
    root: Any, path: list[str], pointer: str, op: str, *, member: str = "path"
) -> tuple[Any, Any]:
    """RFC 6902 §4.2: the target must exist. Returns the new root and the removed value."""
    if not path:
        raise PatchError(f"jsonpatch {op} operation does not apply: cannot remove the document")
    parent = _get(root, path[:-1], pointer, op, member=member)
    last = path[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _missing(op, pointer, member)
        return root, parent.pop(last)
    if isinstance(parent, list):
        if last == "-":
            raise _missing(op, pointer, member)
        return root, parent.pop(_index(last, len(parent), op, pointer, allow_end=False))
    raise _missing(op, pointer, member)


def _replace(root: Any, path: list[str], value: Any, pointer: str) -> Any:
    """RFC 6902 §4.3: like remove then add, so the target must exist."""
    if not path:
        return value
    parent = _get(root, path[:-1], pointer, "replace")
    last = path[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _missing("replace", pointer)
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            raise _missing("replace", pointer)
        parent[_index(last, len(parent), "replace", pointer, allow_end=False)] = value
    else:
        raise _missing("replace", pointer)
    return root


def _json_equal(left: Any, right: Any) -> bool:
    """RFC 6902 §4.6 equality: numbers by value (1 == 1.0), never a boolean to a number,
    objects regardless of member order, arrays element by element."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            _json_equal(value, right[key]) for key, value in left.items()
        )
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            _json_equal(a, b) for a, b in zip(left, right, strict=True)
        )
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    return left is None and right is None


# --- RFC 7386 JSON Merge Patch ---------------------------------------------------------------


def apply_merge_patch(document: Any, patch: Any) -> Any:
    """RFC 7386 §2: an object patch merges member by member (``null`` removes a member), any
    other patch value replaces the target. Member order: the document's, then new members."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    target = document if isinstance(document, dict) else {}
    result: dict[str, Any] = {}
    for key, value in target.items():
        if key not in patch:
            result[key] = copy_json(value)
        elif patch[key] is not None:
            result[key] = apply_merge_patch(value, patch[key])
    for key, value in patch.items():
        if key not in target and value is not None:
            result[key] = apply_merge_patch(None, value)
    return result


# --- strategic merge patch -------------------------------------------------------------------


def supports_strategic_merge(api_version: str, kind: str) -> bool:
    """Whether kube-apiserver takes a strategic merge patch for this kind: only the built-in
    API groups; custom resources (autoscaling.k8s.io, cluster.x-k8s.io, anything unknown)
    answer 415 Unsupported Media Type."""
    return root_type(api_version, kind) is not None


def apply_strategic_merge_patch(
    document: dict[str, Any], patch: dict[str, Any], *, api_version: str, kind: str
) -> dict[str, Any]:
    """``document`` (a ``kind`` object of ``api_version``) with a strategic merge patch applied."""
    type_name = root_type(api_version, kind)
    if type_name is None:
        raise PatchError(
            f"strategic merge patch is not supported for {kind} ({api_version}): use a JSON "
            "merge patch or a JSON patch"
        )
    if not isinstance(document, dict):
        raise PatchError("strategic merge patch: the document must be a JSON object")
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch: the patch must be a JSON object")
    try:
        return strategic_merge(document, patch, type_name=type_name)
    except StrategicMergeError as error:
        raise PatchError(f"strategic merge patch: {error}") from error
