"""Go's printing of strings, for messages that must match upstream to the character.

``go_quote`` is ``strconv.Quote`` — what ``%q`` prints for a string and what apimachinery's
field errors, label-selector errors and PromQL label matchers show: backslash escapes for
``\\a \\b \\f \\n \\r \\t \\v \\\\ \\"``, printable characters as they are, other characters as
``\\xNN`` / ``\\uNNNN`` / ``\\UNNNNNNNN``; a lone surrogate (invalid UTF-8 in Go) becomes
U+FFFD's escape.
"""

from __future__ import annotations

from typing import Final

__all__ = ["go_quote"]

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
