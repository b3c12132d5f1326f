"""Quantities parse, compare and print exactly as k8s.io/apimachinery's resource.Quantity.

The tables are upstream's (quantity_test.go: TestQuantityParse, TestQuantityString,
TestQuantityParseEmit, TestMilliNewSet, TestNewSet, TestScaledValue, TestAdd/TestSub; the
serialization golden table of quantity_golden_test.go). ``dec(i, e)`` is upstream's
``decQuantity(i, e, ...)``: the value ``i * 10**e``. Hypothesis checks that printing and parsing
round-trip and that parsing agrees with an independent exact evaluation of the grammar.
"""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.objects.quantities import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Format,
    Quantity,
    QuantityError,
    parse_quantity,
)

MAX_INT64 = 2**63 - 1


def dec(value: int, exponent: int) -> Fraction:
    return Fraction(value) * Fraction(10) ** exponent


# TestQuantityParse: input -> (exact value, format).
PARSE_TABLE: list[tuple[str, Fraction, Format]] = [
    ("0", dec(0, 0), DECIMAL_SI),
    ("0n", dec(0, 0), DECIMAL_SI),
    ("0u", dec(0, 0), DECIMAL_SI),
    ("0m", dec(0, 0), DECIMAL_SI),
    ("0Ki", dec(0, 0), BINARY_SI),
    ("0k", dec(0, 0), DECIMAL_SI),
    ("0Mi", dec(0, 0), BINARY_SI),
    ("0M", dec(0, 0), DECIMAL_SI),
    ("0Gi", dec(0, 0), BINARY_SI),
    ("0G", dec(0, 0), DECIMAL_SI),
    ("0Ti", dec(0, 0), BINARY_SI),
    ("0T", dec(0, 0), DECIMAL_SI),
    # Quantity-less numbers are allowed
    ("1", dec(1, 0), DECIMAL_SI),
    # Binary suffixes
    ("1Ki", dec(1024, 0), BINARY_SI),
    ("8Ki", dec(8 * 1024, 0), BINARY_SI),
    ("7Mi", dec(7 * 1024**2, 0), BINARY_SI),
    ("6Gi", dec(6 * 1024**3, 0), BINARY_SI),
    ("5Ti", dec(5 * 1024**4, 0), BINARY_SI),
    ("4Pi", dec(4 * 1024**5, 0), BINARY_SI),
    ("3Ei", dec(3 * 1024**6, 0), BINARY_SI),
    ("10Ti", dec(10 * 1024**4, 0), BINARY_SI),
    ("100Ti", dec(100 * 1024**4, 0), BINARY_SI),
    # Decimal suffixes
    ("5n", dec(5, -9), DECIMAL_SI),
    ("4u", dec(4, -6), DECIMAL_SI),
    ("3m", dec(3, -3), DECIMAL_SI),
    ("9", dec(9, 0), DECIMAL_SI),
    ("8k", dec(8, 3), DECIMAL_SI),
    ("50k", dec(5, 4), DECIMAL_SI),
    ("7M", dec(7, 6), DECIMAL_SI),
    ("6G", dec(6, 9), DECIMAL_SI),
    ("5T", dec(5, 12), DECIMAL_SI),
    ("40T", dec(4, 13), DECIMAL_SI),
    ("300T", dec(3, 14), DECIMAL_SI),
    ("2P", dec(2, 15), DECIMAL_SI),
    ("1E", dec(1, 18), DECIMAL_SI),
    # Decimal exponents
    ("1E-3", dec(1, -3), DECIMAL_EXPONENT),
    ("1e3", dec(1, 3), DECIMAL_EXPONENT),
    ("1E6", dec(1, 6), DECIMAL_EXPONENT),
    ("1e9", dec(1, 9), DECIMAL_EXPONENT),
    ("1E12", dec(1, 12), DECIMAL_EXPONENT),
    ("1e15", dec(1, 15), DECIMAL_EXPONENT),
    ("1E18", dec(1, 18), DECIMAL_EXPONENT),
    # Nonstandard but still parsable
    ("1e14", dec(1, 14), DECIMAL_EXPONENT),
    ("1e13", dec(1, 13), DECIMAL_EXPONENT),
    ("100.035k", dec(100035, 0), DECIMAL_SI),
    # Things that look like floating point
    ("0.001", dec(1, -3), DECIMAL_SI),
    ("0.0005k", dec(5, -1), DECIMAL_SI),
    ("0.005", dec(5, -3), DECIMAL_SI),
    ("0.05", dec(5, -2), DECIMAL_SI),
    ("0.5", dec(5, -1), DECIMAL_SI),
    ("0.00050k", dec(5, -1), DECIMAL_SI),
    ("0.00500", dec(5, -3), DECIMAL_SI),
    ("0.05000", dec(5, -2), DECIMAL_SI),
    ("0.50000", dec(5, -1), DECIMAL_SI),
    ("0.5e0", dec(5, -1), DECIMAL_EXPONENT),
    ("0.5e-1", dec(5, -2), DECIMAL_EXPONENT),
    ("0.5e-2", dec(5, -3), DECIMAL_EXPONENT),
    ("10.035M", dec(10035, 3), DECIMAL_SI),
    ("1.2e3", dec(12, 2), DECIMAL_EXPONENT),
    ("1.3E+6", dec(13, 5), DECIMAL_EXPONENT),
    ("1.40e9", dec(14, 8), DECIMAL_EXPONENT),
    ("1.53E12", dec(153, 10), DECIMAL_EXPONENT),
    ("1.6e15", dec(16, 14), DECIMAL_EXPONENT),
    ("1.7E18", dec(17, 17), DECIMAL_EXPONENT),
    ("9.01", dec(901, -2), DECIMAL_SI),
    ("8.1k", dec(81, 2), DECIMAL_SI),
    ("7.123456M", dec(7123456, 0), DECIMAL_SI),
    ("6.987654321G", dec(6987654321, 0), DECIMAL_SI),
    ("5.444T", dec(5444, 9), DECIMAL_SI),
    ("40.1T", dec(401, 11), DECIMAL_SI),
    ("300.2T", dec(3002, 11), DECIMAL_SI),
    ("2.5P", dec(25, 14), DECIMAL_SI),
    ("1.01E", dec(101, 16), DECIMAL_SI),
    # Things that saturate/round
    ("3.001n", dec(4, -9), DECIMAL_SI),
    ("1.1E-9", dec(2, -9), DECIMAL_EXPONENT),
    ("0.0000000001", dec(1, -9), DECIMAL_SI),
    ("0.0000000005", dec(1, -9), DECIMAL_SI),
    ("0.00000000050", dec(1, -9), DECIMAL_SI),
    ("0.5e-9", dec(1, -9), DECIMAL_EXPONENT),
    ("0.9n", dec(1, -9), DECIMAL_SI),
    ("0.00000012345", dec(124, -9), DECIMAL_SI),
    ("0.00000012354", dec(124, -9), DECIMAL_SI),
    ("9Ei", Fraction(MAX_INT64), BINARY_SI),
    ("9223372036854775807Ki", Fraction(MAX_INT64), BINARY_SI),
    ("12E", dec(12, 18), DECIMAL_SI),
    # We'll accept fractional binary stuff, too.
    ("100.035Ki", dec(10243584, -2), BINARY_SI),
    ("0.5Mi", dec(512 * 1024, 0), BINARY_SI),
    ("0.05Gi", dec(536870912, -1), BINARY_SI),
    ("0.025Ti", dec(274877906944, -1), BINARY_SI),
    # Things written by trolls
    ("0.000000000001Ki", dec(2, -9), DECIMAL_SI),  # rounds up, changes format
    (".001", dec(1, -3), DECIMAL_SI),
    (".0001k", dec(100, -3), DECIMAL_SI),
    ("1.", dec(1, 0), DECIMAL_SI),
    ("1.G", dec(1, 9), DECIMAL_SI),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_TABLE)
def test_parse(text: str, value: Fraction, fmt: Format) -> None:
    quantity = parse_quantity(text)
    assert quantity.as_fraction() == value
    assert quantity.format == fmt


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_TABLE)
def test_parse_signed(text: str, value: Fraction, fmt: Format) -> None:
    negative = parse_quantity("-" + text)
    assert negative.as_fraction() == -value
    assert negative.format == fmt
    positive = parse_quantity("+" + text)
    assert positive.as_fraction() == value
    assert positive.format == fmt


@pytest.mark.parametrize(
    "text",
    [
        "",
        "1.1.M",
        "1+1.0M",
        "0.1mi",
        "0.1am",
        "aoeu",
        ".5i",
        "1i",
        "-3.01i",
        "-3.01e-",
        " 1",
        "1 ",
        "1e",
        "1K",
        "1ki",
        "1Ee3",
        "1e3m",
        "1mm",
        "1E-",
        "1e+",
        "1e1.5",
        "--1",
        "1-",
        "1Zi",
        "½",
    ],
)
def test_invalid_quantities_are_rejected(text: str) -> None:
    with pytest.raises(QuantityError) as caught:
        parse_quantity(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("1.1.M", "quantities must match the regular expression"),
        ("0.1mi", "unable to parse quantity's suffix"),
        ("-3.01e-", "unable to parse quantity's suffix"),
    ],
)
def test_invalid_quantity_reasons(text: str, reason: str) -> None:
    with pytest.raises(QuantityError, match=reason):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (".", 0),
        ("-.", 0),
        ("+", 0),
        ("-", 0),
        ("000", 0),
        ("-0", 0),
        ("+.5", Fraction(1, 2)),
        ("k", 0),
        ("Mi", 0),
        ("e5", 0),
        ("-.n", 0),
        ("0e-12", 0),
        ("1.e-12", Fraction(1, 10**9)),
    ],
)
def test_degenerate_numbers_upstream_accepts(text: str, value: Fraction) -> None:
    # parseQuantityString: a missing numerator is "0" (TestParseQuantityString has "." and "-.").
    assert parse_quantity(text).as_fraction() == value


@pytest.mark.parametrize("text", ["e-10", "-.e-12", "+E-20"])
def test_digitless_number_below_nano_is_rejected(text: str) -> None:
    # Below nano scale upstream parses the number with inf.Dec, which needs a digit.
    with pytest.raises(QuantityError, match="unable to parse numeric part of quantity"):
        parse_quantity(text)


# TestQuantityString: (value, format) -> canonical, and an alternate spelling of it.
STRING_TABLE: list[tuple[Fraction, Format, str, str]] = [
    (dec(1024**3, 0), BINARY_SI, "1Gi", "1024Mi"),
    (dec(300 * 1024**2, 0), BINARY_SI, "300Mi", "307200Ki"),
    (dec(6 * 1024, 0), BINARY_SI, "6Ki", ""),
    (dec(1001 * 1024**3, 0), BINARY_SI, "1001Gi", "1025024Mi"),
    (dec(1024**4, 0), BINARY_SI, "1Ti", "1024Gi"),
    (dec(5, 0), BINARY_SI, "5", "5000m"),
    (dec(500, -3), BINARY_SI, "500m", "0.5"),
    (dec(1, 9), DECIMAL_SI, "1G", "1000M"),
    (dec(1000, 6), DECIMAL_SI, "1G", "0.001T"),
    (dec(1000000, 3), DECIMAL_SI, "1G", ""),
    (dec(1000000000, 0), DECIMAL_SI, "1G", ""),
    (dec(1, -3), DECIMAL_SI, "1m", "1000u"),
    (dec(80, -3), DECIMAL_SI, "80m", ""),
    (dec(1080, -3), DECIMAL_SI, "1080m", "1.08"),
    (dec(108, -2), DECIMAL_SI, "1080m", "1080000000n"),
    (dec(10800, -4), DECIMAL_SI, "1080m", ""),
    (dec(300, 6), DECIMAL_SI, "300M", ""),
    (dec(1, 12), DECIMAL_SI, "1T", ""),
    (dec(1, 18), DECIMAL_SI, "1E", ""),
    (dec(1, 21), DECIMAL_SI, "1e21", "1000E"),
    (dec(5, 21), DECIMAL_SI, "5e21", "5000E"),
    (dec(1, 24), DECIMAL_SI, "1e24", "1000000E"),
    (dec(1234567, 6), DECIMAL_SI, "1234567M", ""),
    (dec(1234567, -3), BINARY_SI, "1234567m", ""),
    (dec(3, 3), DECIMAL_SI, "3k", ""),
    (dec(1025, 0), BINARY_SI, "1025", ""),
    (dec(0, 0), DECIMAL_SI, "0", ""),
    (dec(0, 0), BINARY_SI, "0", ""),
    (dec(1, 9), DECIMAL_EXPONENT, "1e9", ".001e12"),
    (dec(1, -3), DECIMAL_EXPONENT, "1e-3", "0.001e0"),
    (dec(1, -9), DECIMAL_EXPONENT, "1e-9", "1000e-12"),
    (dec(80, -3), DECIMAL_EXPONENT, "80e-3", ""),
    (dec(300, 6), DECIMAL_EXPONENT, "300e6", ""),
    (dec(1, 12), DECIMAL_EXPONENT, "1e12", ""),
    (dec(1, 3), DECIMAL_EXPONENT, "1e3", ""),
    (dec(3, 3), DECIMAL_EXPONENT, "3e3", ""),
    (dec(0, 0), DECIMAL_EXPONENT, "0", "00"),
    (dec(1, -9), DECIMAL_SI, "1n", ""),
    (dec(80, -9), DECIMAL_SI, "80n", ""),
    (dec(1080, -9), DECIMAL_SI, "1080n", ""),
    (dec(108, -8), DECIMAL_SI, "1080n", ""),
    (dec(10800, -10), DECIMAL_SI, "1080n", ""),
    (dec(1, -6), DECIMAL_SI, "1u", ""),
    (dec(80, -6), DECIMAL_SI, "80u", ""),
    (dec(1080, -6), DECIMAL_SI, "1080u", ""),
]


def _quantity(value: Fraction, fmt: Format) -> Quantity:
    nanos = value * 10**9
    assert nanos.denominator == 1
    return Quantity.from_nanos(nanos.numerator, fmt)


@pytest.mark.parametrize(("value", "fmt", "canonical", "alternate"), STRING_TABLE)
def test_string(value: Fraction, fmt: Format, canonical: str, alternate: str) -> None:
    quantity = _quantity(value, fmt)
    assert str(quantity) == canonical
    assert str(parse_quantity(canonical)) == canonical
    if alternate:
        assert str(parse_quantity(alternate)) == canonical
    if value:
        assert str(quantity.neg()) == "-" + canonical


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        # TestQuantityParseEmit
        ("1Ki", "1Ki"),
        ("1Mi", "1Mi"),
        ("1Gi", "1Gi"),
        ("1024Mi", "1Gi"),
        ("1000M", "1G"),
        (".001Ki", "1024m"),
        (".000001Ki", "1024u"),
        (".000000001Ki", "1024n"),
        (".000000000001Ki", "2n"),
        # documented examples and the brief's
        ("1.5", "1500m"),
        ("1.5Gi", "1536Mi"),
        ("1536Mi", "1536Mi"),
        ("100m", "100m"),
        ("0.1", "100m"),
        ("0.1m", "100u"),
        ("1000m", "1"),
        ("1000", "1k"),
        ("1e3", "1e3"),
        ("12e6", "12e6"),
        ("129e6", "129e6"),
        ("1.3E+6", "1300e3"),
        ("0", "0"),
        ("250m", "250m"),
        ("2000Mi", "2000Mi"),
        ("2048Mi", "2Gi"),
        ("1.1Ki", "1126400m"),
        ("1023Ki", "1023Ki"),
        ("1024Ki", "1Mi"),
        ("+1", "1"),
        ("1.500", "1500m"),  # upstream echoes "1.500" (kubernetes/kubernetes#138165)
    ],
)
def test_parse_emit(text: str, canonical: str) -> None:
    assert str(parse_quantity(text)) == canonical
    if canonical != "0" and text[0] not in "+-":
        assert str(parse_quantity("-" + text)) == "-" + canonical


@pytest.mark.parametrize(
    ("quantity", "canonical"),
    [
        # quantity_golden_test.go, the canonical (uncached) column.
        (Quantity.from_nanos(0), "0"),
        (parse_quantity("1"), "1"),
        (parse_quantity("-1"), "-1"),
        (parse_quantity("1Ki"), "1Ki"),
        (parse_quantity("1024Mi"), "1Gi"),
        (parse_quantity("1000M"), "1G"),
        (parse_quantity("1e3"), "1e3"),
        (parse_quantity("0.1"), "100m"),
        (Quantity.from_milli(1441), "1441m"),
        (parse_quantity("0.000000000000001"), "1n"),
        (parse_quantity("1.441"), "1441m"),
        (parse_quantity("1.000001"), "1000001u"),
        (parse_quantity("1.000000001"), "1000000001n"),
        (parse_quantity("1.5"), "1500m"),
        (parse_quantity("9223372036854775807"), "9223372036854775807"),
        (Quantity.from_int(-(2**63)), "-9223372036854775808"),
        (parse_quantity("9223372036854775808"), "9223372036854775808"),
        (parse_quantity("18446744073709551616"), "18446744073709551616"),
        (Quantity.from_int(MAX_INT64 * 10), "92233720368547758070"),
        (parse_quantity("1E"), "1E"),
        (parse_quantity("100E"), "100E"),
        (parse_quantity("1000E"), "1e21"),
        (parse_quantity("1e100"), "10e99"),
        (Quantity.from_int(10**21), "1e21"),
        (parse_quantity("8Ei"), "9223372036854775807"),
        (parse_quantity("-20Ei"), "-9223372036854775807"),
        (parse_quantity("-9.5Gi"), "-9728Mi"),
        (parse_quantity("-9.5000000001Gi"), "-10200547328107374183n"),
        # 0 - mostNegative in BinarySI is 8Ei (TestZeroSubMostNegativeInheritsFormat)
        (Quantity.from_nanos(0).sub(Quantity.from_int(-(2**63), BINARY_SI)), "8Ei"),
    ],
)
def test_serialization_golden(quantity: Quantity, canonical: str) -> None:
    assert str(quantity) == canonical
    assert quantity.to_json() == canonical


@pytest.mark.parametrize(
    ("value", "fmt", "canonical"),
    [
        # TestMilliNewSet (the invalid-format row is covered by test_unknown_format_is_rejected)
        (1, DECIMAL_SI, "1m"),
        (1000, DECIMAL_SI, "1"),
        (1234000, DECIMAL_SI, "1234"),
        (1024, BINARY_SI, "1024m"),
        (1024 * 1024, BINARY_SI, "1048576m"),
        (1000000, DECIMAL_EXPONENT, "1e3"),
    ],
)
def test_from_milli(value: int, fmt: Format, canonical: str) -> None:
    quantity = Quantity.from_milli(value, fmt)
    assert str(quantity) == canonical
    assert parse_quantity(canonical).milli_value() == value


@pytest.mark.parametrize(
    ("value", "fmt", "canonical"),
    [
        # TestNewSet
        (1, DECIMAL_SI, "1"),
        (1000, DECIMAL_SI, "1k"),
        (1234000, DECIMAL_SI, "1234k"),
        (1024, BINARY_SI, "1Ki"),
        (1000000, DECIMAL_EXPONENT, "1e6"),
        (1024 * 1024, BINARY_SI, "1Mi"),
    ],
)
def test_from_int(value: int, fmt: Format, canonical: str) -> None:
    quantity = Quantity.from_int(value, fmt)
    assert str(quantity) == canonical
    assert Quantity.from_json(canonical).value() == value


def test_binary_beyond_exbi_keeps_the_value() -> None:
    # Upstream has no suffix past "Ei" (its output would lose the exponent); the value is kept.
    assert str(Quantity.from_int(3 * 1024**7, BINARY_SI)) == "3072Ei"
    assert str(Quantity.from_int(2**63, BINARY_SI)) == "8Ei"
    assert parse_quantity("3072Ei").nanos == MAX_INT64 * 10**9  # and parsing caps it


def test_from_milli_defaults_to_decimal_si() -> None:
    assert str(Quantity.from_milli(250)) == "250m"
    assert Quantity.from_milli(250).format == DECIMAL_SI
    assert str(Quantity.from_int(3)) == "3"


def test_unknown_format_is_rejected() -> None:
    with pytest.raises(QuantityError, match="unknown quantity format"):
        Quantity.from_int(1, "invalidFormat")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "milli", "value"),
    [
        ("100m", 100, 1),
        ("1", 1000, 1),
        ("1500m", 1500, 2),
        ("0.1m", 1, 1),
        ("1n", 1, 1),
        ("1Gi", 1073741824000, 1073741824),
        ("1.5", 1500, 2),
        ("0", 0, 0),
        ("-1500m", -1500, -2),  # upstream rounds away from zero
        ("-0.1m", -1, -1),
    ],
)
def test_milli_value_and_value(text: str, milli: int, value: int) -> None:
    quantity = parse_quantity(text)
    assert quantity.milli_value() == milli
    assert quantity.value() == value


@pytest.mark.parametrize(
    ("from_scale", "to_scale", "expected"),
    [
        # TestScaledValue: 1 * 10^from_scale read in units of 10^to_scale
        (-9, -9, 1),
        (-9, -6, 1),
        (-9, -3, 1),
        (-9, 0, 1),
        (-6, -9, 1000),
        (-6, -6, 1),
        (-6, -3, 1),
        (-6, 0, 1),
        (-3, -9, 1000 * 1000),
        (-3, -6, 1000),
        (-3, -3, 1),
        (-3, 0, 1),
        (0, -9, 1000 * 1000 * 1000),
        (0, -6, 1000 * 1000),
        (0, -3, 1000),
        (0, 0, 1),
        (2, -2, 100 * 100),
    ],
)
def test_scaled_value(from_scale: int, to_scale: int, expected: int) -> None:
    quantity = Quantity.from_nanos(10 ** (from_scale + 9))
    assert quantity.scaled_value(to_scale) == expected


@pytest.mark.parametrize(
    ("left", "right", "expected"),
    [
        ("0", "0", 0),
        ("100m", "50m", 1),
        ("50m", "100m", -1),
        ("10000T", "100Gi", 1),
        ("1Ki", "1024", 0),
        ("1e3", "1k", 0),
        ("-1", "0", -1),
        ("999m", "1", -1),
    ],
)
def test_cmp(left: str, right: str, expected: int) -> None:
    a, b = parse_quantity(left), parse_quantity(right)
    assert a.cmp(b) == expected
    assert b.cmp(a) == -expected
    assert (a == b) is (expected == 0)
    assert (a < b) is (expected < 0)
    assert (a <= b) is (expected <= 0)
    assert (a > b) is (expected > 0)
    assert (a >= b) is (expected >= 0)


def test_equal_values_hash_alike() -> None:
    assert {parse_quantity("1Ki"), parse_quantity("1024"), parse_quantity("1.024k")} == {
        Quantity.from_int(1024)
    }
    assert parse_quantity("1") != "1"


@pytest.mark.parametrize(
    ("left", "right", "total", "difference", "fmt"),
    [
        # TestAdd / TestSub: the receiver's format wins unless the receiver is zero.
        (Quantity.from_int(10), Quantity.from_int(10), "20", "0", DECIMAL_SI),
        (Quantity.from_int(10), Quantity.from_int(1, BINARY_SI), "11", "9", DECIMAL_SI),
        (Quantity.from_int(10, BINARY_SI), Quantity.from_int(1), "11", "9", BINARY_SI),
        (Quantity.from_int(0), Quantity.from_int(50), "50", "-50", DECIMAL_SI),
        (Quantity.from_int(50), Quantity.from_int(0), "50", "50", DECIMAL_SI),
        (Quantity.from_int(0), Quantity.from_int(0), "0", "0", DECIMAL_SI),
        (parse_quantity("0"), parse_quantity("1Gi"), "1Gi", "-1Gi", BINARY_SI),
        (parse_quantity("1Gi"), parse_quantity("512Mi"), "1536Mi", "512Mi", BINARY_SI),
        (parse_quantity("100m"), parse_quantity("0"), "100m", "100m", DECIMAL_SI),
        (parse_quantity("1"), parse_quantity("1e3"), "1001", "-999", DECIMAL_SI),
    ],
)
def test_add_and_sub(
    left: Quantity, right: Quantity, total: str, difference: str, fmt: Format
) -> None:
    assert str(left + right) == total
    assert str(left.add(right)) == total
    assert (left + right).format == fmt
    assert str(left - right) == difference
    assert (left - right).format == fmt


def test_zero_keeps_suffix_of_the_other_operand() -> None:
    # TestQuantityAddZeroPreservesSuffix / TestQuantitySubZeroPreservesSuffix
    zero = parse_quantity("0")
    for text in ("100m", "1Gi"):
        value = parse_quantity(text)
        assert str(value + zero) == text
        assert str(zero + value) == text
        assert str(value - zero) == text
        assert str(zero - value) == str(-value) == "-" + text


def test_neg() -> None:
    # TestQuantityNeg
    assert str(-Quantity.from_milli(9010)) == "-9010m"
    assert str(-parse_quantity("-10")) == "10"


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ('"1"', "1"),
        (" 1", "1"),
        ("1 ", "1"),
        (1, "1"),
        (10, "10"),
        (-1, "-1"),
        (0.5, "500m"),
        (1e-05, "10e-6"),
        (2.5e9, "2500M"),
        (1e20, "100e18"),
    ],
)
def test_from_json(raw: object, canonical: str) -> None:
    # TestJSONWhitespace: surrounding whitespace is trimmed, bare numbers are accepted.
    value = raw.strip('"') if isinstance(raw, str) else raw
    assert str(Quantity.from_json(value)) == canonical


@pytest.mark.parametrize("raw", [None, True, [1], {"a": 1}, "1 1", "abc"])
def test_from_json_rejects_non_quantities(raw: object) -> None:
    with pytest.raises(QuantityError):
        Quantity.from_json(raw)


def test_reading_helpers() -> None:
    quantity = parse_quantity("1500m")
    assert quantity.nanos == 1_500_000_000
    assert quantity.as_fraction() == Fraction(3, 2)
    assert quantity.as_float() == 1.5
    assert quantity.sign() == 1
    assert (-quantity).sign() == -1
    assert parse_quantity("0").is_zero()
    assert str(quantity.with_format(DECIMAL_EXPONENT)) == "1500e-3"
    assert Quantity.parse("2Gi") == parse_quantity("2048Mi")
    assert repr(parse_quantity("2Gi")) == "Quantity('2Gi', BinarySI)"


def test_huge_values_are_bounded() -> None:
    with pytest.raises(QuantityError, match="magnitude"):
        parse_quantity("1e1000")
    with pytest.raises(QuantityError, match="significant digits"):
        parse_quantity("1" * 1001)
    assert parse_quantity("1e-1000000").nanos == 1
    assert parse_quantity("1e999") == Quantity.from_int(10**999)


# ---------------------------------------------------------------------------------------------
# Invariants.

_FORMATS: list[Format] = [DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT]
_NANOS = st.one_of(
    st.integers(-(10**30), 10**30),
    st.builds(lambda m, p: m * 1024**p * 10**9, st.integers(-2048, 2048), st.integers(0, 7)),
    st.builds(lambda m, p: m * 10**p, st.integers(-999, 999), st.integers(0, 40)),
)


@settings(max_examples=500, deadline=None)
@given(nanos=_NANOS, fmt=st.sampled_from(_FORMATS))
def test_canonical_string_parses_back_to_the_value(nanos: int, fmt: Format) -> None:
    quantity = Quantity.from_nanos(nanos, fmt)
    text = str(quantity)
    parsed = parse_quantity(text)
    if parsed.format == BINARY_SI and abs(nanos) > MAX_INT64 * 10**9:
        # The binary-SI parse cap is the one place a printed value does not read back.
        assert abs(parsed.nanos) == MAX_INT64 * 10**9
    else:
        assert parsed == quantity
        # Printing is a fixed point once the parsed text's own format is in effect
        # (a BinarySI 5000 prints "5000", which parses as DecimalSI and prints "5k").
        assert str(parse_quantity(str(parsed))) == str(parsed)
        if parsed.format == fmt:
            assert str(parsed) == text


_SUFFIXES = {
    "": (10, 0),
    "n": (10, -9),
    "u": (10, -6),
    "m": (10, -3),
    "k": (10, 3),
    "M": (10, 6),
    "G": (10, 9),
    "T": (10, 12),
    "P": (10, 15),
    "E": (10, 18),
    "Ki": (2, 10),
    "Mi": (2, 20),
    "Gi": (2, 30),
    "Ti": (2, 40),
    "Pi": (2, 50),
    "Ei": (2, 60),
}


@st.composite
def _quantity_texts(draw: st.DrawFn) -> tuple[str, Fraction, str]:
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.text(alphabet="0123456789", max_size=12))
    fraction = draw(st.none() | st.text(alphabet="0123456789", max_size=12))
    if draw(st.booleans()):
        suffix = draw(st.sampled_from(sorted(_SUFFIXES)))
        base, exponent = _SUFFIXES[suffix]
    else:
        exponent = draw(st.integers(-30, 30))
        suffix = draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "+"])) * (
            exponent >= 0
        )
        suffix += str(exponent)
        base = 10
    if not whole and not fraction:
        whole = "0"  # digit-less numbers have their own table
    number = whole + ("" if fraction is None else "." + fraction)
    digits = Fraction(int(whole or "0")) + (
        Fraction(int(fraction), 10 ** len(fraction)) if fraction else 0
    )
    value = digits * Fraction(base) ** exponent
    return sign + number + suffix, (-value if sign == "-" else value), suffix


@settings(max_examples=500, deadline=None)
@given(case=_quantity_texts())
def test_parse_agrees_with_exact_evaluation(case: tuple[str, Fraction, str]) -> None:
    text, value, suffix = case
    quantity = parse_quantity(text)
    # Reference: round the magnitude up to a whole nano-unit; binary SI caps at 2^63-1.
    magnitude = math.ceil(abs(value) * 10**9)
    if suffix.endswith("i"):
        magnitude = min(magnitude, MAX_INT64 * 10**9)
    assert abs(quantity.nanos) == magnitude
    assert quantity.sign() == (0 if magnitude == 0 else (-1 if value < 0 else 1))
    # And its canonical text reads back as the same value.
    if magnitude <= MAX_INT64 * 10**9 or quantity.format != BINARY_SI:
        assert parse_quantity(str(quantity)) == quantity


@settings(max_examples=300, deadline=None)
@given(a=_NANOS, b=_NANOS)
def test_arithmetic_and_order_are_exact(a: int, b: int) -> None:
    qa, qb = Quantity.from_nanos(a), Quantity.from_nanos(b)
    fa, fb = Fraction(a, 10**9), Fraction(b, 10**9)
    assert (qa + qb).as_fraction() == fa + fb
    assert (qa - qb).as_fraction() == fa - fb
    assert (qa < qb) is (fa < fb)
    assert (qa == qb) is (fa == fb)
    assert qa.milli_value() == (math.ceil(fa * 1000) if fa >= 0 else -math.ceil(-fa * 1000))
    assert qa.value() == (math.ceil(fa) if fa >= 0 else -math.ceil(-fa))
