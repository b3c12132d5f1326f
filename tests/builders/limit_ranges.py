"""LimitRanges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubescale.objects.limit_range import LimitRange
from tests.builders.meta import manifest, metadata, typed_builder


def limit_range_item(
    *,
    kind: str = "Container",
    default: Mapping[str, str] | None = None,
    default_request: Mapping[str, str] | None = None,
    maximum: Mapping[str, str] | None = None,
    minimum: Mapping[str, str] | None = None,
    max_limit_request_ratio: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    item: dict[str, Any] = {"type": kind}
    for key, value in (
        ("default", default),
        ("defaultRequest", default_request),
        ("max", maximum),
        ("min", minimum),
        ("maxLimitRequestRatio", max_limit_request_ratio),
    ):
        if value is not None:
            item[key] = dict(value)
    return item


def limit_range(
    *,
    name: str = "limits",
    namespace: str | None = "default",
    items: Sequence[Mapping[str, Any]] = (),
    api_version: str | None = "v1",
) -> dict[str, Any]:
    """A LimitRange with ``spec.limits`` = ``items``."""
    meta = metadata(name=name, namespace=namespace)
    return manifest(api_version, "LimitRange", meta, spec={"limits": [dict(i) for i in items]})


typed_limit_range = typed_builder(limit_range, LimitRange)
