"""Shared checks for informer tests: a handler log that flags duplicates, and mirror polling."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubescale.kube.client import KubeClient
from kubescale.kube.indexes import object_key
from kubescale.kube.informer import EventHandlers, Informer


def _rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


class HandlerLog:
    """Replays handler calls into a model; any call that is not exactly one change is a violation.

    A duplicate ADD (key already known), an update whose old object is not the last one seen or
    whose resourceVersion did not change, and a delete of an unknown key are all recorded.
    """

    def __init__(self) -> None:
        self.model: dict[str, str] = {}
        self.uids: dict[str, str] = {}
        self.calls: list[tuple[str, str]] = []
        self.violations: list[str] = []

    def handlers(self) -> EventHandlers[dict[str, Any]]:
        return EventHandlers(on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete)

    def on_add(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        self.calls.append(("add", key))
        if key in self.model:
            self.violations.append(f"duplicate add of {key}")
        self.model[key] = _rv(obj)
        self.uids[key] = obj["metadata"]["uid"]

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        key = object_key(new)
        self.calls.append(("update", key))
        if key not in self.model:
            self.violations.append(f"update of unknown {key}")
        elif self.model[key] != _rv(old):
            self.violations.append(f"update of {key} from {_rv(old)}, last seen {self.model[key]}")
        if _rv(old) == _rv(new):
            self.violations.append(f"no-op update of {key} at {_rv(new)}")
        if old["metadata"]["uid"] != new["metadata"]["uid"]:
            self.violations.append(f"update of {key} across a uid change")
        self.model[key] = _rv(new)

    def on_delete(self, obj: dict[str, Any]) -> None:
        key = object_key(obj)
        self.calls.append(("delete", key))
        if key not in self.model:
            self.violations.append(f"delete of unknown {key}")
        self.model.pop(key, None)
        self.uids.pop(key, None)


def cache_state(informer: Informer[Any]) -> dict[str, str]:
    return {object_key(obj): _rv(obj) for obj in informer.cache.values()}


async def server_state(
    client: KubeClient, informer: Informer[Any], *, label_selector: str | None = None
) -> dict[str, str]:
    fresh = await client.list_all(
        informer.resource, namespace=informer.namespace, label_selector=label_selector
    )
    return {object_key(obj): _rv(obj) for obj in fresh.items}


async def eventually(
    check: Callable[[], Any], *, limit: float = 5.0, interval: float = 0.01
) -> None:
    """Poll (real time) until ``check()`` (sync or async) is truthy; fail after ``limit``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        assert loop.time() < deadline, "condition not reached in time"
        await asyncio.sleep(interval)


async def assert_mirrors(
    client: KubeClient,
    informer: Informer[Any],
    *,
    log: HandlerLog | None = None,
    label_selector: str | None = None,
    limit: float = 5.0,
) -> None:
    """The cache (and the handler model) converge on exactly what a fresh list returns."""

    async def same() -> bool:
        expected = await server_state(client, informer, label_selector=label_selector)
        return cache_state(informer) == expected and (log is None or log.model == expected)

    try:
        await eventually(same, limit=limit)
    finally:
        expected = await server_state(client, informer, label_selector=label_selector)
        assert cache_state(informer) == expected
        if log is not None:
            assert log.model == expected
            assert log.violations == []
