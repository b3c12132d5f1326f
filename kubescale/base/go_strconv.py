"""Go's ``strconv.Atoi``, for values upstream parses with it (node-group size annotations...).

``strconv.Atoi(s)`` on a 64-bit platform (``int`` is 64 bits) accepts exactly:

* an optional sign, ``+`` or ``-``, then one or more ASCII digits ``0``-``9`` — nothing else:
  no leading or trailing whitespace (not even a newline), no underscores (they are allowed
  only by ``ParseInt(s, 0, ...)``, base prefix mode; Atoi uses base 10), no ``0x`` prefix, no
  other Unicode digits;
* a value within ``int64``: ``-9223372036854775808`` … ``9223372036854775807``; anything
  outside is ``ErrRange`` (``value out of range``), an error like a syntax error.

Python's ``int()`` is far more lenient (``" 12"``, ``"1_000"``, ``"١٢"`` and any size are
accepted), so it is never used alone on such input.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["INT64_MAX", "INT64_MIN", "GoAtoiError", "go_atoi"]

INT64_MAX: Final = (1 << 63) - 1
INT64_MIN: Final = -(1 << 63)
_SYNTAX: Final = re.compile(r"[+-]?[0-9]+", re.ASCII)


class GoAtoiError(ValueError):
    """``strconv.Atoi`` would fail; ``reason`` is Go's: ``invalid syntax`` or ``value out of
    range``."""

    def __init__(self, text: str, reason: str) -> None:
        super().__init__(f"strconv.Atoi: parsing {text!r}: {reason}")
        self.text = text
        self.reason = reason


def go_atoi(text: str) -> int:
    """``strconv.Atoi(text)`` (module docstring); raises :class:`GoAtoiError`."""
    if _SYNTAX.fullmatch(text) is None:
        raise GoAtoiError(text, "invalid syntax")
    value = int(text, 10)
    if not INT64_MIN <= value <= INT64_MAX:
        raise GoAtoiError(text, "value out of range")
    return value
