"""Strategic merge patch, applied the way kube-apiserver applies it to built-in kinds.

This restates the apply half of apimachinery's ``pkg/util/strategicpatch`` (``mergeMap`` with
``MergeParallelList`` and ``IgnoreUnmatchedNulls``, i.e. ``StrategicMergeMapPatch``) over raw
JSON dicts, driven by the tag table in :mod:`kubescale.sim.apiserver.strategic_schema`:

* maps merge key by key; ``null`` deletes a key; a field tagged ``replace`` is replaced;
* lists tagged ``merge`` merge element-wise: lists of maps by the merge key, lists of primitives
  as a set; all other lists are replaced;
* directives: ``$patch: replace|delete`` on a map or as a list element (``merge`` on a map is
  the default made explicit), ``$retainKeys``, ``$setElementOrder/<field>``,
  ``$deleteFromPrimitiveList/<field>``;
* element order: without ``$setElementOrder`` upstream keeps the patch's items in patch order and
  the server-only items in live order, interleaving them by live position; items the live list
  did not have therefore come first (kubectl patch prepends). ``$setElementOrder`` (sent by
  kubectl apply) takes precedence over both.

Values that land where the live object has nothing (new keys, appended elements, replaced lists)
are cleaned as decoding them into the Go type would: nulls and ``$``-directives disappear.

The contract: :func:`strategic_merge` never mutates its arguments and raises
:class:`StrategicMergeError`, whose message names the path, on a malformed patch.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

from kubescale.sim.apiserver.strategic_schema import FieldRule, field_rule

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER = "$setElementOrder"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"


class StrategicMergeError(ValueError):
    """A strategic merge patch that cannot be applied; the message names where."""


class _Absent:
    """Marks a patch value that leaves nothing behind (``{"$patch": "delete"}`` on a new key)."""


_ABSENT = _Absent()


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts and lists rebuilt, scalars shared)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def strategic_merge(
    document: dict[str, Any], patch: dict[str, Any], *, type_name: str | None
) -> dict[str, Any]:
    """``document`` with ``patch`` applied; ``type_name`` is the schema type of the object."""
    if not isinstance(patch, dict):
        raise StrategicMergeError("a strategic merge patch must be a JSON object")
    return _merge_map(copy_json(document), copy_json(patch), type_name, "")


# --- identity and shape of JSON values -------------------------------------------------------


def _identity(value: Any) -> Hashable:
    """Equality as Go's ``==`` on decoded JSON: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if value is None:
        return ("null", None)
    return ("json", json.dumps(value, sort_keys=True))


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null"


def _where(path: str) -> str:
    return path or "<object>"


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _element(path: str, merge_key: str, item: Any) -> str:
    if merge_key and isinstance(item, dict) and merge_key in item:
        return f"{path}[{merge_key}={json.dumps(item[merge_key])}]"
    return f"{path}[]"


# --- values without a live counterpart -------------------------------------------------------


def _fresh(value: Any, path: str) -> Any:
    """A patch value placed where the live object has nothing, cleaned of nulls and directives
    (upstream ``discardNullValuesFromPatch`` + ``removeDirectives``; the typed decode drops the
    remaining ``$`` keys). ``_ABSENT`` when nothing remains."""
    if isinstance(value, dict):
        directive = value.get(DIRECTIVE)
        if directive == "delete":
            return _ABSENT
        if directive not in (None, "replace", "merge"):
            raise StrategicMergeError(
                f"{_where(path)}: unknown patch type {json.dumps(directive)} in map"
            )
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            if key.startswith("$") or item is None:
                continue
            fresh_item = _fresh(item, _child(path, key))
            if fresh_item is not _ABSENT:
                cleaned[key] = fresh_item
        return cleaned
    if isinstance(value, list):
        # Directive elements ({"$patch": ...}) of a list with no live counterpart have nothing
        # to act on and are dropped.
        return [
            _fresh(item, f"{path}[]")
            for item in value
            if not (isinstance(item, dict) and DIRECTIVE in item)
        ]
    return value


# --- maps ------------------------------------------------------------------------------------


def _merge_map(
    original: dict[str, Any], patch: dict[str, Any], type_name: str | None, path: str
) -> dict[str, Any]:
    """``mergeMap``: merge ``patch`` into ``original`` (both private copies, consumed)."""
    if DIRECTIVE in patch:
        directive = patch.pop(DIRECTIVE)
        if directive == "replace":
            # `$patch: replace` on a map: the patch (minus the marker) is the new value.
            replacement = _fresh(patch, path)
            return replacement if isinstance(replacement, dict) else {}
        if directive == "delete":
            # `$patch: delete` on a map: upstream answers an empty map.
            return {}
        if directive != "merge":
            raise StrategicMergeError(
                f"{_where(path)}: unknown patch type {json.dumps(directive)} in map"
            )
        # `$patch: merge` names the default behaviour of a map: carry on merging.

    _apply_retain_keys(original, patch, path)
    _apply_set_element_order(original, patch, type_name, path)

    for key, patch_value in patch.items():
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            _delete_from_primitive_list(original, key, patch_value, path)
            continue
        if key.startswith("$"):
            # An unknown directive-like key: the typed decode would drop it.
            continue
        child_path = _child(path, key)
        if patch_value is None:
            # null deletes; a null for a key the object lacks is ignored (IgnoreUnmatchedNulls).
            original.pop(key, None)
            continue
        current = original.get(key)
        rule = field_rule(type_name, key)
        if isinstance(current, dict) and isinstance(patch_value, dict):
            if rule.strategy == "replace":
                merged: Any = _fresh(patch_value, child_path)
            else:
                merged = _merge_map(current, patch_value, rule.value_type, child_path)
        elif isinstance(current, list) and isinstance(patch_value, list):
            merged = _merge_list_field(current, patch_value, rule, child_path)
        else:
            # Absent, or of another JSON type, or a scalar: the patch value wins.
            merged = _fresh(patch_value, child_path)
        if merged is _ABSENT:
            original.pop(key, None)
        else:
            original[key] = merged
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any], path: str) -> None:
    """``$retainKeys``: drop every key of the live map not listed; the patch may only set listed
    keys (upstream ``applyRetainKeysDirective``)."""
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise StrategicMergeError(
            f"{_where(path)}: invalid patch format of retainKeys: {RETAIN_KEYS} must be a list"
        )
    kept = {item for item in retain if isinstance(item, str)}
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if key not in kept:
            raise StrategicMergeError(
                f"{_where(path)}: invalid patch format of retainKeys: the patch sets "
                f"{json.dumps(key)}, which {RETAIN_KEYS} does not list"
            )
    for key in [key for key in original if key not in kept]:
        del original[key]


def _directive_field(key: str, prefix: str, path: str) -> str:
    """``$setElementOrder/containers`` → ``containers`` (upstream ``extractKey``)."""
    head, slash, field = key.partition("/")
    if head != prefix or not slash:
        raise StrategicMergeError(
            f"{_where(path)}: invalid patch format of {prefix}: {json.dumps(key)} must have "
            f"the form {prefix}/<field>"
        )
    return field


def _delete_from_primitive_list(original: dict[str, Any], key: str, values: Any, path: str) -> None:
    """``$deleteFromPrimitiveList/<field>``: remove these values from a list of primitives."""
    field = _directive_field(key, DELETE_FROM_PRIMITIVE_LIST, path)
    field_path = _child(path, field)
    if not isinstance(values, list):
        raise StrategicMergeError(
            f"{field_path}: invalid patch format of primitive list: {key} must be a list"
        )
    current = original.get(field)
    if not isinstance(current, list):
        return  # nothing to delete from
    if any(isinstance(item, dict | list) for item in [*current, *values]):
        raise StrategicMergeError(
            f"{field_path}: {DELETE_FROM_PRIMITIVE_LIST} applies to lists of primitives only"
        )
    doomed = {_identity(item) for item in values}
    original[field] = [item for item in current if _identity(item) not in doomed]


# --- lists -----------------------------------------------------------------------------------


def _merge_list_field(
    original: list[Any], patch: list[Any], rule: FieldRule, path: str
) -> list[Any]:
    """``mergeSliceHandler``: only lists tagged ``merge`` merge; the rest are replaced."""
    if rule.strategy != "merge":
        fresh = _fresh(patch, path)
        return fresh if isinstance(fresh, list) else []
    return _merge_list(original, patch, rule, path)


def _element_shape(items: Sequence[Any], path: str) -> str | None:
    """The one JSON type of all elements (upstream ``sliceElementType``)."""
    shapes = {_shape(item) for item in items}
    if "list" in shapes:
        raise StrategicMergeError(f"{path}: lists of lists are not supported")
    if len(shapes) > 1:
        raise StrategicMergeError(
            f"{path}: list element types are not identical: {', '.join(sorted(shapes))}"
        )
    return shapes.pop() if shapes else None


def _merge_list(original: list[Any], patch: list[Any], rule: FieldRule, path: str) -> list[Any]:
    """``mergeSlice``: merge a list tagged ``merge``, then restore a stable order."""
    if not original and not patch:
        return original
    if _element_shape([*original, *patch], path) != "map":
        # A set of primitives: union, patch items first in patch order (see _interleave).
        merged = _unique(original + patch)
        return _order(merged, patch_order=patch, live_order=original, merge_key="", path=path)
    merge_key = rule.merge_key
    if not merge_key:
        raise StrategicMergeError(f"{path}: cannot merge a list of objects without a merge key")
    live, patch_items = _apply_list_directives(original, patch, merge_key, path)
    merged = list(live)
    for item in patch_items:
        _require_key(item, merge_key, path)
        index = _find(merged, merge_key, item[merge_key])
        if index is None:
            merged.append(_fresh(item, _element(path, merge_key, item)))
        else:
            element_path = _element(path, merge_key, item)
            merged[index] = _merge_map(merged[index], item, rule.value_type, element_path)
    return _order(merged, patch_order=patch_items, live_order=live, merge_key=merge_key, path=path)


def _apply_list_directives(
    original: list[Any], patch: list[Any], merge_key: str, path: str
) -> tuple[list[Any], list[Any]]:
    """``mergeSliceWithSpecialElements``: act on ``{"$patch": ...}`` elements.

    Returns the live list left after deletions (or the replacement list) and the patch items
    still to merge."""
    plain: list[Any] = []
    replace = False
    live = original
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if directive == "delete":
            if merge_key not in item:
                raise StrategicMergeError(
                    f"{path}: a {DIRECTIVE}: delete element must name its merge key "
                    f"{json.dumps(merge_key)}"
                )
            doomed = _identity(item[merge_key])
            live = [
                element
                for element in live
                if not (merge_key in element and _identity(element[merge_key]) == doomed)
            ]
        elif directive == "replace":
            replace = True
        elif directive == "merge":
            raise StrategicMergeError(f"{path}: merging lists cannot yet be specified in the patch")
        else:
            raise StrategicMergeError(
                f"{path}: unknown patch type {json.dumps(directive)} in list element"
            )
    if replace:
        # `$patch: replace` as a list element: the other patch elements are the whole list.
        fresh = _fresh(plain, path)
        return (fresh if isinstance(fresh, list) else []), []
    return live, plain


def _require_key(item: Any, merge_key: str, path: str) -> None:
    if not isinstance(item, dict) or merge_key not in item:
        raise StrategicMergeError(
            f"{path}: element {json.dumps(item)} does not contain declared merge key "
            f"{json.dumps(merge_key)}"
        )


def _find(items: Sequence[Any], merge_key: str, value: Any) -> int | None:
    wanted = _identity(value)
    for index, item in enumerate(items):
        if isinstance(item, dict) and merge_key in item and _identity(item[merge_key]) == wanted:
            return index
    return None


def _unique(items: Sequence[Any]) -> list[Any]:
    seen: set[Hashable] = set()
    unique: list[Any] = []
    for item in items:
        identity = _identity(item)
        if identity not in seen:
            seen.add(identity)
            unique.append(item)
    return unique


# --- ordering --------------------------------------------------------------------------------


def _key_of(item: Any, merge_key: str, path: str) -> Hashable:
    if not merge_key:
        return _identity(item)
    _require_key(item, merge_key, path)
    return _identity(item[merge_key])


def _positions(items: Sequence[Any], merge_key: str, path: str) -> dict[Hashable, int]:
    positions: dict[Hashable, int] = {}
    for index, item in enumerate(items):
        positions.setdefault(_key_of(item, merge_key, path), index)
    return positions


def _order(
    merged: list[Any],
    *,
    patch_order: Sequence[Any],
    live_order: Sequence[Any],
    merge_key: str,
    path: str,
) -> list[Any]:
    """``normalizeElementOrder``: items named by ``patch_order`` in that order, the others in
    live order, interleaved by live position (``mergeSortedSlice``)."""
    wanted = _positions(patch_order, merge_key, path)
    live = _positions(live_order, merge_key, path)
    from_patch = [item for item in merged if _key_of(item, merge_key, path) in wanted]
    server_only = [item for item in merged if _key_of(item, merge_key, path) not in wanted]
    from_patch.sort(key=lambda item: wanted[_key_of(item, merge_key, path)])
    server_only.sort(key=lambda item: live.get(_key_of(item, merge_key, path), len(live)))
    return _interleave(server_only, from_patch, live, merge_key, path)


def _interleave(
    server_only: list[Any],
    from_patch: list[Any],
    live: dict[Hashable, int],
    merge_key: str,
    path: str,
) -> list[Any]:
    """Take a server-only item first only when both items are in the live list and it comes
    earlier there; otherwise take the patch item. Items new to the list thus lead."""
    result: list[Any] = []
    left = right = 0
    while left < len(server_only) and right < len(from_patch):
        left_at = live.get(_key_of(server_only[left], merge_key, path))
        right_at = live.get(_key_of(from_patch[right], merge_key, path))
        if left_at is not None and right_at is not None and left_at < right_at:
            result.append(server_only[left])
            left += 1
        else:
            result.append(from_patch[right])
            right += 1
    result.extend(server_only[left:])
    result.extend(from_patch[right:])
    return result


def _apply_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], type_name: str | None, path: str
) -> None:
    """``mergePatchIntoOriginal``: merge each list that has a ``$setElementOrder/<field>`` and
    order it: the directive's order, then the patch's, then the live list's."""
    for key in [key for key in patch if key.startswith(SET_ELEMENT_ORDER)]:
        order = patch.pop(key)
        field = _directive_field(key, SET_ELEMENT_ORDER, path)
        field_path = _child(path, field)
        if not isinstance(order, list):
            raise StrategicMergeError(
                f"{field_path}: invalid patch format of setElementOrder list: {key} must be a list"
            )
        live = original.get(field)
        patch_list = patch.get(field)
        if field in original and not isinstance(live, list):
            raise StrategicMergeError(f"{field_path}: {key} names a field that is not a list")
        if field in patch and not isinstance(patch_list, list):
            raise StrategicMergeError(f"{field_path}: {key} is sent with a non-list {field}")
        rule = field_rule(type_name, field)
        _validate_order(patch_list or [], order, rule.merge_key, field_path)
        if isinstance(live, list) and isinstance(patch_list, list):
            merged = _merge_list_field(live, patch_list, rule, field_path)
        elif isinstance(live, list):
            merged = live
        elif isinstance(patch_list, list):
            merged = _merge_list_field([], patch_list, FieldRule(), field_path)
        else:
            continue
        patch.pop(field, None)
        if merged and _element_shape(merged, field_path) == "map" and not rule.merge_key:
            raise StrategicMergeError(f"{field_path}: cannot order a list without a merge key")
        original[field] = _order(
            merged,
            patch_order=order,
            live_order=live if isinstance(live, list) else [],
            merge_key=rule.merge_key,
            path=field_path,
        )


def _validate_order(patch_list: list[Any], order: list[Any], merge_key: str, path: str) -> None:
    """``validatePatchWithSetOrderList``: the patch's items must appear in the directive, in
    the same relative order (deletion elements aside)."""
    if not patch_list or not order:
        return
    items = [item for item in patch_list if not (isinstance(item, dict) and DIRECTIVE in item)]
    position = 0
    for item in items:
        key = _key_of(item, merge_key, path)
        while position < len(order) and _key_of(order[position], merge_key, path) != key:
            position += 1
        if position == len(order):
            raise StrategicMergeError(
                f"{path}: the order in the patch list {json.dumps(patch_list)} doesn't match "
                f"{SET_ELEMENT_ORDER} list {json.dumps(order)}"
            )
        position += 1
