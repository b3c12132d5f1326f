"""Label selectors with the semantics of Kubernetes' apimachinery, and the selector API.

The API server filters ``list``/``watch`` results with them, the access layer's listers filter
their caches with them and the VPA webhook matches pods against a VPA's ``spec.selector``; all
three must agree with a real cluster, so every rule here is the upstream one:

* label selector strings follow ``k8s.io/apimachinery/pkg/labels`` ``Parse``: ``k=v``, ``k==v``,
  ``k!=v`` (also true when the label is absent), ``k in (a,b)``, ``k notin (a,b)`` (also true
  when absent), ``k`` (exists), ``!k`` (does not exist), ``k>N`` / ``k<N`` (integer compare),
  comma = AND. Keys and values are validated as upstream does (``IsQualifiedName`` /
  ``IsValidLabelValue``, :mod:`kubescale.objects.label_validation`) and errors carry upstream's
  wording;
* ``metav1.LabelSelector`` dicts convert as ``metav1.LabelSelectorAsSelector``: ``None`` selects
  nothing, ``{}`` selects everything;
* ``str()`` of a selector is the canonical text upstream's ``String()`` produces (requirements
  sorted by key, set values sorted), e.g. ``app=web,tier in (a,b)`` -- what a Scale
  subresource reports in ``status.selector``.

Field selectors live in :mod:`kubescale.objects.field_selectors`, the operators and
:class:`SelectorError` in :mod:`kubescale.objects.selection`; both are re-exported here, so
``kubescale.objects.selectors`` is the one import for selector users.

Pure functions and immutable values; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubescale.base.go_strings import go_quote
from kubescale.objects.field_selectors import (
    FieldRequirement,
    FieldSelector,
    field_value,
    parse_field_selector,
)
from kubescale.objects.label_validation import label_value_errors, qualified_name_errors
from kubescale.objects.selection import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
    SelectorError,
)

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EVERYTHING",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOTHING",
    "NOT_EQUALS",
    "NOT_IN",
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "field_value",
    "label_selector_from_dict",
    "label_selector_from_set",
    "new_requirement",
    "parse_field_selector",
    "parse_label_selector",
]


_INT64_RE = re.compile(r"[+-]?[0-9]+")


def _check_key(key: str) -> None:
    if errors := qualified_name_errors(key):
        raise SelectorError(f"invalid label key {go_quote(key)}: {'; '.join(errors)}")


def _check_value(key: str, value: str) -> None:
    if errors := label_value_errors(value):
        detail = "; ".join(errors)
        raise SelectorError(
            f"invalid label value: {go_quote(value)}: at key: {go_quote(key)}: {detail}"
        )


def _parse_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None where Go returns an error."""
    if not _INT64_RE.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


# ---------------------------------------------------------------------------------------------
# Label selectors.


@dataclass(frozen=True)
class Requirement:
    """One label requirement (labels.Requirement). Build through :func:`new_requirement`."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        # labels.Requirement.Matches
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = _parse_int64(labels[self.key])
            want = _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        # labels.Requirement.String: set values are emitted sorted (not de-duplicated).
        op = self.operator
        if op == EXISTS:
            return self.key
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        joined = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({joined})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return f"{self.key}{symbol}{joined}"


def new_requirement(key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
    """labels.NewRequirement: validate the key, the operator's value count and each value."""
    vals = tuple(values)
    _check_key(key)
    if operator in (IN, NOT_IN):
        if not vals:
            raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            raise SelectorError("exact-match compatibility requires one single value")
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            raise SelectorError("values set must be empty for exists and does not exist")
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            raise SelectorError("for 'Gt', 'Lt' operators, exactly one value is required")
        if any(_parse_int64(value) is None for value in vals):
            raise SelectorError("for 'Gt', 'Lt' operators, the value must be an integer")
    else:
        raise SelectorError(f"operator '{operator}' is not recognized")
    for value in vals:
        _check_value(key, value)
    return Requirement(key=key, operator=operator, values=vals)


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements, sorted by key; ``nothing`` is labels.Nothing()."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels is selected (``None`` = no labels)."""
        if self.nothing:
            return False
        present: Mapping[str, str] = labels if labels is not None else {}
        return all(requirement.matches(present) for requirement in self.requirements)

    def empty(self) -> bool:
        """True for the match-everything selector (the nothing-selector is not empty)."""
        return not self.nothing and not self.requirements

    def exact_value(self, key: str) -> str | None:
        """labels.Selector.RequiresExactMatch: the single value ``key`` must equal, if any."""
        for requirement in self.requirements:
            if requirement.key == key:
                if requirement.operator in (EQUALS, DOUBLE_EQUALS, IN) and (
                    len(requirement.values) == 1
                ):
                    return requirement.values[0]
                return None
        return None

    def first_exact_label(self) -> tuple[str, str] | None:
        """A ``(key, value)`` every object the selector matches carries, if any: the first
        requirement with an exact value (:meth:`exact_value`), for indexing by label."""
        for requirement in self.requirements:
            value = self.exact_value(requirement.key)
            if value is not None:
                return (requirement.key, value)
        return None

    def __str__(self) -> str:
        return ",".join(str(requirement) for requirement in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def _sorted_selector(requirements: Iterable[Requirement]) -> LabelSelector:
    # sort.Sort(ByKey(...)); a stable sort keeps equal keys in their given order.
    return LabelSelector(requirements=tuple(sorted(requirements, key=lambda r: r.key)))


def label_selector_from_set(labels: Mapping[str, str]) -> LabelSelector:
    """labels.ValidatedSelectorFromSet: equality on every pair; ``{}`` selects everything."""
    return _sorted_selector(new_requirement(k, EQUALS, (v,)) for k, v in sorted(labels.items()))


_LABEL_SELECTOR_OPERATORS = {
    "In": IN,
    "NotIn": NOT_IN,
    "Exists": EXISTS,
    "DoesNotExist": DOES_NOT_EXIST,
}


def label_selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """metav1.LabelSelectorAsSelector on the JSON form of a ``metav1.LabelSelector``."""
    if selector is None:
        return NOTHING
    raw: object = selector
    if not isinstance(raw, Mapping):
        raise SelectorError(f"a label selector must be an object, not {type(raw).__name__}")
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels must be an object of string keys and values")
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions must be a list")
    if not match_labels and not expressions:
        return EVERYTHING
    requirements: list[Requirement] = []
    for key, value in sorted(match_labels.items()):
        if not isinstance(key, str) or not isinstance(value, str):
            raise SelectorError("matchLabels must be an object of string keys and values")
        requirements.append(new_requirement(key, EQUALS, (value,)))
    for expression in expressions:
        if not isinstance(expression, Mapping):
            raise SelectorError("each matchExpressions entry must be an object")
        key = expression.get("key", "")
        raw_operator = expression.get("operator", "")
        values = expression.get("values") or []
        if not isinstance(key, str):
            raise SelectorError("matchExpressions key must be a string")
        operator = (
            _LABEL_SELECTOR_OPERATORS.get(raw_operator) if isinstance(raw_operator, str) else None
        )
        if operator is None:
            raise SelectorError(
                f"{go_quote(str(raw_operator))} is not a valid label selector operator"
            )
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SelectorError("matchExpressions values must be a list of strings")
        requirements.append(new_requirement(key, operator, values))
    return _sorted_selector(requirements)


# The lexer of labels.Parse works on bytes; a NUL byte ends the input like the end of string.
_WHITESPACE = frozenset(" \t\r\n")
_SPECIAL = frozenset("=!(),><")
_SYMBOL_TOKENS = {"==", "!=", "=", "!", "(", ")", ",", ">", "<"}
_END = ""  # literal of the end-of-string token


@dataclass(frozen=True)
class _Token:
    kind: str  # "id", "in", "notin", a symbol from _SYMBOL_TOKENS, or "end"
    literal: str


def _lex(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    text = text.split("\x00", 1)[0]
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= end:
            tokens.append(_Token("end", _END))
            return tokens
        if text[pos] in _SPECIAL:
            # Longest special-symbol token: "==" and "!=" over their one-character prefixes.
            two = text[pos : pos + 2]
            symbol = two if two in _SYMBOL_TOKENS else text[pos]
            tokens.append(_Token(symbol, symbol))
            pos += len(symbol)
            continue
        start = pos
        while pos < end and text[pos] not in _WHITESPACE and text[pos] not in _SPECIAL:
            pos += 1
        word = text[start:pos]
        tokens.append(_Token(word if word in (IN, NOT_IN) else "id", word))


class _LabelParser:
    """The recursive-descent parser of labels.Parse, one method per upstream production."""

    def __init__(self, text: str) -> None:
        self._tokens = _lex(text)
        self._pos = 0

    def _peek(self, *, values: bool = True) -> _Token:
        token = self._tokens[self._pos]
        # In the Values context the keywords "in"/"notin" are plain identifiers.
        if values and token.kind in (IN, NOT_IN):
            return _Token("id", token.literal)
        return token

    def _next(self, *, values: bool = True) -> _Token:
        token = self._peek(values=values)
        self._pos = min(self._pos + 1, len(self._tokens) - 1)
        return token

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token = self._peek()
            if token.kind == "end":
                return requirements
            if token.kind not in ("id", "!"):
                raise SelectorError(
                    f"found '{token.literal}', expected: !, identifier, or 'end of string'"
                )
            try:
                requirements.append(self._requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            after = self._next()
            if after.kind == "end":
                return requirements
            if after.kind != ",":
                raise SelectorError(f"found '{after.literal}', expected: ',' or 'end of string'")
            following = self._peek()
            if following.kind not in ("id", "!"):
                raise SelectorError(f"found '{following.literal}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        token = self._next()
        negated = token.kind == "!"
        if negated:
            token = self._next()
        if token.kind != "id":
            raise SelectorError(f"found '{token.literal}', expected: identifier")
        key = token.literal
        _check_key(key)
        if negated:
            return new_requirement(key, DOES_NOT_EXIST)
        if self._peek().kind in ("end", ","):
            return new_requirement(key, EXISTS)
        operator = self._operator()
        values = self._set_values() if operator in (IN, NOT_IN) else self._exact_value()
        return new_requirement(key, operator, sorted(values))

    def _operator(self) -> str:
        token = self._next(values=False)
        operators = {
            IN: IN,
            NOT_IN: NOT_IN,
            "=": EQUALS,
            "==": DOUBLE_EQUALS,
            "!=": NOT_EQUALS,
            ">": GREATER_THAN,
            "<": LESS_THAN,
        }
        if token.kind not in operators:
            raise SelectorError(f"found '{token.literal}', expected: in, notin, =, ==, !=, gt, lt")
        return operators[token.kind]

    def _exact_value(self) -> set[str]:
        if self._peek().kind in ("end", ","):
            return {""}
        token = self._next()
        if token.kind == "id":
            return {token.literal}
        raise SelectorError(f"found '{token.literal}', expected: identifier")

    def _set_values(self) -> set[str]:
        token = self._next()
        if token.kind != "(":
            raise SelectorError(f"found '{token.literal}' expected: '('")
        first = self._peek()
        if first.kind == ")":
            self._next()
            return {""}
        if first.kind not in ("id", ","):
            raise SelectorError(f"found '{first.literal}', expected: ',', ')' or identifier")
        values = self._identifier_list()
        if self._next().kind != ")":
            raise SelectorError(f"found '{first.literal}', expected: ')'")
        return values

    def _identifier_list(self) -> set[str]:
        # parseIdentifiersList: empty entries ("(,a)", "(a,)", "(a,,b)") stand for "".
        values: set[str] = set()
        while True:
            token = self._next()
            if token.kind == "id":
                values.add(token.literal)
                following = self._peek()
                if following.kind == ",":
                    continue
                if following.kind == ")":
                    return values
                raise SelectorError(f"found '{following.literal}', expected: ',' or ')'")
            if token.kind == ",":
                if not values:
                    values.add("")
                following = self._peek()
                if following.kind == ")":
                    values.add("")
                    return values
                if following.kind == ",":
                    self._next()
                    values.add("")
                continue
            raise SelectorError(f"found '{token.literal}', expected: ',', or identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """labels.Parse; ``""`` selects everything. Raises :class:`SelectorError`."""
    return _sorted_selector(_LabelParser(text).parse())
