"""Server-side field validation (``fieldValidation=Strict|Warn|Ignore``) for built-in kinds.

kube-apiserver decodes every write strictly against the kind's schema: with ``Strict`` an
unknown field is ``400 BadRequest: strict decoding error: unknown field "spec.replicaz"``; with
``Warn`` (the default since 1.27) each unknown field becomes a ``Warning`` header and is dropped
by the decode; ``Ignore`` drops them silently. The schema here is the one the generated
``kubernetes.aio`` models carry (``openapi_types`` and ``attribute_map``, generated from the
same OpenAPI document). Custom resources are not checked: their schemas live in the CRDs and
are not evaluated by this server.

Unknown fields are reported, never removed: the server stores what it was sent, unlike a Go
round trip (a documented difference for ``Warn``/``Ignore``).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from kubernetes.aio.client import models

from kubescale.kube.resources import ResourceType

from . import errors
from .registry import BUILTIN_GROUPS

__all__ = ["FIELD_VALIDATION_MODES", "check_fields", "unknown_fields"]

FIELD_VALIDATION_MODES: Final = ("Ignore", "Warn", "Strict")
_LIST: Final = re.compile(r"List\[(.+)\]")
_DICT: Final = re.compile(r"Dict\[str, (.+)\]")
_PRIMITIVES: Final = frozenset(
    {"str", "int", "float", "bool", "datetime", "date", "object", "bytearray"}
)
_MODEL_NAMES: Final = {
    ("", "Event"): "CoreV1Event",
    ("events.k8s.io", "Event"): "EventsV1Event",
}


def _model_name(rt: ResourceType) -> str:
    return _MODEL_NAMES.get((rt.group, rt.kind), rt.version.capitalize() + rt.kind)


@functools.cache
def _model(name: str) -> Any:
    return getattr(models, name, None)


def _walk(type_name: str, value: Any, path: str, found: list[str]) -> None:
    if type_name in _PRIMITIVES or value is None:
        return
    list_match = _LIST.fullmatch(type_name)
    if list_match is not None:
        if isinstance(value, list):
            for index, item in enumerate(value):
                _walk(list_match.group(1), item, f"{path}[{index}]", found)
        return
    dict_match = _DICT.fullmatch(type_name)
    if dict_match is not None:
        if isinstance(value, dict):
            for key, item in value.items():
                _walk(dict_match.group(1), item, f"{path}.{key}", found)
        return
    model = _model(type_name)
    if model is None or not isinstance(value, dict):
        return
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        attr = by_json.get(key)
        child = f"{path}.{key}" if path else key
        if attr is None:
            found.append(child)
            continue
        _walk(model.openapi_types[attr], item, child, found)


def unknown_fields(rt: ResourceType, obj: dict[str, Any]) -> list[str]:
    """Dotted paths of the fields of ``obj`` its kind's schema does not know (built-ins only)."""
    if rt.group not in BUILTIN_GROUPS:
        return []
    name = _model_name(rt)
    if _model(name) is None:
        return []
    found: list[str] = []
    _walk(name, obj, "", found)
    return found


def check_fields(rt: ResourceType, obj: dict[str, Any], *, mode: str) -> list[str]:
    """Apply ``fieldValidation``: raise 400 (Strict), or return the warnings (Warn)."""
    if mode not in FIELD_VALIDATION_MODES:
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{mode}": supported values: "Ignore", '
            '"Strict", "Warn"'
        )
    if mode == "Ignore":
        return []
    unknown = unknown_fields(rt, obj)
    if not unknown:
        return []
    if mode == "Strict":
        listed = ", ".join(f'unknown field "{field}"' for field in unknown)
        raise errors.bad_request(f"strict decoding error: {listed}")
    return [f'unknown field "{field}"' for field in unknown]
