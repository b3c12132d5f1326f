"""The leader-election record on a ``coordination.k8s.io/v1`` Lease, and the timing rules.

Pure functions over raw Lease dicts, shared by :mod:`kubescale.kube.leader_election` (the campaign)
and the configuration that validates its settings before an elector exists:

- The record is the Lease's ``spec`` (client-go ``LeaseLock`` maps ``LeaderElectionRecord``
  onto it): ``holderIdentity``, ``leaseDurationSeconds`` (whole seconds), ``acquireTime``,
  ``renewTime`` and ``leaseTransitions``. A write replaces the spec fields of the last read
  object and keeps its metadata, so the update carries that object's ``resourceVersion``.
- Times are ``metav1.MicroTime``: the ``2006-01-02T15:04:05.000000Z07:00`` layout the API
  server parses (``datetime.isoformat()`` is not it), always in UTC.
- Release (client-go ``release()``) writes an empty holder with ``leaseDurationSeconds: 1``.
- Timing: ``NewLeaderElector`` requires ``LeaseDuration > RenewDeadline >
  JitterFactor·RetryPeriod > 0`` with ``JitterFactor = 1.2``; a violation is a ``ValueError``
  naming the setting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubescale.objects.views import optional_spec_of

__all__ = [
    "JITTER_FACTOR",
    "RELEASED_LEASE_SECONDS",
    "format_micro_time",
    "holder_record",
    "lease_spec",
    "new_lease",
    "released_record",
    "spec_int",
    "validate_timing",
    "with_record",
]

JITTER_FACTOR = 1.2
"""client-go ``JitterFactor``: acquire tries are ``RetryPeriod · [1, 1 + 1.2)`` apart."""
RELEASED_LEASE_SECONDS = 1
"""``leaseDurationSeconds`` written on release (client-go ``release()``)."""


def format_micro_time(moment: datetime) -> str:
    """A ``metav1.MicroTime`` as serialised by the API server: RFC 3339, 6 fraction digits, UTC."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def validate_timing(*, lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """client-go ``NewLeaderElector``'s checks, in its order."""
    if lease_duration <= renew_deadline:
        raise ValueError(
            f"lease_duration ({lease_duration}) must be greater than "
            f"renew_deadline ({renew_deadline})"
        )
    if renew_deadline <= JITTER_FACTOR * retry_period:
        raise ValueError(
            f"renew_deadline ({renew_deadline}) must be greater than "
            f"retry_period*{JITTER_FACTOR} ({JITTER_FACTOR * retry_period})"
        )
    for setting, value in (
        ("lease_duration", lease_duration),
        ("renew_deadline", renew_deadline),
        ("retry_period", retry_period),
    ):
        if not value > 0:
            raise ValueError(f"{setting} must be greater than zero, got {value}")


def lease_spec(lease: Mapping[str, Any] | None) -> dict[str, Any]:
    """The record of a Lease (a copy of its ``spec``; ``{}`` when there is none)."""
    spec = optional_spec_of(lease) if lease is not None else None
    return dict(spec) if spec is not None else {}


def spec_int(spec: Mapping[str, Any], key: str) -> int:
    """An integer field of a record (``leaseDurationSeconds``, ``leaseTransitions``), else 0."""
    value = spec.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def holder_record(
    *,
    identity: str,
    lease_duration: float,
    now: datetime,
    acquire_time: str | None,
    transitions: int,
) -> dict[str, Any]:
    """The record a holder writes: renewed ``now``, acquired at ``acquire_time`` (else now)."""
    renewed = format_micro_time(now)
    return {
        "holderIdentity": identity,
        # leaseDurationSeconds is whole seconds; round up so nobody waits less than we mean.
        "leaseDurationSeconds": math.ceil(lease_duration),
        "acquireTime": acquire_time or renewed,
        "renewTime": renewed,
        "leaseTransitions": transitions,
    }


def released_record(*, now: datetime, transitions: int) -> dict[str, Any]:
    """The record client-go ``release()`` writes: no holder, a 1 s lease, times now."""
    released = format_micro_time(now)
    return {
        "holderIdentity": "",
        "leaseDurationSeconds": RELEASED_LEASE_SECONDS,
        "acquireTime": released,
        "renewTime": released,
        "leaseTransitions": transitions,
    }


def with_record(lease: Mapping[str, Any], record: Mapping[str, Any]) -> dict[str, Any]:
    """``LeaseLock.Update``: ``lease`` with ``record`` over its spec, metadata (RV) kept."""
    updated = dict(lease)
    updated["spec"] = {**lease_spec(lease), **record}
    return updated


def new_lease(*, namespace: str, name: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """``LeaseLock.Create``: a Lease holding ``record``."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": dict(record),
    }
