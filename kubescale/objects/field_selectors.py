"""Field selectors with the semantics of ``k8s.io/apimachinery/pkg/fields``.

The API server filters ``list``/``watch`` results with them and the access layer's listers filter
their caches with them, so both must agree with a real cluster:

* selector strings follow ``fields.ParseSelector``: ``f=v``, ``f==v``, ``f!=v``, comma = AND,
  ``\\,`` ``\\=`` ``\\\\`` escapes in values; errors carry upstream's wording;
* fields are dotted paths resolved on the raw object dict; a missing field reads as ``""``
  (upstream field sets);
* ``str()`` of a selector is upstream's ``String()`` (requirements sorted by their text).

Pure functions and immutable values; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubescale.objects.selection import DOUBLE_EQUALS, EQUALS, NOT_EQUALS, SelectorError

__all__ = ["FieldRequirement", "FieldSelector", "field_value", "parse_field_selector"]


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value a field selector compares: the dotted ``path`` in ``obj`` as text.

    Missing fields (and objects/lists) read as ``""`` like a field absent from upstream's
    field set; booleans read ``true``/``false`` and numbers their decimal text.
    """
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if isinstance(current, bool):
        return "true" if current else "false"
    if isinstance(current, str):
        return current
    if isinstance(current, int | float):
        return str(current)
    return ""


def _escape_field_value(value: str) -> str:
    # fields.EscapeValue
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    # fields.UnescapeValue
    out: list[str] = []
    in_slash = False
    for char in value:
        if in_slash:
            if char not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{char}")
            out.append(char)
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char in ",=":
            # Upstream formats the rune with %v, i.e. as its code point number.
            raise SelectorError(
                f"invalid field selector: unescaped character in value: {ord(char)}"
            )
        else:
            out.append(char)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


@dataclass(frozen=True)
class FieldRequirement:
    """``field=value`` (also written ``==``) or ``field!=value``."""

    field: str
    operator: str  # EQUALS or NOT_EQUALS
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        equal = field_value(obj, self.field) == self.value
        return equal if self.operator == EQUALS else not equal

    def __str__(self) -> str:
        return f"{self.field}{self.operator}{_escape_field_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements in upstream's order (sorted by their text)."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def fields(self) -> frozenset[str]:
        """Every field the selector reads (for validating against a kind's field labels)."""
        return frozenset(requirement.field for requirement in self.requirements)

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def exact_value(self, field: str) -> str | None:
        """fields.Selector.RequiresExactMatch: the value an ``=`` requirement pins ``field`` to."""
        for requirement in self.requirements:
            if requirement.field == field and requirement.operator == EQUALS:
                return requirement.value
        return None

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


def _split_field_terms(text: str) -> list[str]:
    # fields.splitTerms: commas split terms unless backslash-escaped (the backslash is kept).
    terms: list[str] = []
    start = 0
    in_slash = False
    for index, char in enumerate(text):
        if in_slash:
            in_slash = False
        elif char == "\\":
            in_slash = True
        elif char == ",":
            terms.append(text[start:index])
            start = index + 1
    terms.append(text[start:])
    return terms


def _split_field_term(term: str) -> tuple[str, str, str] | None:
    # fields.splitTerm: the first operator occurrence splits; "!=" and "==" before "=".
    for index in range(len(term)):
        for operator in (NOT_EQUALS, DOUBLE_EQUALS, EQUALS):
            if term.startswith(operator, index):
                return term[:index], operator, term[index + len(operator) :]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """fields.ParseSelector; ``""`` selects everything. Raises :class:`SelectorError`."""
    if not text:
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for term in sorted(_split_field_terms(text)):
        if not term:
            continue
        split = _split_field_term(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, raw_value = split
        value = _unescape_field_value(raw_value)
        requirements.append(
            FieldRequirement(
                field=field, operator=NOT_EQUALS if operator == NOT_EQUALS else EQUALS, value=value
            )
        )
    return FieldSelector(requirements=tuple(requirements))
