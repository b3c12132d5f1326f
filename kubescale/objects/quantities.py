"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource.Quantity``), exactly.

Requests, limits, VPA recommendations and metrics all travel as quantity strings (``100m``,
``1.5Gi``, ``12e6``). Autoscaling decisions compare and add them, and what kubescale writes back
must read on a real cluster as the same value, so this module follows upstream to the digit:

* parsing accepts every form ``ParseQuantity`` accepts: sign, ``1``, ``1.``, ``.5``, decimal SI
  suffixes ``n u m k M G T P E``, binary suffixes ``Ki Mi Gi Ti Pi Ei`` and decimal exponents
  ``e``/``E`` (``1e3``, ``1.3E+6``), and rejects the rest with :class:`QuantityError`;
* values are held exactly as an integer number of nano-units: upstream keeps precision down to
  ``1n`` and rounds a finer non-zero value away from zero (``0.9n`` -> ``1n``); a binary-SI value
  above 2^63-1 is capped there, as upstream's parser does;
* the quantity remembers its format (DecimalSI, BinarySI, DecimalExponent) and ``str()`` is the
  canonical form of ``Quantity.String()``/``CanonicalizeBytes``: the largest suffix that keeps
  the value integral (``1.5Gi`` -> ``1536Mi``, ``0.1`` -> ``100m``, ``1000`` -> ``1k``,
  ``1e100`` -> ``10e99``); binary values below 1024 or not whole fall back to DecimalSI;
* :meth:`Quantity.value` / :meth:`Quantity.milli_value` round away from zero like upstream's
  ``Value()``/``MilliValue()`` (ceil for the non-negative quantities resources use).

Deliberate differences: upstream's parser keeps the input text of some non-canonical inputs
(``"1.500"``, ``"+1"``) and echoes it back (kubernetes/kubernetes#138165); ``str()`` here is
always the canonical form. Values of 10^1000 or more, or with more than 1000 significant digits,
are rejected instead of being carried. Results are exact Python ints, never overflowing int64.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, get_args

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "Format",
    "Quantity",
    "QuantityError",
    "parse_quantity",
]

Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]
DECIMAL_SI: Format = "DecimalSI"
BINARY_SI: Format = "BinarySI"
DECIMAL_EXPONENT: Format = "DecimalExponent"
_FORMATS: frozenset[str] = frozenset(get_args(Format))


class QuantityError(ValueError):
    """Text that is not a quantity (or a quantity beyond what this module carries)."""


_NANO = 10**9
_MAX_INT64 = 2**63 - 1
_MAX_MAGNITUDE_DIGITS = 1000
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_INT64_TEXT = re.compile(r"[+-]?[0-9]+")
_FORMAT_WRONG = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

# suffix.go: decimal SI and binary SI suffixes and their exponents.
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES |= {"P": 15, "E": 18}
_DECIMAL_SUFFIX_BY_EXPONENT = {exponent: suffix for suffix, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]  # index = power of 1024
_BINARY_POWERS = {suffix: 10 * index for index, suffix in enumerate(_BINARY_SUFFIXES) if suffix}


def _error(text: str, reason: str) -> QuantityError:
    return QuantityError(f"invalid quantity {text!r}: {reason}")


def _scan(text: str) -> tuple[bool, str, str, str]:
    """parseQuantityString: (positive, numerator digits, fraction digits, suffix).

    A number part without any digit ("", ".", "-") scans as zero, as upstream's does.
    """
    end = len(text)
    pos = 0
    positive = True
    if text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    numerator = text[start:pos] or "0"
    fraction = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        fraction = text[start:pos]  # upstream allows "1." and "1.G"
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise _error(text, _FORMAT_WRONG)
    return positive, numerator, fraction, text[suffix_start:]


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, Format]:
    """suffixHandler.interpret: (base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_POWERS:
        return 2, _BINARY_POWERS[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _INT64_TEXT.fullmatch(suffix[1:]):
        exponent = int(suffix[1:])
        if -(2**63) <= exponent <= _MAX_INT64:
            return 10, exponent, DECIMAL_EXPONENT
    raise _error(text, "unable to parse quantity's suffix")


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _away_from_zero_div(numerator: int, denominator: int) -> int:
    magnitude = _ceil_div(abs(numerator), denominator)
    return magnitude if numerator >= 0 else -magnitude


def parse_quantity(text: str) -> Quantity:
    """resource.ParseQuantity. Raises :class:`QuantityError` for anything upstream rejects."""
    raw: object = text
    if not isinstance(raw, str) or not raw:
        raise _error(str(raw), _FORMAT_WRONG)
    if text == "0":
        return Quantity(nanos=0, format=DECIMAL_SI)
    positive, numerator, fraction, suffix = _scan(text)
    base, exponent, fmt = _interpret_suffix(text, suffix)
    if (
        base == 10
        and exponent - len(fraction) < -9
        and not _DIGITS.intersection(text[: len(text) - len(suffix)])
    ):
        # Only upstream's slow path (scale below nano) parses the digits with inf.Dec, which
        # needs at least one: "e-10" fails there while "e5" or "k" read as zero.
        raise _error(text, "unable to parse numeric part of quantity")
    if len(numerator) + len(fraction) > _MAX_MAGNITUDE_DIGITS:
        raise _error(text, f"more than {_MAX_MAGNITUDE_DIGITS} significant digits")
    digits = int(numerator + fraction)
    if base == 10:
        shift = exponent - len(fraction) + 9  # power of ten turning digits into nano-units
        if len(numerator) + exponent > _MAX_MAGNITUDE_DIGITS:
            raise _error(text, f"magnitude of 10^{_MAX_MAGNITUDE_DIGITS} or more")
        if shift >= 0:
            nanos = digits * 10**shift
        elif -shift > len(str(digits)):
            nanos = 1 if digits else 0  # below 1n: a non-zero value rounds up to 1n
        else:
            # Finer than 1n: round the magnitude up (inf.RoundUp on the absolute value).
            nanos = _ceil_div(digits, 10**-shift)
    else:
        nanos = _ceil_div(digits * 2**exponent * _NANO, 10 ** len(fraction))
        # The binary-SI cap: parsing never yields more than 2^63-1 (MaxInt64) in magnitude.
        nanos = min(nanos, _MAX_INT64 * _NANO)
        if 0 < nanos < _NANO:
            fmt = DECIMAL_SI  # a fraction of one cannot be written in binary SI
    return Quantity(nanos=nanos if positive else -nanos, format=fmt)


@dataclass(frozen=True, eq=False, slots=True)
class Quantity:
    """An exact quantity: an integer count of nano-units plus the format it prints in.

    Equality, hashing and ordering compare values only (upstream ``Cmp``): ``1Ki == 1024``.
    """

    nanos: int
    """The value times 10^9 (every quantity is a whole number of nano-units)."""
    format: Format = DECIMAL_SI

    def __post_init__(self) -> None:
        if self.format not in _FORMATS:
            raise QuantityError(f"unknown quantity format {self.format!r}")

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Quantity:
        """Same as :func:`parse_quantity`."""
        return parse_quantity(text)

    @classmethod
    def from_json(cls, value: object) -> Quantity:
        """A quantity as found in a JSON object: a string, or a bare JSON number.

        Like upstream's ``UnmarshalJSON``, surrounding whitespace in the string is ignored.
        """
        if isinstance(value, str):
            return parse_quantity(value.strip())
        if isinstance(value, int) and not isinstance(value, bool):
            return parse_quantity(str(value))
        if isinstance(value, float):
            return parse_quantity(repr(value))
        raise QuantityError(f"invalid quantity {value!r}: not a string or number")

    @classmethod
    def from_int(cls, value: int, format: Format = DECIMAL_SI) -> Quantity:
        """resource.NewQuantity: ``value`` whole units."""
        return cls(nanos=value * _NANO, format=format)

    @classmethod
    def from_milli(cls, value: int, format: Format = DECIMAL_SI) -> Quantity:
        """resource.NewMilliQuantity: ``value`` thousandths (``from_milli(250)`` is ``250m``)."""
        return cls(nanos=value * (_NANO // 1000), format=format)

    @classmethod
    def from_nanos(cls, value: int, format: Format = DECIMAL_SI) -> Quantity:
        """``value`` nano-units (``from_nanos(5)`` is ``5n``)."""
        return cls(nanos=value, format=format)

    def with_format(self, format: Format) -> Quantity:
        """The same value printed in another format."""
        return Quantity(nanos=self.nanos, format=format)

    # -- reading ------------------------------------------------------------------------------

    def value(self) -> int:
        """Quantity.Value: whole units, rounded away from zero (``1500m`` -> 2)."""
        return _away_from_zero_div(self.nanos, _NANO)

    def milli_value(self) -> int:
        """Quantity.MilliValue: thousandths, rounded away from zero (``0.1m`` -> 1)."""
        return _away_from_zero_div(self.nanos, _NANO // 1000)

    def scaled_value(self, scale: int) -> int:
        """Quantity.ScaledValue: the value in units of 10^scale, rounded away from zero."""
        power = scale + 9
        if power <= 0:
            return self.nanos * int(10 ** (-power))
        return _away_from_zero_div(self.nanos, 10**power)

    def as_fraction(self) -> Fraction:
        """The exact value."""
        return Fraction(self.nanos, _NANO)

    def as_float(self) -> float:
        """Quantity.AsApproximateFloat64: the value as a float (for ratios, not for storage)."""
        return self.nanos / _NANO

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def is_zero(self) -> bool:
        return self.nanos == 0

    # -- arithmetic (upstream Add/Sub/Neg: a zero receiver takes the other's format) ----------

    def add(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(nanos=self.nanos + other.nanos, format=fmt)

    def sub(self, other: Quantity) -> Quantity:
        fmt = other.format if self.nanos == 0 else self.format
        return Quantity(nanos=self.nanos - other.nanos, format=fmt)

    def neg(self) -> Quantity:
        return Quantity(nanos=-self.nanos, format=self.format)

    def cmp(self, other: Quantity) -> int:
        """Quantity.Cmp: -1, 0 or 1."""
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def __add__(self, other: object) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.add(other)

    def __sub__(self, other: object) -> Quantity:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.sub(other)

    def __neg__(self) -> Quantity:
        return self.neg()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos == other.nanos

    def __hash__(self) -> int:
        return hash(self.nanos)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos < other.nanos

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos <= other.nanos

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos > other.nanos

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.nanos >= other.nanos

    # -- formatting ---------------------------------------------------------------------------

    def __str__(self) -> str:
        return _canonical(self.nanos, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self.format})"

    def to_json(self) -> str:
        """The JSON form: the canonical string."""
        return str(self)


def _canonical(nanos: int, fmt: Format) -> str:
    """Quantity.CanonicalizeBytes."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt == BINARY_SI and (magnitude < 1024 * _NANO or magnitude % _NANO):
        fmt = DECIMAL_SI  # small or fractional binary values print as decimal SI
    if fmt == BINARY_SI:
        mantissa, power = magnitude // _NANO, 0
        while mantissa % 1024 == 0:
            mantissa //= 1024
            power += 1
        if power >= len(_BINARY_SUFFIXES):
            # Upstream has no suffix past Ei and would drop the exponent; keep the value.
            mantissa *= 1024 ** (power - len(_BINARY_SUFFIXES) + 1)
            power = len(_BINARY_SUFFIXES) - 1
        return f"{sign}{mantissa}{_BINARY_SUFFIXES[power]}"
    digits = str(magnitude)
    stripped = digits.rstrip("0")
    exponent = len(digits) - len(stripped) - 9
    # The exponent moves down to a multiple of three (so 1.1e5 prints as 110e3 / 110k).
    spare = exponent % 3
    number = sign + stripped + "0" * spare
    exponent -= spare
    if fmt == DECIMAL_SI and exponent in _DECIMAL_SUFFIX_BY_EXPONENT:
        return number + _DECIMAL_SUFFIX_BY_EXPONENT[exponent]
    # DecimalExponent, and DecimalSI beyond "E" (upstream falls back to exponent notation).
    return number + (f"e{exponent}" if exponent else "")
