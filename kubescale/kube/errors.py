"""Errors of the access layer: what went wrong talking to the API server.

Every failed request surfaces as a :class:`KubeError`. A response with an HTTP error status is a
:class:`KubeApiError` carrying ``code``/``reason``/``message`` from the ``metav1.Status`` body the
API server sends (the same three fields client-go's ``StatusError`` exposes), so callers test
``err.reason == "Conflict"`` or ``err.code == 404`` instead of parsing text. A request that never
got a response (connection refused or reset, TLS failure, timeout) is a
:class:`KubeTransportError`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

# Status reasons as metav1.StatusReason spells them, for the codes kube-apiserver uses; the
# one table of them, read by this client and by the in-process API server
# (kubescale.sim.apiserver.errors).
_REASON_BY_CODE = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def reason_for_code(code: int) -> str:
    """The ``metav1.StatusReason`` kube-apiserver uses for an HTTP code (``Unknown`` if none)."""
    return _REASON_BY_CODE.get(code, "Unknown")


class KubeError(Exception):
    """Any failure of a request to the API server."""

    unanswered_attempts: int = 0
    """Attempts of the request before the one this error answers whose outcome is unknown (no
    answer, or a 5xx), set by the transport when it gives up. A write's last answer speaks for
    the last attempt only: a 404 or a 429 after an attempt that timed out does not prove that
    attempt did not commit (:func:`kubescale.coordination.disruption_ledger.write_outcome`)."""


class NotLeaderError(KubeError):
    """A write refused before it was sent: the client's write gate (this replica's hold on the
    leader Lease) is closed. Leader-only loops write through a gated client, so a replica that
    lost the Lease — frozen past its renew deadline, say — cannot write even from an iteration
    that started while it led."""


class KubeTransportError(KubeError):
    """No HTTP response: connection refused/reset, TLS failure, timeout, stream cut."""


class KubeApiError(KubeError):
    """The API server answered with an error status.

    ``reason`` and ``message`` come from the ``metav1.Status`` body when there is one; a body
    that is not a Status (a proxy's HTML page, an empty 500) falls back to the reason
    kube-apiserver would use for that code and the body text.
    """

    def __init__(
        self,
        *,
        code: int,
        reason: str,
        message: str,
        status: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.status: dict[str, Any] = dict(status) if status is not None else {}
        self.retry_after = retry_after

    @classmethod
    def from_status(
        cls, status: Mapping[str, Any], *, http_code: int | None = None
    ) -> KubeApiError:
        """From a ``metav1.Status`` object (a response body or a watch ERROR event's object)."""
        raw_code = status.get("code")
        code = raw_code if isinstance(raw_code, int) and raw_code > 0 else (http_code or 500)
        reason = status.get("reason") or reason_for_code(code)
        message = status.get("message") or ""
        retry_after = None
        details = status.get("details")
        if isinstance(details, Mapping):
            seconds = details.get("retryAfterSeconds")
            if isinstance(seconds, int | float) and seconds > 0:
                retry_after = float(seconds)
        return cls(
            code=code,
            reason=str(reason),
            message=str(message),
            status=status,
            retry_after=retry_after,
        )

    @classmethod
    def from_response(
        cls, *, code: int, body: bytes, retry_after: float | None = None
    ) -> KubeApiError:
        """From an HTTP error response; ``Retry-After`` (header) wins over the Status details."""
        parsed: Any = None
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        if isinstance(parsed, Mapping) and parsed.get("kind") == "Status":
            err = cls.from_status(parsed, http_code=code)
            err.code = code
            if retry_after is not None:
                err.retry_after = retry_after
            return err
        text = body.decode("utf-8", errors="replace").strip()
        return cls(
            code=code,
            reason=reason_for_code(code),
            message=text[:500],
            retry_after=retry_after,
        )

    @property
    def not_found(self) -> bool:
        return self.code == 404

    @property
    def conflict(self) -> bool:
        """An optimistic-concurrency conflict (409 ``Conflict``), not ``AlreadyExists``."""
        return self.code == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        return self.code == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the resourceVersion (or continue token) is too old; re-list."""
        return self.code == 410

    @property
    def too_many_requests(self) -> bool:
        return self.code == 429


def failure_log_level(err: BaseException, level: int = logging.ERROR) -> int:
    """The level to log a failed request at: debug when the API server did not answer (or
    refused kubescale's credentials) — the transport reports that once per backoff step for the
    whole client (:mod:`kubescale.kube.connection_report`) — else ``level``."""
    unreachable = isinstance(err, KubeTransportError) or (
        isinstance(err, KubeApiError) and err.code == 401
    )
    return logging.DEBUG if unreachable else level
