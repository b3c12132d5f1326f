"""Pods and their containers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, cast

from kubescale.objects.pod import Pod
from tests.builders.meta import manifest, metadata


def container(
    name: str = "app",
    *,
    image: str | None = None,
    requests: Mapping[str, str] | None = None,
    limits: Mapping[str, str] | None = None,
    resources: Mapping[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """A container; ``requests``/``limits`` fill ``resources`` (``resources`` gives it whole,
    e.g. ``{}``); ``fields`` are further container fields (``ports``, ``restartPolicy``, …)."""
    body: dict[str, Any] = {"name": name}
    if image is not None:
        body["image"] = image
    if resources is not None:
        body["resources"] = dict(resources)
    elif requests is not None or limits is not None:
        body["resources"] = {}
        if requests is not None:
            body["resources"]["requests"] = dict(requests)
        if limits is not None:
            body["resources"]["limits"] = dict(limits)
    body.update(fields)
    return body


DEFAULT_CONTAINERS: tuple[Mapping[str, Any], ...] = ({"name": "app"},)
"""One container ``app`` with no other field (each pod gets its own copy)."""


def pod(
    *,
    name: str | None = "web-0",
    namespace: str | None = "default",
    uid: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_references: Sequence[Mapping[str, Any]] | None = None,
    creation_timestamp: str | None = None,
    deletion_timestamp: str | None = None,
    metadata_extra: Mapping[str, Any] | None = None,
    containers: Sequence[Mapping[str, Any]] | None = DEFAULT_CONTAINERS,
    init_containers: Sequence[Mapping[str, Any]] | None = None,
    node_name: str | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = "v1",
) -> dict[str, Any]:
    """A Pod. ``containers`` defaults to one container ``app`` with no other field (``None``
    leaves ``containers`` out); ``spec``
    adds (or overrides) further spec fields after ``containers``/``initContainers``/
    ``nodeName``; ``status`` is left out unless given; ``api_version=None`` leaves out the type
    fields."""
    body: dict[str, Any] = {}
    if containers is not None:
        body["containers"] = [dict(c) for c in containers]
    if init_containers is not None:
        body["initContainers"] = [dict(c) for c in init_containers]
    if node_name is not None:
        body["nodeName"] = node_name
    body.update(spec or {})
    meta = metadata(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        owner_references=owner_references,
        creation_timestamp=creation_timestamp,
        deletion_timestamp=deletion_timestamp,
        extra=metadata_extra,
    )
    return manifest(
        api_version,
        "Pod",
        meta,
        spec=body,
        status=dict(status) if status is not None else None,
    )


P = ParamSpec("P")


def _typed(build: Callable[P, dict[str, Any]]) -> Callable[P, Pod]:
    def typed(*args: P.args, **kwargs: P.kwargs) -> Pod:
        # the builder assembles JSON from untyped pieces (a test may pass malformed ones on
        # purpose): typed here, where it enters the test, as the informer types what the API
        # server sends
        return cast(Pod, build(*args, **kwargs))

    return typed


typed_pod = _typed(pod)
""":func:`pod` (same parameters), typed as the :class:`~kubescale.objects.pod.Pod` TypedDict
for code that reads pods typed (the cluster autoscaler)."""
