"""The Prometheus HTTP API's answers and number formats, read and written as client_golang does.

What VPA's history provider gets back from ``github.com/prometheus/client_golang`` (``api``,
``api/prometheus/v1``, ``common/model``), so every value and every failure reads the same:

* Answers (``apiClientImpl.Do``): a status other than 2xx, 400 and 422 is
  ``client_error: client error: <code>`` / ``server_error: server error: <code>`` /
  ``bad_response: bad response code <code>``; otherwise the body is the JSON envelope
  ``{status, data, errorType, error}``: unparseable → ``bad_response: <decoder error>``,
  ``status: error`` → ``<errorType>: <error>``, 400/422 claiming success →
  ``bad_response: inconsistent body for response code``. ``data`` decodes as
  ``{resultType, result}`` (``matrix``, ``vector``, ``scalar``, ``string``; anything else is
  ``unexpected value type "<type>"``).
* Matrix values (``model.SamplePair``): the value is a quoted Go ``strconv.ParseFloat`` text
  (``NaN`` and ``±Inf`` included); the timestamp is ``model.Time`` in milliseconds, parsed from
  the JSON number's own text as ``Time.UnmarshalJSON`` does (integer part, then the first three
  fractional digits; anything else is ``invalid time``).
* Request times are ``formatTime``: Unix seconds plus nanoseconds/1e9 as the shortest decimal
  (``strconv.FormatFloat(x, 'f', -1, 64)``); series labels print as ``model.Metric.String()``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import numpy as np

__all__ = [
    "PrometheusAPIError",
    "QueryValue",
    "SampleStream",
    "VectorSample",
    "decode_answer",
    "decode_query_data",
    "format_go_float",
    "format_time",
    "labels_text",
    "parse_model_time",
    "parse_sample_value",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_API_ERROR_CODES: Final = frozenset({400, 422})  # apiError(): http.StatusBadRequest, statusAPIError
_ENVELOPE_STATUS: Final = "status"  # the API envelope's "success"/"error", not an object's
_GO_TYPE_NAMES: Final = {  # %T of the decoded model.Value
    "matrix": "model.Matrix",
    "vector": "model.Vector",
    "scalar": "*model.Scalar",
    "string": "*model.String",
}
_GO_INT = re.compile(r"[+-]?[0-9]+")
_DOT_PRECISION: Final = 3  # model.dotPrecision: milliseconds


class PrometheusAPIError(Exception):
    """A failed call; the message is the Go error text upstream would log."""


class _JsonNumber(str):
    """A JSON number kept as its text (``model.Time`` parses the text, not a float)."""

    __slots__ = ()


@dataclass(frozen=True, kw_only=True)
class SampleStream:
    """One series of a matrix: its labels and its ``(timestamp, value)`` pairs, oldest first."""

    metric: Mapping[str, str]
    values: tuple[tuple[datetime, float], ...]


@dataclass(frozen=True, kw_only=True)
class VectorSample:
    """One sample of an instant vector (``model.Sample``): labels, timestamp, value."""

    metric: Mapping[str, str]
    timestamp: datetime
    value: float


@dataclass(frozen=True, kw_only=True)
class QueryValue:
    """A decoded ``data``: its ``resultType``; the series when it is a matrix, the samples when
    it is a vector, the value when it is a scalar."""

    result_type: str
    matrix: tuple[SampleStream, ...] = ()
    vector: tuple[VectorSample, ...] = ()
    scalar: float | None = None

    @property
    def go_type(self) -> str:
        """How ``fmt.Sprintf("%T", value)`` names it in upstream's error messages."""
        return _GO_TYPE_NAMES.get(self.result_type, "<nil>")


# --- Go formatting and parsing ----------------------------------------------------------------


def format_go_float(value: float) -> str:
    """``strconv.FormatFloat(value, 'f', -1, 64)``: the shortest round-trip digits, no exponent."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(np.format_float_positional(value, unique=True, trim="-"))


def format_time(moment: datetime) -> str:
    """client_golang's ``formatTime``: ``float64(t.Unix()) + float64(t.Nanosecond())/1e9``."""
    delta = moment - _EPOCH
    whole = delta.days * 86400 + delta.seconds
    return format_go_float(float(whole) + float(delta.microseconds * 1000) / 1e9)


def parse_model_time(text: str) -> datetime:
    """``model.Time.UnmarshalJSON`` of a JSON number's text → an aware UTC datetime."""
    parts = text.split(".")
    if len(parts) == 1:
        if not _GO_INT.fullmatch(parts[0]):
            raise ValueError(f"invalid time {text!r}")
        millis = int(parts[0]) * 1000
    elif len(parts) == 2:
        whole, fraction = parts
        if not _GO_INT.fullmatch(whole):
            raise ValueError(f"invalid time {text!r}")
        fraction = fraction[:_DOT_PRECISION].ljust(_DOT_PRECISION, "0")
        if not _GO_INT.fullmatch(fraction):
            raise ValueError(f"invalid time {text!r}")
        seconds_ms = int(whole) * 1000
        fraction_ms = int(fraction)
        # Upstream's fix for "-0.1": the sign of a zero integer part is otherwise lost.
        if whole.startswith("-") and seconds_ms + fraction_ms > 0:
            millis = -(seconds_ms + fraction_ms)
        else:
            millis = seconds_ms + fraction_ms
    else:
        raise ValueError(f"invalid time {text!r}")
    return _EPOCH + timedelta(milliseconds=millis)


def parse_sample_value(text: str) -> float:
    """``strconv.ParseFloat(text, 64)`` as ``model.SampleValue`` uses it (``NaN``, ``+Inf``)."""
    if text != text.strip() or "_" in text or not text:
        raise ValueError(f"strconv.ParseFloat: parsing {text!r}: invalid syntax")
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float.fromhex(text)
    except ValueError:
        raise ValueError(f"strconv.ParseFloat: parsing {text!r}: invalid syntax") from None


def _decode_matrix(result: Any) -> tuple[SampleStream, ...]:
    if not isinstance(result, list):
        raise ValueError("matrix result is not a list")
    streams: list[SampleStream] = []
    for item in result:
        if not isinstance(item, dict):
            raise ValueError("matrix series is not an object")
        metric = item.get("metric") or {}
        if not isinstance(metric, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
        ):
            raise ValueError("series labels are not a string map")
        pairs: list[tuple[datetime, float]] = []
        for pair in item.get("values") or []:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError("sample pair is not [timestamp, value]")
            stamp, value = pair
            if not isinstance(stamp, _JsonNumber):
                raise ValueError(f"invalid time {stamp!r}")
            if not isinstance(value, str) or isinstance(value, _JsonNumber):
                raise ValueError("sample value must be a quoted string")
            pairs.append((parse_model_time(stamp), parse_sample_value(value)))
        streams.append(SampleStream(metric=dict(metric), values=tuple(pairs)))
    return tuple(streams)


def _sample_value(value: Any) -> float:
    if not isinstance(value, str) or isinstance(value, _JsonNumber):
        raise ValueError("sample value must be a quoted string")
    return parse_sample_value(value)


def _decode_vector(result: Any) -> tuple[VectorSample, ...]:
    """``model.Vector``: ``[{metric, value: [timestamp, "value"]}]``."""
    if not isinstance(result, list):
        raise ValueError("vector result is not a list")
    samples: list[VectorSample] = []
    for item in result:
        if not isinstance(item, dict):
            raise ValueError("vector sample is not an object")
        metric = item.get("metric") or {}
        if not isinstance(metric, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metric.items()
        ):
            raise ValueError("sample labels are not a string map")
        pair = item.get("value")
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError("sample value is not [timestamp, value]")
        stamp, value = pair
        if not isinstance(stamp, _JsonNumber):
            raise ValueError(f"invalid time {stamp!r}")
        samples.append(
            VectorSample(
                metric=dict(metric), timestamp=parse_model_time(stamp), value=_sample_value(value)
            )
        )
    return tuple(samples)


def decode_query_data(data: Any) -> QueryValue:
    """``queryResult.UnmarshalJSON`` of an envelope's ``data``."""
    if not isinstance(data, dict):
        raise PrometheusAPIError("json: cannot unmarshal query data")
    result_type = data.get("resultType")
    result = data.get("result")
    try:
        if result_type == "matrix":
            return QueryValue(result_type="matrix", matrix=_decode_matrix(result))
        if result_type == "vector":
            return QueryValue(result_type="vector", vector=_decode_vector(result))
        if result_type in ("scalar", "string"):
            if not isinstance(result, list) or len(result) != 2:
                raise ValueError(f"{result_type} result is not [timestamp, value]")
            if result_type == "scalar":
                return QueryValue(result_type="scalar", scalar=_sample_value(result[1]))
            return QueryValue(result_type=str(result_type))
    except ValueError as err:
        raise PrometheusAPIError(str(err)) from None
    raise PrometheusAPIError(f"unexpected value type {json.dumps(result_type)}")


def _status_error(code: int) -> str:
    """``errorTypeAndMsgFor``, rendered by ``Error.Error()`` as ``<type>: <msg>``."""
    if code // 100 == 4:
        return f"client_error: client error: {code}"
    if code // 100 == 5:
        return f"server_error: server error: {code}"
    return f"bad_response: bad response code {code}"


def decode_answer(code: int, body: bytes) -> QueryValue:
    """``apiClientImpl.Do`` then ``queryResult`` decoding of one HTTP answer."""
    if code // 100 != 2 and code not in _API_ERROR_CODES:
        raise PrometheusAPIError(_status_error(code))
    envelope: Any = {}
    if code != 204:
        try:
            envelope = json.loads(body, parse_float=_JsonNumber, parse_int=_JsonNumber)
        except ValueError as err:
            raise PrometheusAPIError(f"bad_response: {err}") from None
        if not isinstance(envelope, dict):
            raise PrometheusAPIError("bad_response: json: cannot unmarshal response envelope")
    status = envelope.get(_ENVELOPE_STATUS)
    if status == "error":
        raise PrometheusAPIError(f"{envelope.get('errorType', '')}: {envelope.get('error', '')}")
    if code in _API_ERROR_CODES and status == "success":
        raise PrometheusAPIError("bad_response: inconsistent body for response code")
    return decode_query_data(envelope.get("data"))


def labels_text(metric: Mapping[str, str]) -> str:
    """``model.Metric.String()``: ``name{a="x", b="y"}`` (labels sorted, name outside)."""
    name = metric.get("__name__", "")
    labels: Sequence[str] = sorted(
        f"{key}={json.dumps(value)}" for key, value in metric.items() if key != "__name__"
    )
    if not labels:
        return name or "{}"
    return f"{name}{{{', '.join(labels)}}}"
