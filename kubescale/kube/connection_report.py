"""One line per backoff step while the API server cannot be reached, not one per request.

When the API server is down, unreachable or refuses kubescale's credentials, every informer,
every loop and the leader elector fail at once and keep retrying; logging each failure gives
hundreds of lines a minute that all say the same thing. The transport reports every outcome
here instead (:class:`ConnectionReport`, one per client): the first failure is logged at once
as one warning naming the server and the cause; while failures go on, one more warning per
step of a capped exponential backoff (``first_step`` doubling up to ``max_step``) says they
still do and how many requests failed since; the first success after a failure is logged once
("reachable again"). Callers log their own retries of connection errors at debug level.

A pure state machine on the injected clock: :meth:`ConnectionReport.failure` and
:meth:`ConnectionReport.success` return the line to log (or ``None``), the transport logs it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ConnectionReport", "describe_cause"]


def describe_cause(error: BaseException) -> str:
    """A short cause for a transport error: ``Connection refused``, ``timed out``, the TLS
    failure — without the client library's object reprs."""
    cause: BaseException | None = error
    seen = 0
    while cause is not None and seen < 5:
        if isinstance(cause, TimeoutError):
            return "timed out"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        os_error = getattr(cause, "os_error", None)
        if isinstance(os_error, ConnectionRefusedError):
            return "connection refused"
        if isinstance(os_error, OSError) and os_error.strerror:
            return str(os_error.strerror).lower()
        cert_error = getattr(cause, "certificate_error", None)
        if cert_error is not None:
            return f"TLS: {getattr(cert_error, 'verify_message', None) or cert_error}"
        cause = cause.__cause__ or cause.__context__
        seen += 1
    text = str(error).strip() or type(error).__name__
    return text if len(text) <= 200 else text[:199] + "…"


@dataclass
class ConnectionReport:
    """Whether the API server is reachable, and which failure lines are worth logging."""

    server: str
    """The server's URL, named in every line."""
    first_step: float = 1.0
    max_step: float = 300.0
    failing_since: float | None = None
    failures: int = 0
    """Failed requests since the last line logged."""
    total_failures: int = 0
    _next_line_at: float = 0.0
    _step: float = 0.0

    def failure(self, cause: str, *, now: float) -> str | None:
        """A request failed for ``cause``; the line to log now, if any."""
        self.failures += 1
        self.total_failures += 1
        if self.failing_since is None:
            self.failing_since = now
            self._step = self.first_step
            self._next_line_at = now + self._step
            self.failures = 0
            return (
                f"requests to the API server at {self.server} fail: {cause}; retrying with backoff"
            )
        if now < self._next_line_at:
            return None
        self._step = min(self._step * 2, self.max_step)
        self._next_line_at = now + self._step
        count, self.failures = self.failures, 0
        return (
            f"requests to the API server at {self.server} still fail after "
            f"{now - self.failing_since:.0f}s: {cause} ({count} more failed requests; "
            f"next report in {self._step:.0f}s or later)"
        )

    def success(self, *, now: float) -> str | None:
        """A request got an answer; the line to log if failures preceded it."""
        if self.failing_since is None:
            return None
        line = (
            f"the API server at {self.server} answers again after "
            f"{now - self.failing_since:.0f}s ({self.total_failures} failed requests)"
        )
        self.failing_since = None
        self.failures = 0
        self.total_failures = 0
        return line
