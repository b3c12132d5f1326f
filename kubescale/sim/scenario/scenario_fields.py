"""Typed readers for the fields of a scenario document, collecting every problem with its path.

A scenario is hand-written YAML, so a mistake should be reported once, completely: each reader
takes the raw value and its field path (``workloads[2].containers[0].usage.type``), returns the
parsed value, and on a problem records ``"<path>: <what is wrong>"`` in :class:`Problems` and
returns ``None`` so that parsing goes on and the next mistake is found too.

Units follow Kubernetes: durations are Go ``time.Duration`` strings (``24h``, ``1m30s``),
resource amounts are quantities (``250m``, ``1.5Gi``, ``2``) read with
:mod:`kubescale.objects.quantities`, label keys and values are checked with upstream's rules
(:mod:`kubescale.objects.label_validation`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeVar

from kubescale.base.go_time import parse_duration
from kubescale.objects.label_validation import label_value_errors, qualified_name_errors
from kubescale.objects.quantities import Quantity, QuantityError

__all__ = [
    "TAINT_EFFECTS",
    "Problems",
    "field_path",
    "index_path",
]

T = TypeVar("T")

TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def field_path(parent: str, key: str) -> str:
    """``parent.key`` (just ``key`` at the top)."""
    return f"{parent}.{key}" if parent else key


def index_path(parent: str, index: int) -> str:
    return f"{parent}[{index}]"


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return type(value).__name__


class Problems:
    """Every problem found so far, as ``"<field path>: <message>"`` lines in document order."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.messages.append(f"{path}: {message}" if path else message)

    def __bool__(self) -> bool:
        return bool(self.messages)

    # ---------------------------------------------------------------------- containers

    def mapping(
        self,
        value: object,
        path: str,
        *,
        allowed: Iterable[str],
        required: Iterable[str] = (),
    ) -> Mapping[str, Any] | None:
        """A mapping with only ``allowed`` keys and every ``required`` one."""
        if not isinstance(value, dict):
            self.add(path, f"want a mapping, got {_type_name(value)}")
            return None
        known = list(allowed)
        for key in value:
            if not isinstance(key, str):
                self.add(path, f"field names must be strings, got {key!r}")
            elif key not in known:
                self.add(
                    field_path(path, key),
                    f'unknown field "{key}" (want one of: {", ".join(known)})',
                )
        for key in required:
            if value.get(key) is None:
                self.add(field_path(path, key), "required")
        return value

    def items(self, value: object, path: str) -> list[tuple[str, Any]]:
        """``(index path, item)`` of a list; an absent list is empty."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, f"want a list, got {_type_name(value)}")
            return []
        return [(index_path(path, i), item) for i, item in enumerate(value)]

    def each(
        self, value: object, path: str, parse: Callable[[object, str], T | None]
    ) -> tuple[T, ...]:
        """Every item of a list parsed by ``parse`` (items with problems left out)."""
        parsed = (parse(item, item_path) for item_path, item in self.items(value, path))
        return tuple(item for item in parsed if item is not None)

    # ------------------------------------------------------------------------- scalars

    def string(self, value: object, path: str, *, default: str | None = None) -> str | None:
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            self.add(path, f"want a non-empty string, got {_type_name(value)}")
            return None
        return value

    def integer(
        self, value: object, path: str, *, default: int | None = None, minimum: int | None = None
    ) -> int | None:
        if value is None:
            return default
        if not isinstance(value, int) or isinstance(value, bool):
            self.add(path, f"want an integer, got {_type_name(value)}")
            return None
        if minimum is not None and value < minimum:
            self.add(path, f"must be at least {minimum}, got {value}")
            return None
        return value

    def number(
        self,
        value: object,
        path: str,
        *,
        default: float | None = None,
        minimum: float = 0.0,
        maximum: float | None = None,
    ) -> float | None:
        if value is None:
            return default
        if not isinstance(value, int | float) or isinstance(value, bool):
            self.add(path, f"want a number, got {_type_name(value)}")
            return None
        number = float(value)
        if not math.isfinite(number) or number < minimum:
            self.add(path, f"must be a finite number ≥ {minimum:g}, got {value}")
            return None
        if maximum is not None and number > maximum:
            self.add(path, f"must be at most {maximum:g}, got {value}")
            return None
        return number

    def boolean(self, value: object, path: str, *, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.add(path, f"want true or false, got {_type_name(value)}")
            return default
        return value

    def duration(
        self, value: object, path: str, *, default: float | None = None, positive: bool = False
    ) -> float | None:
        """A Go duration string → seconds (``0`` alone may be a bare number)."""
        if value is None:
            return default
        if value == 0 and not isinstance(value, bool) and not positive:
            return 0.0
        if not isinstance(value, str):
            self.add(path, f'want a duration string like "1m" or "24h", got {_type_name(value)}')
            return None
        try:
            seconds = parse_duration(value)
        except argparse.ArgumentTypeError as exc:
            self.add(path, str(exc))
            return None
        if seconds < 0 or (positive and seconds == 0):
            self.add(path, f"must be {'> 0' if positive else '≥ 0'}, got {value!r}")
            return None
        return seconds

    def quantity(self, value: object, path: str) -> Quantity | None:
        """A non-negative Kubernetes quantity (string or bare number)."""
        if value is None:
            return None
        try:
            quantity = Quantity.from_json(value)
        except QuantityError as exc:
            self.add(path, str(exc))
            return None
        if quantity.sign() < 0:
            self.add(path, f"must not be negative, got {value!r}")
            return None
        return quantity

    def choice(self, value: object, path: str, *, what: str, choices: Iterable[str]) -> str | None:
        options = list(choices)
        if value is None:
            self.add(path, "required")
            return None
        if value not in options:
            shown = f'"{value}"' if isinstance(value, str) else repr(value)
            self.add(path, f"unknown {what} {shown} (want one of: {', '.join(options)})")
            return None
        return str(value)

    # ------------------------------------------------------------------ Kubernetes bits

    def labels(self, value: object, path: str) -> dict[str, str]:
        """A label map, keys and values checked with upstream's rules."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.add(path, f"want a mapping of label keys to values, got {_type_name(value)}")
            return {}
        labels: dict[str, str] = {}
        for key, raw in value.items():
            key_path = field_path(path, str(key))
            text = "" if raw is None else raw
            if not isinstance(key, str) or not isinstance(text, str):
                self.add(key_path, "label keys and values must be strings (quote numbers)")
                continue
            problems = [f"key: {e}" for e in qualified_name_errors(key)]
            problems += [f"value: {e}" for e in label_value_errors(text)]
            for problem in problems:
                self.add(key_path, problem)
            if not problems:
                labels[key] = text
        return dict(sorted(labels.items()))

    def taints(self, value: object, path: str) -> tuple[dict[str, str], ...]:
        """Node taints ``{key, value, effect}`` as the Node API spells them."""
        taints: list[dict[str, str]] = []
        for item_path, item in self.items(value, path):
            raw = self.mapping(
                item, item_path, allowed=("key", "value", "effect"), required=("key",)
            )
            if raw is None:
                continue
            key = self.string(raw.get("key"), field_path(item_path, "key"))
            for error in qualified_name_errors(key) if key else []:
                self.add(field_path(item_path, "key"), error)
            text = raw.get("value", "")
            if not isinstance(text, str):
                self.add(field_path(item_path, "value"), "want a string (quote numbers)")
                continue
            effect = self.choice(
                raw.get("effect"),
                field_path(item_path, "effect"),
                what="taint effect",
                choices=TAINT_EFFECTS,
            )
            if key and effect:
                taint = {"key": key, "effect": effect}
                if text:
                    taint["value"] = text
                taints.append(taint)
        return tuple(taints)
