"""Go number, time and duration formats the history provider shares with upstream's client.

Expected values follow Go's documented behaviour: ``strconv.FormatFloat(x, 'f', -1, 64)``
(shortest digits that round-trip, never an exponent), client_golang's ``formatTime``,
``model.Time.UnmarshalJSON`` (milliseconds from the number's text), ``strconv.ParseFloat``,
Prometheus' ``model.ParseDuration`` and ``model.Metric.String``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    parse_prometheus_duration,
)
from kubescale.prometheus.query_values import (
    format_go_float,
    format_time,
    labels_text,
    parse_model_time,
    parse_sample_value,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (3600.0, "3600"),
        (1.5, "1.5"),
        (0.1, "0.1"),
        (30.0, "30"),
        (1e21, "1000000000000000000000"),
        (1e-7, "0.0000001"),
        (-0.0, "-0"),
        (1767225600.25, "1767225600.25"),
        (123456789.123456789, "123456789.12345679"),
        (math.inf, "+Inf"),
        (math.nan, "NaN"),
    ],
)
def test_format_go_float(value: float, text: str) -> None:
    assert format_go_float(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_format_go_float_round_trips_without_exponent(value: float) -> None:
    text = format_go_float(value)
    assert "e" not in text.lower()
    assert float(text) == value


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 1, 1, tzinfo=UTC), "1767225600"),
        (datetime(2026, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC), "1767225600.5"),
        (datetime(1969, 12, 31, 23, 59, 59, 750_000, tzinfo=UTC), "-0.25"),
    ],
)
def test_format_time(moment: datetime, text: str) -> None:
    assert format_time(moment) == text


@given(st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)))
def test_format_time_is_unix_plus_nanoseconds(moment: datetime) -> None:
    aware = moment.replace(tzinfo=UTC)
    whole = (aware - EPOCH) // timedelta(seconds=1)
    assert float(format_time(aware)) == float(whole) + float(aware.microsecond * 1000) / 1e9


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("1435781451.781", 1435781451781),
        ("1435781451", 1435781451000),
        ("1.5", 1500),
        ("1.2345", 1234),  # digits past milliseconds are dropped, not rounded
        ("1.05", 1050),
        ("-0.5", -500),  # the sign of "-0" is restored
        ("-1.5", -500),  # Time.UnmarshalJSON's own arithmetic for negative fractions
        ("0", 0),
        ("1.", 1000),  # an empty fraction is padded to "000"
    ],
)
def test_parse_model_time(text: str, millis: int) -> None:
    assert parse_model_time(text) == EPOCH + timedelta(milliseconds=millis)


@pytest.mark.parametrize("text", ["1e3", "1.2.3", "abc", "", "1.x", ".5"])
def test_parse_model_time_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid time"):
        parse_model_time(text)


@given(st.integers(min_value=0, max_value=10**13))
def test_parse_model_time_reads_prometheus_timestamps(millis: int) -> None:
    seconds, fraction = divmod(millis, 1000)
    text = f"{seconds}.{fraction:03d}".rstrip("0").rstrip(".")
    assert parse_model_time(text) == EPOCH + timedelta(milliseconds=millis)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", 1.0),
        ("0.2505", 0.2505),
        ("1e9", 1e9),
        ("+Inf", math.inf),
        ("-Inf", -math.inf),
        ("inf", math.inf),
        ("Infinity", math.inf),
        ("0x1p-2", 0.25),
    ],
)
def test_parse_sample_value(text: str, value: float) -> None:
    assert parse_sample_value(text) == value


def test_parse_sample_value_nan() -> None:
    assert math.isnan(parse_sample_value("NaN"))


@pytest.mark.parametrize("text", ["", " 1", "1 ", "1_000", "one"])
def test_parse_sample_value_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid syntax"):
        parse_sample_value(text)


@pytest.mark.parametrize(
    ("text", "duration"),
    [
        ("0", timedelta(0)),
        ("8d", timedelta(days=8)),
        ("1h", timedelta(hours=1)),
        ("30s", timedelta(seconds=30)),
        ("1500ms", timedelta(milliseconds=1500)),
        ("1w2d", timedelta(days=9)),
        ("1y", timedelta(days=365)),
        ("1h30m", timedelta(minutes=90)),
        ("1d2h3m4s5ms", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5)),
    ],
)
def test_parse_prometheus_duration(text: str, duration: timedelta) -> None:
    assert parse_prometheus_duration(text) == duration


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty duration string"),
        ("1.5h", 'not a valid duration string: "1.5h"'),
        ("30m1h", 'not a valid duration string: "30m1h"'),
        ("1H", 'not a valid duration string: "1H"'),
        ("-1h", 'not a valid duration string: "-1h"'),
        ("300y", "duration out of range"),
    ],
)
def test_parse_prometheus_duration_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.") + "$"):
        parse_prometheus_duration(text)


@pytest.mark.parametrize(
    ("metric", "text"),
    [
        ({}, "{}"),
        ({"__name__": "up"}, "up"),
        ({"b": "2", "a": 'say "hi"'}, '{a="say \\"hi\\"", b="2"}'),
        ({"__name__": "m", "pod": "p", "job": "j"}, 'm{job="j", pod="p"}'),
    ],
)
def test_labels_text(metric: dict[str, str], text: str) -> None:
    assert labels_text(metric) == text
