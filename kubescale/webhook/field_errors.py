"""apimachinery's ``field.Error`` texts and ``apierrors.NewInvalid`` statuses, to the character.

A rejected VPA reaches ``kubectl`` as the admission response's ``metav1.Status``; users (and
tests written against upstream) read its message, so it is rendered as apimachinery renders it:

* a field path is ``spec.resourcePolicy.containerPolicies[0].maxAllowed[cpu]``
  (``field.Path``: children joined by ``.``, indices and map keys in brackets);
* an error reads ``<field>: <Type>[: <bad value>][: <detail>]`` (``Error()`` /
  ``ErrorBody()``), where Required, Forbidden, TooLong and Internal errors never show the value,
  and the value is printed by its Go type as current apimachinery does: integers and floats
  with ``%v``, a ``string`` quoted with ``%q`` (:func:`go_quote`), anything else as its JSON
  encoding -- for the VPA's named string types (``UpdateMode``, ``ContainerScalingMode``,
  ``StartupBoostType``, ``corev1.ResourceName``) a JSON string (:func:`go_json_string`);
* ``NotSupported`` lists the supported values quoted and joined by ``", "``; ``TooMany`` says
  ``must have at most N item(s)``;
* ``NewInvalid`` builds ``Status{status: Failure, code: 422, reason: Invalid, details:
  {name, group, kind, causes}}`` with one cause per error (``reason`` = the error type,
  ``message`` = the body, ``field`` = the path) and the message ``<Kind>.<group> "<name>" is
  invalid: <aggregate>``, where the aggregate drops repeated messages and brackets a list of
  more than one (``utilerrors.NewAggregate``).

Pure values and functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubescale.base.go_strings import go_float, go_quote
from kubescale.objects.admission_review import Status, StatusCause, StatusDetails

__all__ = [
    "FieldError",
    "forbidden",
    "go_float",
    "go_json_string",
    "go_quote",
    "internal_error",
    "invalid",
    "invalid_status",
    "not_supported",
    "required",
    "too_many",
]

# field.ErrorType values (CauseType strings) and their canonical texts.
REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_MANY = "FieldValueTooMany"
INTERNAL = "InternalError"
_TYPE_TEXT = {
    REQUIRED: "Required value",
    INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    FORBIDDEN: "Forbidden",
    TOO_MANY: "Too many",
    INTERNAL: "Internal error",
}
_VALUE_HIDDEN = frozenset({REQUIRED, FORBIDDEN, INTERNAL})


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``; ``value`` is the bad value already printed as Go prints it."""

    type: str
    field: str
    value: str
    detail: str

    def body(self) -> str:
        """``ErrorBody()``."""
        text = _TYPE_TEXT[self.type]
        if self.type not in _VALUE_HIDDEN:
            text = f"{text}: {self.value}"
        if self.detail:
            text = f"{text}: {self.detail}"
        return text

    def message(self) -> str:
        """``Error()``."""
        return f"{self.field}: {self.body()}"


# ---------------------------------------------------------------------------------------------
# Go's printing of bad values.


_JSON_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json_string(text: str) -> str:
    """``json.Marshal`` of a Go string (HTML-safe): what a named string type prints as.

    Quotes, backslashes and ``\\b \\f \\n \\r \\t`` are backslash-escaped, other control
    characters and ``< > &`` U+2028 U+2029 become ``\\u00XX``-style escapes, a lone surrogate
    (invalid UTF-8 in Go) becomes ``\\ufffd``; everything else, non-ASCII text and DEL included,
    is written as it is.
    """
    out = ['"']
    for char in text:
        escaped = _JSON_ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        elif 0xD800 <= ord(char) <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Constructors (field.Required, field.Invalid, ...).


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, path, '""', detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, path, '""', detail)


def invalid(path: str, value: str, detail: str) -> FieldError:
    """``value`` printed already: ``go_quote(s)`` for strings, ``str(n)`` for integers."""
    return FieldError(INVALID, path, value, detail)


def not_supported(path: str, value: str, supported: list[str] | tuple[str, ...]) -> FieldError:
    detail = ""
    if supported:
        detail = "supported values: " + ", ".join(go_quote(v) for v in supported)
    return FieldError(NOT_SUPPORTED, path, value, detail)


def too_many(path: str, actual: int, maximum: int) -> FieldError:
    noun = "item" if maximum == 1 else "items"
    return FieldError(TOO_MANY, path, str(actual), f"must have at most {maximum} {noun}")


def internal_error(path: str, message: str) -> FieldError:
    return FieldError(INTERNAL, path, "null", message)


# ---------------------------------------------------------------------------------------------
# apierrors.NewInvalid.


def _aggregate(errors: list[FieldError]) -> str:
    # ErrorList.ToAggregate + aggregate.Error: repeated messages once, a list in brackets.
    seen: list[str] = []
    for error in errors:
        text = error.message()
        if text not in seen:
            seen.append(text)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


def invalid_status(*, group: str, kind: str, name: str, errors: list[FieldError]) -> Status:
    """The ``metav1.Status`` of ``apierrors.NewInvalid(GroupKind{group, kind}, name, errors)``."""
    qualified = f"{kind}.{group}" if group else kind
    message = f"{qualified} {go_quote(name)} is invalid"
    if errors:
        message = f"{message}: {_aggregate(errors)}"
    details: StatusDetails = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    causes: list[StatusCause] = []
    for error in errors:
        cause: StatusCause = {"reason": error.type, "message": error.body()}
        if error.field:
            cause["field"] = error.field
        causes.append(cause)
    if causes:
        details["causes"] = causes
    return {
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": "Invalid",
        "details": details,
        "code": 422,
    }
