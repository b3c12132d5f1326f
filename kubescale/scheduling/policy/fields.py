"""Reading a decoded YAML/JSON document field by field, with errors that name the field.

Upstream decodes the policy with Go's ``encoding/json`` (through ``sigs.k8s.io/yaml``), which
matches field names case-insensitively (``preevictionfilter`` and ``preEvictionFilter`` are the
same field); :class:`Fields` does the same. Unlike upstream, an unknown field is an error (a
misspelt field would otherwise be ignored without a word): the message names it and lists the
known ones.

Every error is a :class:`PolicyError` whose message starts with the field's path, e.g.
``profiles[default].pluginConfig[LowNodeUtilization].args.thresholds.cpu: 120 is not in
[0, 100]``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from kubescale.objects.selectors import LabelSelector, SelectorError, label_selector_from_dict

__all__ = ["Fields", "PolicyError", "fail"]


class PolicyError(ValueError):
    """A policy that cannot be used; the message names the field."""


def fail(path: str, problem: str) -> NoReturn:
    raise PolicyError(f"{path}: {problem}" if path else problem)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Fields:
    """The fields of one object at ``path`` (module docstring)."""

    def __init__(self, raw: object, path: str, known: Iterable[str]) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            fail(path, f"must be an object, got {_type_name(raw)}")
        self.path = path
        self._known = {name.lower(): name for name in known}
        self._values: dict[str, Any] = {}
        for key, value in raw.items():
            canonical = self._known.get(str(key).lower())
            if canonical is None:
                names = ", ".join(sorted(self._known.values()))
                fail(self.at(str(key)), f"unknown field (known fields: {names})")
            self._values[canonical] = value

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return self._values.get(key) is not None

    def raw(self, key: str) -> Any:
        return self._values.get(key)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self._values.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            fail(self.at(key), f"must be true or false, got {_type_name(value)}")
        return value

    def optional_flag(self, key: str) -> bool | None:
        return self.flag(key) if self.has(key) else None

    def integer(self, key: str, default: int | None = None, *, minimum: int | None = None) -> int:
        value = self.optional_integer(key, minimum=minimum)
        if value is None:
            if default is None:
                fail(self.at(key), "is required")
            return default
        return value

    def optional_integer(self, key: str, *, minimum: int | None = None) -> int | None:
        value = self._values.get(key)
        if value is None:
            return None
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            fail(self.at(key), f"must be an integer, got {_type_name(value)}")
        if minimum is not None and value < minimum:
            fail(self.at(key), f"must be >= {minimum}, got {value}")
        return value

    def number(self, key: str) -> float | None:
        value = self._values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            fail(self.at(key), f"must be a number, got {_type_name(value)}")
        return float(value)

    def text(self, key: str, default: str = "") -> str:
        value = self._values.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            fail(self.at(key), f"must be a string, got {_type_name(value)}")
        return value

    def items(self, key: str) -> list[Any] | None:
        value = self._values.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            fail(self.at(key), f"must be a list, got {_type_name(value)}")
        return value

    def strings(self, key: str) -> tuple[str, ...] | None:
        """A list of strings; ``None`` when absent (upstream's nil slice)."""
        items = self.items(key)
        if items is None:
            return None
        for index, item in enumerate(items):
            if not isinstance(item, str):
                fail(f"{self.at(key)}[{index}]", f"must be a string, got {_type_name(item)}")
        return tuple(items)

    def ints(self, key: str) -> tuple[int, ...] | None:
        items = self.items(key)
        if items is None:
            return None
        for index, item in enumerate(items):
            if isinstance(item, bool) or not isinstance(item, int):
                fail(f"{self.at(key)}[{index}]", f"must be an integer, got {_type_name(item)}")
        return tuple(items)

    def object(self, key: str, known: Iterable[str]) -> Fields | None:
        value = self._values.get(key)
        if value is None:
            return None
        return Fields(value, self.at(key), known)

    def label_selector(self, key: str) -> LabelSelector | None:
        """A ``metav1.LabelSelector``; ``None`` when absent (no filtering)."""
        value = self._values.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            fail(self.at(key), f"must be a label selector object, got {_type_name(value)}")
        Fields(value, self.at(key), ("matchLabels", "matchExpressions"))
        try:
            return label_selector_from_dict(value)
        except SelectorError as err:
            fail(self.at(key), f"invalid label selector: {err}")
