"""Go's ``time.Time.String()``, as upstream cluster-autoscaler writes some timestamps.

:func:`go_time_string` — ``time.Time.String()`` without the monotonic suffix, i.e. layout
``2006-01-02 15:04:05.999999999 -0700 MST`` (fraction with trailing zeros dropped): the status
ConfigMap's ``time`` and ``last-updated`` annotation, the ``delete-machine`` annotation value.
(``metav1.Time`` is :func:`kubescale.base.times.format_time`.)

Times are shown in UTC (zone abbreviation ``UTC``), as a process running with ``TZ=UTC`` does.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["go_time_string"]


def go_time_string(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S")
    if utc.microsecond:
        text += "." + f"{utc.microsecond * 1000:09d}".rstrip("0")
    return text + " +0000 UTC"
