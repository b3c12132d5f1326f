"""Error responses become KubeApiError with the Status fields (client-go StatusError)."""

from __future__ import annotations

import json

import pytest

from kubescale.kube.errors import KubeApiError


def _status(code: int, reason: str, message: str, **details: object) -> bytes:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("code", "reason", "flag"),
    [
        (404, "NotFound", "not_found"),
        (409, "Conflict", "conflict"),
        (409, "AlreadyExists", "already_exists"),
        (410, "Expired", "gone"),
        (429, "TooManyRequests", "too_many_requests"),
    ],
)
def test_status_body_fields_and_predicates(code: int, reason: str, flag: str) -> None:
    err = KubeApiError.from_response(code=code, body=_status(code, reason, "some text"))
    assert (err.code, err.reason, err.message) == (code, reason, "some text")
    flags = {"not_found", "conflict", "already_exists", "gone", "too_many_requests"}
    assert getattr(err, flag) is True
    assert not any(getattr(err, other) for other in flags - {flag})


def test_retry_after_header_wins_over_status_details() -> None:
    body = _status(429, "TooManyRequests", "slow down", retryAfterSeconds=7)
    assert KubeApiError.from_response(code=429, body=body).retry_after == 7.0
    assert KubeApiError.from_response(code=429, body=body, retry_after=2.0).retry_after == 2.0


def test_non_status_body_falls_back_to_the_reason_for_the_code() -> None:
    err = KubeApiError.from_response(code=503, body=b"<html>upstream down</html>")
    assert (err.code, err.reason) == (503, "ServiceUnavailable")
    assert "upstream down" in err.message
    empty = KubeApiError.from_response(code=418, body=b"")
    assert (empty.code, empty.reason, empty.message) == (418, "Unknown", "")


def test_watch_error_event_status_without_http_code() -> None:
    err = KubeApiError.from_status(
        {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
    )
    assert err.gone
    assert str(err) == "410 Expired: too old resource version"
