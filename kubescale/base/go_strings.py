"""Go's printing of strings, for messages that must match upstream to the character.

``go_float`` is what ``%v`` prints for a float64 (messages of the webhook and the cluster
autoscaler's events). ``go_quote`` is ``strconv.Quote`` — what ``%q`` prints for a string and
what apimachinery's field errors, label-selector errors and PromQL label matchers show:
backslash escapes for ``\\a \\b \\f \\n \\r \\t \\v \\\\ \\"``, printable characters as they
are, other characters as ``\\xNN`` / ``\\uNNNN`` / ``\\UNNNNNNNN``; a lone
surrogate (invalid UTF-8 in Go) becomes U+FFFD's escape.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Final

__all__ = ["go_float", "go_quote"]

_ESCAPES: Final = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """``strconv.Quote(text)``."""
    out = ['"']
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        else:
            code = ord(char)
            if code < 0x80:
                out.append(f"\\x{code:02x}")
            elif 0xD800 <= code <= 0xDFFF:
                out.append("\\ufffd")
            elif code < 0x10000:
                out.append(f"\\u{code:04x}")
            else:
                out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_float(value: float) -> str:
    """``%v`` of a float64: ``%g`` with the shortest precision, so the exponent form is used
    when the decimal exponent is < -4 or >= 6 (``1e+06``, ``1e-05``), else plain digits
    without trailing zeros (``-1``, ``0.5``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    decimal = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = decimal.as_tuple()
    if not isinstance(exponent, int):  # pragma: no cover - finite values only reach here
        return repr(value)
    digits = "".join(str(d) for d in digit_tuple)
    point = len(digits) + exponent  # value = 0.<digits> x 10^point
    exp10 = point - 1
    if exp10 < -4 or exp10 >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"
