"""The typed facade the loops use: verbs on raw dicts, keyed by ResourceType.

:class:`KubeClient` is what the rest of kubescale holds: ``get``/``list``/``create``/``update``/
``update_status``/``patch`` (JSON, merge or strategic)/``delete``/``evict``/``scale`` on raw
JSON dicts, each URL built from a :class:`~kubescale.kube.resources.ResourceType` (so CRD kinds need
nothing special). Every call goes through :class:`kubescale.kube.transport.Transport`, the single
place where retries (429 Retry-After, 5xx, transport errors), the request-latency histogram and the
conversion of error responses into :class:`~kubescale.kube.errors.KubeApiError` live.

:func:`connect` builds one from a kubeconfig or the pod's service account
(:mod:`kubescale.kube.config_loading`).
"""

from __future__ import annotations

import copy
import random
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry

from kubescale.base.clock import Clock, RealClock
from kubescale.kube.api_paths import ApiPath
from kubescale.kube.config_loading import InClusterPaths, load_configuration
from kubescale.kube.connection import ApiClient, Configuration
from kubescale.kube.errors import NotLeaderError
from kubescale.kube.resources import PODS, ResourceType
from kubescale.kube.transport import (
    JSON,
    ClientMetrics,
    ClientSettings,
    Transport,
    send_gate_trace,
)
from kubescale.kube.watch_stream import MAX_WATCH_EVENT_BYTES, WatchStream
from kubescale.objects.views import Meta, list_meta

__all__ = ["ClientSettings", "KubeClient", "ListResult", "PatchType", "connect"]

PatchType = Literal["json", "merge", "strategic"]
_READ_VERBS = frozenset({"get", "list", "watch"})
PATCH_CONTENT_TYPES: Mapping[str, str] = {
    "json": "application/json-patch+json",
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


@dataclass(frozen=True)
class ListResult:
    """All items of a (possibly paged) list and the resourceVersion to watch from."""

    items: list[dict[str, Any]]
    resource_version: str


def resolve_proxy_once(
    configuration: Configuration, *, proxies: Mapping[str, str] | None = None
) -> None:
    """Read the proxy environment once, here, instead of on every request.

    A session with aiohttp's ``trust_env=True`` (the connection's default, as ``kubernetes.aio``'s)
    looks up on every request
    ``~/.netrc`` and ``HTTPS_PROXY``/``NO_PROXY`` in a worker thread: two thread hand-offs, about
    1 ms of CPU per request (half of a checkpoint write's cost at 10,000 writes per pass). The
    environment does not change under a running process, so the proxy client-go would use
    (``http.ProxyFromEnvironment``: the scheme's ``*_PROXY`` unless ``NO_PROXY`` names the host)
    is resolved once into ``configuration.proxy`` and the session stops trusting the
    environment. A proxy set in the kubeconfig (``proxy-url``) wins; ``~/.netrc`` credentials are
    not used for the API server (client-go does not read it either)."""
    if configuration.client_session_kwargs:
        return  # someone configured the session already: leave it alone
    if not configuration.proxy:
        found = urllib.request.getproxies() if proxies is None else proxies
        target = urlsplit(str(configuration.host or ""))
        proxy = found.get(target.scheme or "https")
        no_proxy = found.get("no")
        if proxy and not _bypassed(target.hostname or "", no_proxy):
            configuration.proxy = proxy
    configuration.client_session_kwargs = {"trust_env": False}


def _bypassed(host: str, no_proxy: str | None) -> bool:
    """Go's ``NO_PROXY`` matching, as far as it matters for one API server host: ``*``, an
    exact name or IP, or a domain suffix (``.example.com`` or ``example.com``)."""
    if not no_proxy:
        return False
    host = host.lower().strip("[]")
    for entry in (part.strip().lower() for part in no_proxy.split(",")):
        if not entry:
            continue
        if entry == "*":
            return True
        name = entry.split(":")[0] if entry.count(":") == 1 else entry
        bare = name.lstrip(".")
        if host == bare or host.endswith("." + bare):
            return True
    return False


def _name_namespace(obj: Mapping[str, Any]) -> tuple[str, str | None]:
    meta = Meta(obj).raw
    name = meta.get("name")
    if not name:
        raise ValueError("object has no metadata.name")
    return str(name), meta.get("namespace")


class KubeClient:
    """Verbs on raw dicts by ResourceType; retries and metrics in its :class:`Transport`."""

    def __init__(
        self,
        *,
        api_client: ApiClient,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        settings: ClientSettings | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.transport = Transport(
            api_client=api_client,
            clock=clock or RealClock(),
            registry=registry,
            settings=settings,
            rng=rng,
        )
        self.write_gate: Callable[[], bool] | None = None
        """When set, every attempt of a request other than get/list/watch is refused
        (``NotLeaderError``) unless it returns true at that moment."""

    def gated(self, gate: Callable[[], bool]) -> KubeClient:
        """A client sharing this one's connection whose writes need ``gate()`` to be true at
        the moment each is sent (leader-only loops get one gated on holding the Lease)."""
        view = copy.copy(self)
        view.write_gate = gate
        return view

    @classmethod
    def from_configuration(
        cls,
        configuration: Configuration,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        settings: ClientSettings | None = None,
        rng: random.Random | None = None,
    ) -> KubeClient:
        resolve_proxy_once(configuration)
        configuration.trace_configs = [*configuration.trace_configs, send_gate_trace()]
        return cls(
            api_client=ApiClient(configuration=configuration),
            clock=clock,
            registry=registry,
            settings=settings,
            rng=rng,
        )

    @property
    def api_client(self) -> ApiClient:
        return self.transport.api_client

    @property
    def clock(self) -> Clock:
        return self.transport.clock

    @property
    def rng(self) -> random.Random:
        return self.transport.rng

    @property
    def settings(self) -> ClientSettings:
        return self.transport.settings

    @property
    def metrics(self) -> ClientMetrics:
        return self.transport.metrics

    async def close(self) -> None:
        await self.transport.close()

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(
        self,
        *,
        verb: str,
        method: str,
        resource: ResourceType,
        path: ApiPath,
        subresource: str = "",
        query: Sequence[tuple[str, str]] = (),
        body: Any = None,
        content_type: str = JSON,
        idempotent: bool = True,
        retry_throttled: bool = True,
    ) -> dict[str, Any]:
        """Any request, through the transport (see :meth:`Transport.request`)."""
        gate = self.write_gate
        check: Callable[[], None] | None = None
        if gate is not None and verb not in _READ_VERBS:
            what = f"{verb} {resource.plural}{'/' + subresource if subresource else ''}"

            def check() -> None:
                if not gate():
                    raise NotLeaderError(
                        f"{what} refused: this replica does not hold the leader Lease"
                    )

        return await self.transport.request(
            verb=verb,
            method=method,
            resource=resource,
            path=path,
            subresource=subresource,
            query=query,
            body=body,
            content_type=content_type,
            idempotent=idempotent,
            retry_throttled=retry_throttled,
            before_send=check,
        )

    async def open_watch(
        self,
        resource: ResourceType,
        *,
        namespace: str | None,
        query: Sequence[tuple[str, str]],
        inactivity_timeout: float,
        connect_timeout: float | None = None,
        max_event_bytes: int = MAX_WATCH_EVENT_BYTES,
    ) -> WatchStream:
        """Open a watch (see :meth:`Transport.open_watch`)."""
        return await self.transport.open_watch(
            resource,
            namespace=namespace,
            query=query,
            inactivity_timeout=inactivity_timeout,
            connect_timeout=connect_timeout,
            max_event_bytes=max_event_bytes,
        )

    # -- verbs -------------------------------------------------------------------------------

    async def get(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        return await self.request(
            verb="get",
            method="GET",
            resource=resource,
            subresource=subresource,
            path=resource.object_path(name, namespace, subresource),
        )

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        """One page of a list: the raw ``<Kind>List`` object."""
        query: list[tuple[str, str]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        if resource_version is not None:
            query.append(("resourceVersion", resource_version))
        return await self.request(
            verb="list",
            method="GET",
            resource=resource,
            path=resource.collection_path(namespace),
            query=query,
        )

    async def list_all(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int | None = 500,
        transform: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    ) -> ListResult:
        """Every item, following ``continue`` tokens; a consistent read (no resourceVersion).

        An expired continue token (410) propagates: the caller restarts the whole list, as
        client-go's pager does when it cannot fall back to a full list. ``transform`` is
        applied to each page's items as the page arrives (an informer's projection), so the
        decoded pages are released one by one instead of all being held until the end.
        """
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = await self.list(
                resource,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=page_size,
                continue_token=token,
            )
            got: list[dict[str, Any]] = page.get("items") or []
            items.extend(got if transform is None else [transform(item) for item in got])
            meta = list_meta(page)
            token = meta.get("continue") or None
            if not token:
                return ListResult(
                    items=items, resource_version=str(meta.get("resourceVersion", ""))
                )

    async def create(
        self,
        resource: ResourceType,
        obj: Mapping[str, Any],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        meta = Meta(obj).raw
        ns = namespace if namespace is not None else meta.get("namespace")
        if resource.namespaced and not ns:
            raise ValueError(f"{resource.kind} is namespaced: a namespace is required")
        body = dict(obj)
        body.setdefault("apiVersion", resource.group_version)
        body.setdefault("kind", resource.kind)
        return await self.request(
            verb="create",
            method="POST",
            resource=resource,
            path=resource.collection_path(ns if resource.namespaced else None),
            body=body,
            idempotent=bool(meta.get("name")),
        )

    async def update(self, resource: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
        """PUT the whole object; its ``metadata.resourceVersion`` makes it conditional (409)."""
        name, ns = _name_namespace(obj)
        return await self.request(
            verb="update",
            method="PUT",
            resource=resource,
            path=resource.object_path(name, ns),
            body=dict(obj),
        )

    async def update_status(self, resource: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
        name, ns = _name_namespace(obj)
        return await self.request(
            verb="update",
            method="PUT",
            resource=resource,
            subresource="status",
            path=resource.object_path(name, ns, "status"),
            body=dict(obj),
        )

    async def patch(
        self,
        resource: ResourceType,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = "merge",
        subresource: str = "",
    ) -> dict[str, Any]:
        return await self.request(
            verb="patch",
            method="PATCH",
            resource=resource,
            subresource=subresource,
            path=resource.object_path(name, namespace, subresource),
            body=patch,
            content_type=PATCH_CONTENT_TYPES[patch_type],
            idempotent=patch_type != "json",
        )

    async def delete(
        self,
        resource: ResourceType,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> dict[str, Any]:
        """DELETE with optional preconditions; returns the Status or the deleted object."""
        body = _delete_options(
            uid=uid,
            resource_version=resource_version,
            propagation_policy=propagation_policy,
            grace_period_seconds=grace_period_seconds,
        )
        return await self.request(
            verb="delete",
            method="DELETE",
            resource=resource,
            path=resource.object_path(name, namespace),
            body=body,
        )

    async def evict(
        self,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        grace_period_seconds: int | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """POST ``pods/<name>/eviction`` (policy/v1); a PDB refusal is a 429 KubeApiError.
        ``annotations`` go on the Eviction's metadata (the descheduler's ``reason`` and
        ``requested-by``).

        A 429 from an eviction means "a disruption budget forbids it now" (``DisruptionBudget``
        cause), not throttling, so it is returned at once rather than retried; 5xx and transport
        errors are retried (evicting twice is harmless: the second finds the pod gone).
        """
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            metadata["annotations"] = dict(annotations)
        eviction: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": metadata,
        }
        options = _delete_options(
            uid=uid,
            resource_version=None,
            propagation_policy=None,
            grace_period_seconds=grace_period_seconds,
        )
        if options:
            eviction["deleteOptions"] = options
        return await self.request(
            verb="create",
            method="POST",
            resource=PODS,
            subresource="eviction",
            path=PODS.object_path(name, namespace, "eviction"),
            body=eviction,
            retry_throttled=False,
        )

    async def get_scale(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        return await self.get(resource, name, namespace=namespace, subresource="scale")

    async def scale(
        self, resource: ResourceType, name: str, *, namespace: str | None = None, replicas: int
    ) -> dict[str, Any]:
        """Set ``spec.replicas`` through the scale subresource (merge patch, works for CRDs)."""
        return await self.patch(
            resource,
            name,
            {"spec": {"replicas": replicas}},
            namespace=namespace,
            patch_type="merge",
            subresource="scale",
        )


def _delete_options(
    *,
    uid: str | None,
    resource_version: str | None,
    propagation_policy: str | None,
    grace_period_seconds: int | None,
) -> dict[str, Any] | None:
    preconditions = {
        k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v is not None
    }
    body: dict[str, Any] = {}
    if preconditions:
        body["preconditions"] = preconditions
    if propagation_policy is not None:
        body["propagationPolicy"] = propagation_policy
    if grace_period_seconds is not None:
        body["gracePeriodSeconds"] = grace_period_seconds
    if not body:
        return None
    return {"apiVersion": "v1", "kind": "DeleteOptions", **body}


async def connect(
    *,
    kubeconfig: Path | None,
    context: str | None = None,
    clock: Clock | None = None,
    registry: CollectorRegistry | None = None,
    settings: ClientSettings | None = None,
    rng: random.Random | None = None,
    environ: Mapping[str, str] | None = None,
    in_cluster_paths: InClusterPaths | None = None,
) -> KubeClient:
    """A client for the cluster named by ``kubeconfig``/``context``, or the one we run in.

    See :mod:`kubescale.kube.config_loading` for the lookup order and in-cluster token refresh.
    """
    clock = clock or RealClock()
    configuration = await load_configuration(
        kubeconfig=kubeconfig,
        context=context,
        clock=clock,
        environ=environ,
        in_cluster_paths=in_cluster_paths,
    )
    return KubeClient.from_configuration(
        configuration, clock=clock, registry=registry, settings=settings, rng=rng
    )
