"""Checks a custom resource against a CRD's structural schema, as kube-apiserver does on a write.

kube-apiserver validates every custom resource against its CRD version's ``openAPIV3Schema`` and
*prunes* fields the schema does not declare (silently: the object is stored without them). The
in-process API server does neither (see ``sim/apiserver/field_validation.py``), so the manifest
tests evaluate the schema here to show that upstream's VPA objects are valid and lose nothing.

:func:`check_object` covers the keywords the VPA CRDs use, with apiextensions semantics:
``type`` (``integer`` excludes booleans and fractions; ``number`` accepts integers), ``nullable``,
``properties`` (undeclared keys are pruned), ``required``, ``additionalProperties`` (a schema),
``items``, ``enum``, ``pattern`` (strings only), ``minimum``, ``format`` (``int32``, ``int64``,
``date-time``), ``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields`` and
``x-kubernetes-validations`` in the one CEL form the CRDs use,
``(self.<field> == '<literal>') == has(self.<field>)``. The root ``metadata`` is ObjectMeta,
validated by the server itself, and is skipped. :func:`structural_errors` checks that a schema
is structural (apiextensions' rules for v1 CRDs) and uses only keywords the checker understands:
a new keyword or rule form is reported instead of being silently ignored.

Messages follow kube-apiserver's field errors, e.g. ``spec.updatePolicy.updateMode: Unsupported
value: "Sometimes": supported values: "Off", "Initial", ...``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

KEYWORDS: Final = frozenset(
    {
        "description",
        "type",
        "nullable",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "pattern",
        "minimum",
        "format",
        "anyOf",
        "x-kubernetes-int-or-string",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-validations",
        "x-kubernetes-map-type",
    }
)
TYPES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean"})
INT_OR_STRING_ANY_OF: Final = [{"type": "integer"}, {"type": "string"}]
FORMAT_RANGES: Final = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_RULE: Final = re.compile(r"\(self\.(\w+) == '([^']*)'\) == has\(self\.(\w+)\)")


@dataclass(frozen=True)
class SchemaReport:
    """What kube-apiserver would say about an object: field errors, and fields it would prune."""

    errors: tuple[str, ...]
    pruned: tuple[str, ...]


def check_object(schema: dict[str, Any], obj: dict[str, Any]) -> SchemaReport:
    """Validate ``obj`` (a whole custom resource) against a version's ``openAPIV3Schema``."""
    errors: list[str] = []
    pruned: list[str] = []
    _Walker(errors, pruned).node(schema, obj, "", root=True)
    return SchemaReport(errors=tuple(errors), pruned=tuple(pruned))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _has_type(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in {"integer", "number"}
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == expected


def evaluate_rule(rule: str, value: dict[str, Any]) -> bool:
    """The CEL rule ``(self.a == 'X') == has(self.b)`` on an object; raises on other forms."""
    match = _RULE.fullmatch(rule)
    if match is None:
        raise ValueError(f"unsupported CEL rule {rule!r}")
    field, literal, present = match.groups()
    if field not in value:
        raise KeyError(f"no such key: {field}")
    matches_literal: bool = value[field] == literal
    return matches_literal == (present in value)


class _Walker:
    def __init__(self, errors: list[str], pruned: list[str]) -> None:
        self.errors = errors
        self.pruned = pruned

    def node(self, schema: dict[str, Any], value: Any, path: str, *, root: bool = False) -> None:
        if value is None:
            if not schema.get("nullable"):
                self.errors.append(f"{path}: Invalid value: null: must not be null")
            return
        if schema.get("x-kubernetes-int-or-string"):
            self.int_or_string(schema, value, path)
            return
        expected = schema.get("type")
        if expected is not None and not _has_type(value, expected):
            self.errors.append(
                f'{path}: Invalid value: "{_json_type(value)}": {path} in body must be of '
                f"type {expected}: {json.dumps(_json_type(value))}"
            )
            return
        self.scalar_constraints(schema, value, path)
        if isinstance(value, dict):
            self.object(schema, value, path, root=root)
        elif isinstance(value, list):
            items = schema.get("items")
            for index, item in enumerate(value):
                if items is not None:
                    self.node(items, item, f"{path}[{index}]")

    def int_or_string(self, schema: dict[str, Any], value: Any, path: str) -> None:
        if _json_type(value) not in {"integer", "string"}:
            self.errors.append(
                f'{path}: Invalid value: "{_json_type(value)}": {path} in body must be of '
                "type integer,string"
            )
            return
        self.scalar_constraints(schema, value, path)

    def scalar_constraints(self, schema: dict[str, Any], value: Any, path: str) -> None:
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            supported = ", ".join(json.dumps(option) for option in enum)
            self.errors.append(
                f"{path}: Unsupported value: {json.dumps(value)}: supported values: {supported}"
            )
        pattern = schema.get("pattern")
        if pattern is not None and isinstance(value, str) and re.search(pattern, value) is None:
            self.errors.append(
                f"{path}: Invalid value: {json.dumps(value)}: {path} in body should match "
                f"'{pattern}'"
            )
        minimum = schema.get("minimum")
        is_number = _json_type(value) in {"integer", "number"}
        if minimum is not None and is_number and value < minimum:
            self.errors.append(
                f"{path}: Invalid value: {value}: {path} in body should be greater than or "
                f"equal to {minimum}"
            )
        self.format(schema.get("format"), value, path)

    def format(self, fmt: str | None, value: Any, path: str) -> None:
        if fmt in FORMAT_RANGES and _json_type(value) == "integer":
            low, high = FORMAT_RANGES[fmt]
            if not low <= value <= high:
                self.errors.append(f"{path}: Invalid value: {value}: out of range for {fmt}")
        elif fmt == "date-time" and isinstance(value, str):
            try:
                datetime.fromisoformat(value)
            except ValueError:
                self.errors.append(
                    f"{path}: Invalid value: {json.dumps(value)}: {path} in body must be of "
                    "type date-time"
                )

    def object(
        self, schema: dict[str, Any], value: dict[str, Any], path: str, *, root: bool
    ) -> None:
        properties: dict[str, Any] = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        for name in schema.get("required") or []:
            if name not in value:
                self.errors.append(f"{_join(path, name)}: Required value")
        for key, item in value.items():
            child = _join(path, key)
            if root and key == "metadata":
                if not isinstance(item, dict):
                    self.errors.append("metadata: Invalid value: must be an object")
                continue
            if key in properties:
                self.node(properties[key], item, child)
            elif isinstance(additional, dict):
                self.node(additional, item, child)
            elif not preserve:
                self.pruned.append(child)
        for validation in schema.get("x-kubernetes-validations") or []:
            try:
                holds = evaluate_rule(validation["rule"], value)
            except KeyError as missing:
                self.errors.append(f'{path}: Invalid value: "object": {missing.args[0]}')
                continue
            if not holds:
                self.errors.append(f'{path}: Invalid value: "object": {validation["message"]}')


def structural_errors(schema: dict[str, Any], path: str = "") -> list[str]:
    """Why ``schema`` is not a structural schema this checker fully understands (empty if it is)."""
    errors: list[str] = []
    _structural(schema, path or "<root>", errors, root=not path)
    return errors


def _structural(schema: dict[str, Any], path: str, errors: list[str], *, root: bool) -> None:
    unknown = set(schema) - KEYWORDS
    if unknown:
        errors.append(f"{path}: keywords the checker does not know: {sorted(unknown)}")
    int_or_string = bool(schema.get("x-kubernetes-int-or-string"))
    if int_or_string:
        if "type" in schema:
            errors.append(f"{path}: x-kubernetes-int-or-string must not have a type")
        if schema.get("anyOf", INT_OR_STRING_ANY_OF) != INT_OR_STRING_ANY_OF:
            errors.append(f"{path}: anyOf must be [integer, string] with int-or-string")
    elif "anyOf" in schema:
        errors.append(f"{path}: anyOf is only allowed with x-kubernetes-int-or-string")
    elif schema.get("type") not in TYPES:
        errors.append(f"{path}: type must be one of {sorted(TYPES)}, not {schema.get('type')!r}")
    if root and schema.get("type") != "object":
        errors.append(f"{path}: the root must be of type object")
    if "properties" in schema and "additionalProperties" in schema:
        errors.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if schema.get("type") == "array" and "items" not in schema:
        errors.append(f"{path}: an array needs items")
    properties: dict[str, Any] = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in properties:
            errors.append(f"{path}: required {name!r} is not a property")
    for value in schema.get("enum") or []:
        if not _has_type(value, str(schema.get("type"))):
            errors.append(f"{path}: enum value {value!r} is not of type {schema.get('type')}")
    if schema.get("x-kubernetes-map-type") not in {None, "atomic", "granular"}:
        errors.append(f"{path}: x-kubernetes-map-type must be atomic or granular")
    for validation in schema.get("x-kubernetes-validations") or []:
        rule = str(validation.get("rule", ""))
        match = _RULE.fullmatch(rule)
        if match is None:
            errors.append(f"{path}: CEL rule the checker cannot evaluate: {rule!r}")
        elif not {match.group(1), match.group(3)} <= set(properties):
            errors.append(f"{path}: CEL rule {rule!r} names a field that is not a property")
        if not validation.get("message"):
            errors.append(f"{path}: CEL rule {rule!r} has no message")
    for name, child in properties.items():
        if root and name == "metadata":
            if child != {"type": "object"}:
                errors.append(f"{path}.metadata: only 'type: object' is allowed at the root")
            continue
        _structural(child, f"{path}.{name}" if not root else name, errors, root=False)
    for key in ("items", "additionalProperties"):
        child = schema.get(key)
        if isinstance(child, dict):
            _structural(child, f"{path}.{key}" if not root else key, errors, root=False)
