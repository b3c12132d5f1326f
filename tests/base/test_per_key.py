"""``PerKey``: one value per live key, made once, released with the key."""

from __future__ import annotations

import gc

from prometheus_client import CollectorRegistry

from kubescale.base.per_key import PerKey


def test_one_value_per_key_made_on_first_use() -> None:
    made: list[CollectorRegistry] = []

    def make(registry: CollectorRegistry) -> list[CollectorRegistry]:
        made.append(registry)
        return [registry]

    per_registry: PerKey[CollectorRegistry, list[CollectorRegistry]] = PerKey(make)
    first, second = CollectorRegistry(), CollectorRegistry()
    value = per_registry(first)
    assert per_registry(first) is value  # the same value, not made again
    assert per_registry(second) is not value
    assert made == [first, second]


def test_a_dropped_key_releases_its_value() -> None:
    per_registry: PerKey[CollectorRegistry, object] = PerKey(lambda _registry: object())
    registry = CollectorRegistry()
    per_registry(registry)
    assert len(per_registry._values) == 1
    del registry
    gc.collect()
    assert len(per_registry._values) == 0
