"""Go's float64 and time arithmetic, as upstream VPA's binary computes it on amd64.

The recommender's outputs are truncated integers computed from logarithms, powers and
exponentials; a result one ulp away from Go's can move a bucket boundary or a truncation, so
this module reproduces Go's own algorithms instead of calling the C library:

* ``math.Log`` — on amd64 the assembly ``archLog`` (``log_amd64.s``), which performs exactly the
  operations of the portable ``log`` (FreeBSD ``e_log.c``) in the same order, no FMA;
* ``math.Exp2`` — portable ``exp2`` + ``expmulti`` (amd64 has no assembly Exp2);
* ``math.Exp`` — portable ``exp`` (used only by ``Pow`` with a fractional exponent; amd64's
  assembly Exp may differ in the last ulp there — the model never takes that path);
* ``math.Pow`` — portable ``pow``: frexp mantissa squaring for the integer part. Go 1.26
  added a fast path for exponents that fit an int8 (``float64(int8(y)) == y``) that multiplies
  in another order; :data:`POW_INT8_FAST_PATH` selects it;
* Go conversions: ``int64(f)`` truncates toward zero, NaN and out-of-range give the amd64
  "integer indefinite" ``-2**63``; ``math.Floor``/``Ldexp`` are exact;
* ``time.Time.Round(d)``: to the nearest multiple of ``d`` since Go's zero time
  (0001-01-01 UTC), halfway rounding up. Times are integer microseconds since that zero time
  (:func:`go_micros`), so Go's zero ``time.Time{}`` is ``0``.

The ``*_array`` functions apply the same operation sequence element-wise with numpy (no
fusion, IEEE round-to-nearest per operation), so they agree with the scalar ones bit for bit.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "GO_ZERO_TIME",
    "MAX_DURATION_NS",
    "MIN_DURATION_NS",
    "POW_INT8_FAST_PATH",
    "from_go_micros",
    "go_exp",
    "go_exp2",
    "go_exp2_array",
    "go_float_to_int64",
    "go_log",
    "go_log_array",
    "go_micros",
    "go_pow",
    "go_pow_int_array",
    "go_round_half_up",
    "round_time",
    "saturating_sub_ns",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
"""``time.Time{}``: January 1, year 1, 00:00:00 UTC."""
MAX_DURATION_NS = 2**63 - 1
MIN_DURATION_NS = -(2**63)
_INT64_INDEFINITE = -(2**63)
_MICRO = timedelta(microseconds=1)

POW_INT8_FAST_PATH = False
"""Whether ``go_pow`` follows Go 1.26's int8 fast path (see module docstring)."""

# log.go / log_amd64.s constants (FreeBSD e_log.c).
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_L1 = 6.666666666666735130e-01
_L2 = 3.999999999940941908e-01
_L3 = 2.857142874366239149e-01
_L4 = 2.222219843214978396e-01
_L5 = 1.818357216161805012e-01
_L6 = 1.531383769920937332e-01
_L7 = 1.479819860511658591e-01
_SQRT2_HALF = math.sqrt(2) / 2
# exp.go constants (FreeBSD e_exp.c).
_P1 = 1.66666666666666657415e-01
_P2 = -2.77777777770155933842e-03
_P3 = 6.61375632143793436117e-05
_P4 = -1.65339022054652515390e-06
_P5 = 4.13813679705723846039e-08
_LOG2E = 1.44269504088896338700e00
_EXP_OVERFLOW = 7.09782712893383973096e02
_EXP_UNDERFLOW = -7.45133219101941108420e02
_EXP_NEAR_ZERO = 1.0 / (1 << 28)
_EXP2_OVERFLOW = 1.0239999999999999e03
_EXP2_UNDERFLOW = -1.0740e03


# -- conversions --------------------------------------------------------------------------------


def go_float_to_int64(value: float) -> int:
    """``int64(value)`` on amd64: truncation; NaN/out of range -> ``-2**63``."""
    if math.isnan(value) or not -(2.0**63) <= value < 2.0**63:
        return _INT64_INDEFINITE
    return int(value)


def go_round_half_up(value: float) -> int:
    """Upstream's ``round(x) = int(math.Floor(x + 0.5))``."""
    return (
        go_float_to_int64(math.floor(value + 0.5)) if math.isfinite(value) else (_INT64_INDEFINITE)
    )


def _ldexp(fraction: float, exponent: int) -> float:
    """``math.Ldexp``: overflow gives ±Inf instead of raising."""
    try:
        return math.ldexp(fraction, exponent)
    except OverflowError:
        return math.copysign(math.inf, fraction)


# -- time -----------------------------------------------------------------------------------


def go_micros(moment: datetime) -> int:
    """Microseconds since Go's zero time; naive datetimes are taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - GO_ZERO_TIME) // _MICRO


def from_go_micros(micros: int) -> datetime:
    return GO_ZERO_TIME + timedelta(microseconds=micros)


def saturating_sub_ns(later_us: int, earlier_us: int) -> int:
    """``later.Sub(earlier)`` in nanoseconds, saturated to the int64 Duration range."""
    return max(MIN_DURATION_NS, min(MAX_DURATION_NS, (later_us - earlier_us) * 1000))


def round_time(moment_us: int, step_ns: int) -> int:
    """``time.Time.Round(step)``: nearest multiple of ``step`` since zero time, ties up."""
    if step_ns <= 0:
        return moment_us
    remainder_ns = (moment_us * 1000) % step_ns
    if remainder_ns + remainder_ns < step_ns:
        rounded_ns = moment_us * 1000 - remainder_ns
    else:
        rounded_ns = moment_us * 1000 + (step_ns - remainder_ns)
    # Durations that are whole microseconds keep the result on the microsecond grid.
    return rounded_ns // 1000


# -- log ------------------------------------------------------------------------------------


def go_log(x: float) -> float:
    """``math.Log`` (amd64)."""
    if math.isnan(x) or x == math.inf:
        return x
    if x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    f1, ki = math.frexp(x)
    if f1 < _SQRT2_HALF:
        f1 *= 2
        ki -= 1
    f = f1 - 1
    k = float(ki)
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (_L1 + s4 * (_L3 + s4 * (_L5 + s4 * _L7)))
    t2 = s4 * (_L2 + s4 * (_L4 + s4 * _L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    return k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)


def go_log_array(x: FloatArray) -> FloatArray:
    """:func:`go_log` element-wise, for positive finite inputs."""
    f1, ki = np.frexp(x)
    small = f1 < _SQRT2_HALF
    f1 = np.where(small, f1 * 2, f1)
    k = (ki - small.astype(ki.dtype)).astype(np.float64)
    f = f1 - 1
    s = f / (2 + f)
    s2 = s * s
    s4 = s2 * s2
    t1 = s2 * (_L1 + s4 * (_L3 + s4 * (_L5 + s4 * _L7)))
    t2 = s4 * (_L2 + s4 * (_L4 + s4 * _L6))
    r = t1 + t2
    hfsq = 0.5 * f * f
    result: FloatArray = k * _LN2_HI - ((hfsq - (s * (hfsq + r) + k * _LN2_LO)) - f)
    return result


# -- exp / exp2 -----------------------------------------------------------------------------


def _expmulti(hi: float, lo: float, k: int) -> float:
    r = hi - lo
    t = r * r
    c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    y = 1 - ((lo - (r * c) / (2 - c)) - hi)
    return _ldexp(y, k)


def go_exp(x: float) -> float:
    """Portable ``math.exp``."""
    if math.isnan(x) or x == math.inf:
        return x
    if x == -math.inf:
        return 0.0
    if x > _EXP_OVERFLOW:
        return math.inf
    if x < _EXP_UNDERFLOW:
        return 0.0
    if -_EXP_NEAR_ZERO < x < _EXP_NEAR_ZERO:
        return 1 + x
    k = 0
    if x < 0:
        k = int(_LOG2E * x - 0.5)
    elif x > 0:
        k = int(_LOG2E * x + 0.5)
    hi = x - float(k) * _LN2_HI
    lo = float(k) * _LN2_LO
    return _expmulti(hi, lo, k)


def go_exp2(x: float) -> float:
    """``math.Exp2`` (portable on amd64)."""
    if math.isnan(x) or x == math.inf:
        return x
    if x == -math.inf:
        return 0.0
    if x > _EXP2_OVERFLOW:
        return math.inf
    if x < _EXP2_UNDERFLOW:
        return 0.0
    k = 0
    if x > 0:
        k = int(x + 0.5)
    elif x < 0:
        k = int(x - 0.5)
    t = x - float(k)
    hi = t * _LN2_HI
    lo = -t * _LN2_LO
    return _expmulti(hi, lo, k)


def go_exp2_array(x: FloatArray) -> FloatArray:
    """:func:`go_exp2` element-wise for finite ``|x| < 1000`` (decay exponents stay below 101)."""
    k = np.where(x > 0, np.trunc(x + 0.5), np.where(x < 0, np.trunc(x - 0.5), 0.0))
    t = x - k
    hi = t * _LN2_HI
    lo = -t * _LN2_LO
    r = hi - lo
    tt = r * r
    c = r - tt * (_P1 + tt * (_P2 + tt * (_P3 + tt * (_P4 + tt * _P5))))
    y = 1 - ((lo - (r * c) / (2 - c)) - hi)
    result: FloatArray = np.ldexp(y, k.astype(np.int64))
    return result


# -- pow ------------------------------------------------------------------------------------


def _is_odd_int(x: float) -> bool:
    fraction, whole = math.modf(x)
    return fraction == 0 and go_float_to_int64(whole) & 1 == 1


def _pow_int8(x: float, y: float) -> float:
    negative = y < 0
    n = int(-y if negative else y)
    result = 1.0
    while n > 1:
        tmp = x
        c = 1
        while c <= n // 2:
            tmp *= tmp
            c *= 2
        n -= c
        result *= tmp
    for _ in range(n):
        result *= x
    return 1 / result if negative else result


def go_pow(x: float, y: float) -> float:
    """``math.Pow`` (portable; amd64 has no assembly Pow)."""
    if y == 0 or x == 1:
        return 1.0
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == 0:
        if y < 0:
            return math.copysign(math.inf, x) if _is_odd_int(y) else math.inf
        return x if _is_odd_int(y) else 0.0
    if math.isinf(y):
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    if math.isinf(x):
        if x < 0:
            return go_pow(1 / x, -y)
        return 0.0 if y < 0 else math.inf
    if y == 0.5:
        return math.sqrt(x) if x >= 0 else math.nan
    if y == -0.5:
        return 1 / math.sqrt(x) if x >= 0 else math.nan
    if POW_INT8_FAST_PATH and -128 <= y <= 127 and float(int(y)) == y:
        return _pow_int8(x, y)
    yf, yi = math.modf(abs(y))
    if yf != 0 and x < 0:
        return math.nan
    if yi >= 2.0**63:
        if x == -1:
            return 1.0
        return 0.0 if (abs(x) < 1) == (y > 0) else math.inf
    a1 = 1.0
    ae = 0
    if yf != 0:
        if yf > 0.5:
            yf -= 1
            yi += 1
        a1 = go_exp(yf * go_log(x))
    x1, xe = math.frexp(x)
    i = int(yi)
    while i != 0:
        if xe < -(1 << 12) or xe > (1 << 12):
            ae += xe
            break
        if i & 1 == 1:
            a1 *= x1
            ae += xe
        x1 *= x1
        xe <<= 1
        if x1 < 0.5:
            x1 += x1
            xe -= 1
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    return _ldexp(a1, ae)


def go_pow_int_array(x: FloatArray, y: int) -> FloatArray:
    """:func:`go_pow` element-wise for an integer exponent ``0 < |y| < 128`` and finite
    ``x > 0`` not equal to 1 (callers handle Inf/NaN/1 with :func:`go_pow`)."""
    if y == 1:
        return x.copy()
    if POW_INT8_FAST_PATH:
        n = abs(y)
        result = np.ones_like(x)
        while n > 1:
            tmp = x.copy()
            c = 1
            while c <= n // 2:
                tmp = tmp * tmp
                c *= 2
            n -= c
            result = result * tmp
        for _ in range(n):
            result = result * x
        out: FloatArray = 1 / result if y < 0 else result
        return out
    a1 = np.ones_like(x)
    ae = np.zeros(x.shape, dtype=np.int64)
    x1, xe_raw = np.frexp(x)
    xe = xe_raw.astype(np.int64)
    i = abs(y)
    while i != 0:
        if i & 1 == 1:
            a1 = a1 * x1
            ae = ae + xe
        x1 = x1 * x1
        xe = xe << 1
        small = x1 < 0.5
        x1 = np.where(small, x1 + x1, x1)
        xe = xe - small.astype(np.int64)
        i >>= 1
    if y < 0:
        a1 = 1 / a1
        ae = -ae
    result2: FloatArray = np.ldexp(a1, ae)
    return result2


def as_float_array(values: Any) -> FloatArray:
    """A float64 numpy array view/copy of ``values``."""
    return np.asarray(values, dtype=np.float64)
