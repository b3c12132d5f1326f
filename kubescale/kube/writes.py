"""Writes that survive concurrent writers: read, apply the caller's change, conditional update.

An update carries the ``metadata.resourceVersion`` it was computed from, so the API server
refuses it with ``409 Conflict`` if someone else wrote in between (optimistic concurrency).
:func:`update_with_retry` is client-go's ``retry.RetryOnConflict(retry.DefaultRetry, ...)``
pattern: on a conflict it GETs the object again, re-applies the caller's *mutation function* to
the fresh copy and tries again, up to ``ConflictRetry.attempts`` times with a short jittered
pause (``DefaultRetry``: 5 steps of 10 ms, factor 1, jitter 0.1). Other errors, and the last
conflict, propagate. 429/5xx retries happen underneath, in
:class:`~kubescale.kube.client.KubeClient`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import ResourceType
from kubescale.objects.views import Meta

log = component_logger("kube.writes")

Mutation = Callable[[dict[str, Any]], dict[str, Any] | None]
"""Gets a private deep copy of the current object; returns the object to write, or ``None`` when
the object already is as wanted (nothing is written then). Changing the argument in place and
returning it is fine. It may run several times, once per attempt, so it must not have side
effects beyond its argument."""


@dataclass(frozen=True, kw_only=True)
class ConflictRetry:
    """How often to retry after ``409 Conflict`` (client-go ``retry.DefaultRetry``)."""

    attempts: int = 5
    delay: float = 0.01
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")


DEFAULT_CONFLICT_RETRY = ConflictRetry()


async def update_with_retry(
    client: KubeClient,
    resource: ResourceType,
    *,
    name: str,
    namespace: str | None = None,
    mutate: Mutation,
    subresource: Literal["", "status"] = "",
    current: Mapping[str, Any] | None = None,
    retry: ConflictRetry = DEFAULT_CONFLICT_RETRY,
) -> dict[str, Any]:
    """Apply ``mutate`` and update, re-reading and re-applying on conflict.

    ``current`` (e.g. the object from a lister) saves the first GET; a stale one just costs a
    conflict and a re-read. ``subresource="status"`` writes through ``/status``. Returns the
    object as the server stored it (or the current object when ``mutate`` returned ``None``).
    """
    obj: dict[str, Any] = (
        copy.deepcopy(dict(current))
        if current is not None
        else await client.get(resource, name, namespace=namespace)
    )
    attempt = 0
    while True:
        attempt += 1
        desired = mutate(copy.deepcopy(obj))
        if desired is None:
            return obj
        # Keep the write conditional on the version the mutation was computed from.
        meta = desired.setdefault("metadata", {})
        meta["resourceVersion"] = Meta(obj).raw.get("resourceVersion")
        try:
            if subresource == "status":
                return await client.update_status(resource, desired)
            return await client.update(resource, desired)
        except KubeApiError as err:
            if not err.conflict or attempt >= retry.attempts:
                raise
            log.debug(
                "update conflicted; re-reading",
                extra={"fields": {"resource": resource.plural, "name": name, "attempt": attempt}},
            )
        pause = retry.delay * (1.0 + client.rng.random() * retry.jitter)
        await client.clock.sleep(pause)
        obj = await client.get(resource, name, namespace=namespace)
