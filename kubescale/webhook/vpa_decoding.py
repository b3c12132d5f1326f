"""Does a VPA decode as upstream's ``json.Unmarshal`` into ``vpa_types.VerticalPodAutoscaler``?

Upstream's VPA handler first decodes the admitted object with Go's ``encoding/json``; when that
fails the request is denied with one ``InternalError`` cause at field path ``.`` carrying the
decoder's message. Mutating webhooks run before the API server validates a custom resource
against its schema, so such objects do reach the webhook. This module walks the ``spec`` of the
raw dict the way the decoder does and returns that message, so validation afterwards can read
the fields by type:

* keys are visited in document order; unknown keys are ignored; ``null`` leaves a field unset;
* a JSON value of the wrong kind is a ``*json.UnmarshalTypeError`` --
  ``json: cannot unmarshal <string|number|bool|array|object> into Go struct field
  <Struct>.<json.path> of type <go type>``; a number that does not fit an integer field reads
  ``number <literal>``; decoding goes on and the *first* such error is the one reported;
* a quantity that does not parse is ``resource.Quantity.UnmarshalJSON``'s error, returned at
  once (``quantities must match the regular expression ...``).

:func:`decode_vpa` is the boundary: the raw object, once it decodes, comes back as the typed
:class:`~kubescale.objects.vpa.VerticalPodAutoscaler` the rules read, with what Go's decoder
would have made of it: a ``null`` field left out (unset), a quantity as its text (a bare JSON
number as :meth:`~kubescale.objects.quantities.Quantity.from_json` reads it, a ``null`` map value
as ``"0"``, the zero quantity), a ``null`` list item as its type's zero value (``""``, ``{}``).

Only ``spec`` is walked: object metadata is decoded (and rejected) by the API server itself,
and ``status`` is not written through this webhook. Go's decoder also matches keys
case-insensitively; a structural CRD prunes such keys before admission, so exact names are used.

Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = ["VpaDecodeError", "decode_vpa", "vpa_decode_error"]

# resource.ErrFormatWrong / ErrNumeric / ErrSuffix.
_FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_NUMERIC = "unable to parse numeric part of quantity"
_SUFFIX = "unable to parse quantity's suffix"


@dataclass(frozen=True)
class _Scalar:
    go_type: str  # "string", "v1.UpdateMode", "int32", "int64"


@dataclass(frozen=True)
class _Quantity:
    pass


@dataclass(frozen=True)
class _Struct:
    name: str
    fields: Mapping[str, _Schema]

    @property
    def go_type(self) -> str:
        return f"v1.{self.name}"


@dataclass(frozen=True)
class _Slice:
    element: _Schema
    go_type: str


@dataclass(frozen=True)
class _Map:
    value: _Schema
    go_type: str


_Schema = _Scalar | _Quantity | _Struct | _Slice | _Map

_STRING = _Scalar("string")
_INT32 = _Scalar("int32")
_INT64 = _Scalar("int64")
_QUANTITY = _Quantity()
_RESOURCE_NAMES = _Slice(_Scalar("v1.ResourceName"), "[]v1.ResourceName")
_RESOURCE_LIST = _Map(_QUANTITY, "v1.ResourceList")
_GENERIC_BOOST = _Struct(
    "GenericStartupBoost",
    {
        "type": _Scalar("v1.StartupBoostType"),
        "factor": _INT32,
        "quantity": _QUANTITY,
        "durationSeconds": _INT32,
    },
)
_STARTUP_BOOST = _Struct("StartupBoost", {"cpu": _GENERIC_BOOST})
_CONTAINER_POLICY = _Struct(
    "ContainerResourcePolicy",
    {
        "containerName": _STRING,
        "mode": _Scalar("v1.ContainerScalingMode"),
        "minAllowed": _RESOURCE_LIST,
        "maxAllowed": _RESOURCE_LIST,
        "controlledResources": _RESOURCE_NAMES,
        "controlledValues": _Scalar("v1.ContainerControlledValues"),
        "oomBumpUpRatio": _QUANTITY,
        "oomMinBumpUp": _QUANTITY,
        "memoryAggregationIntervalSeconds": _INT32,
        "memoryAggregationIntervalCount": _INT64,
        "startupBoost": _STARTUP_BOOST,
    },
)
_EVICTION_REQUIREMENT = _Struct(
    "EvictionRequirement",
    {"resources": _RESOURCE_NAMES, "changeRequirement": _Scalar("v1.EvictionChangeRequirement")},
)
_SPEC = _Struct(
    "VerticalPodAutoscalerSpec",
    {
        "targetRef": _Struct(
            "CrossVersionObjectReference",
            {"kind": _STRING, "name": _STRING, "apiVersion": _STRING},
        ),
        "updatePolicy": _Struct(
            "PodUpdatePolicy",
            {
                "updateMode": _Scalar("v1.UpdateMode"),
                "minReplicas": _INT32,
                "evictionRequirements": _Slice(_EVICTION_REQUIREMENT, "[]*v1.EvictionRequirement"),
                "evictAfterOOMSeconds": _INT32,
            },
        ),
        "resourcePolicy": _Struct(
            "PodResourcePolicy",
            {"containerPolicies": _Slice(_CONTAINER_POLICY, "[]v1.ContainerResourcePolicy")},
        ),
        "recommenders": _Slice(
            _Struct("VerticalPodAutoscalerRecommenderSelector", {"name": _STRING}),
            "[]*v1.VerticalPodAutoscalerRecommenderSelector",
        ),
        "startupBoost": _STARTUP_BOOST,
    },
)
_VPA = _Struct("VerticalPodAutoscaler", {"spec": _SPEC})
_INT_RANGES = {"int32": 2**31, "int64": 2**63}


class _QuantityFailure(Exception):
    """An Unmarshaler error: decoding stops and this message is the result."""


@dataclass
class _Context:
    struct: str = ""
    path: tuple[str, ...] = ()


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _type_error(kind: str, go_type: str, context: _Context) -> str:
    if context.struct or context.path:
        where = f"Go struct field {context.struct}.{'.'.join(context.path)}"
        return f"json: cannot unmarshal {kind} into {where} of type {go_type}"
    return f"json: cannot unmarshal {kind} into Go value of type {go_type}"


def _number_literal(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


def _quantity_text(value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number_literal(value)
    return json.dumps(value)


def _check_quantity(value: object) -> None:
    try:
        Quantity.parse(_quantity_text(value))
    except QuantityError as error:
        text = str(error)
        if "regular expression" in text:
            raise _QuantityFailure(_FORMAT_WRONG) from error
        if "suffix" in text:
            raise _QuantityFailure(_SUFFIX) from error
        if "numeric part" in text:
            raise _QuantityFailure(_NUMERIC) from error
        raise _QuantityFailure(text) from error


def _walk(value: object, schema: _Schema, context: _Context, errors: list[str]) -> None:
    if value is None:
        return  # null: the field stays unset (or a zero quantity)
    if isinstance(schema, _Quantity):
        _check_quantity(value)
        return
    kind = _json_kind(value)
    if isinstance(schema, _Scalar):
        if schema.go_type in _INT_RANGES:
            if kind != "number":
                errors.append(_type_error(kind, schema.go_type, context))
                return
            assert isinstance(value, int | float)
            limit = _INT_RANGES[schema.go_type]
            if isinstance(value, float) or not -limit <= value < limit:
                errors.append(
                    _type_error(f"number {_number_literal(value)}", schema.go_type, context)
                )
        elif kind != "string":
            errors.append(_type_error(kind, schema.go_type, context))
        return
    if isinstance(schema, _Slice):
        if not isinstance(value, list):
            errors.append(_type_error(kind, schema.go_type, context))
            return
        for item in value:
            _walk(item, schema.element, context, errors)
        return
    if isinstance(schema, _Map):
        if not isinstance(value, Mapping):
            errors.append(_type_error(kind, schema.go_type, context))
            return
        for item in value.values():
            _walk(item, schema.value, context, errors)
        return
    if not isinstance(value, Mapping):
        errors.append(_type_error(kind, schema.go_type, context))
        return
    for key, item in value.items():
        field = schema.fields.get(key) if isinstance(key, str) else None
        if field is None:
            continue
        inner = _Context(struct=schema.name, path=(*context.path, key))
        _walk(item, field, inner, errors)


def vpa_decode_error(vpa: object) -> str | None:
    """The error upstream's ``json.Unmarshal`` reports for this VPA object, or ``None``."""
    errors: list[str] = []
    try:
        _walk(vpa, _VPA, _Context(), errors)
    except _QuantityFailure as failure:
        return str(failure)
    return errors[0] if errors else None


@dataclass(frozen=True)
class VpaDecodeError:
    """Why a VPA does not decode: upstream's decoder message."""

    message: str


def _zero(schema: _Schema) -> object:
    """Go's zero value of a list item that is ``null``: ``""`` for a string, ``{}`` for a
    struct (a nil pointer for the pointer slices, counted all the same)."""
    return {} if isinstance(schema, _Struct) else ""


def _decoded(value: object, schema: _Schema) -> object:
    """``value``, which :func:`_walk` found to decode, as the typed objects hold it (module
    docstring)."""
    if isinstance(schema, _Quantity):
        return "0" if value is None else _quantity_text(value)
    if isinstance(schema, _Slice) and isinstance(value, list):
        return [
            _zero(schema.element) if item is None else _decoded(item, schema.element)
            for item in value
        ]
    if isinstance(schema, _Map) and isinstance(value, Mapping):
        return {key: _decoded(item, schema.value) for key, item in value.items()}
    if isinstance(schema, _Struct) and isinstance(value, Mapping):
        decoded: dict[object, object] = {}
        for key, item in value.items():
            if item is None:
                continue  # null: the field stays unset
            field = schema.fields.get(key) if isinstance(key, str) else None
            decoded[key] = item if field is None else _decoded(item, field)
        return decoded
    return value  # a string or an integer in range (checked)


def decode_vpa(raw: object) -> VerticalPodAutoscaler | VpaDecodeError:
    """``json.Unmarshal`` of the raw admitted object (untrusted JSON) into a VPA: the typed
    VPA (module docstring), or the error upstream reports."""
    message = vpa_decode_error(raw)
    if message is not None:
        return VpaDecodeError(message)
    # _walk checked every field of the spec against upstream's Go types, which
    # kubescale.objects.vpa names: the decoded dict is that TypedDict.
    return cast(VerticalPodAutoscaler, _decoded(raw, _VPA))
