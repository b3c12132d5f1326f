"""Resolving an HPA's ``scaleTargetRef`` to the resource whose ``/scale`` is read and written.

Upstream maps the reference's group and kind through the RESTMapper (every version of the
kind) and tries each mapping's ``/scale`` in turn (reference §2.1). Here: the catalogue's types
of that group and kind first, else the API server's discovery document for the reference's
group version (so a custom resource with a ``scale`` subresource works); answers are cached
per group version and kind for ``freshness`` seconds (bounded to ``max_entries``).

Errors read as upstream's: ``unexpected GroupVersion string: <v>`` for an unparsable
apiVersion, ``no matches for kind "<k>" in group "<g>"`` for an unknown kind.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final, cast

from kubescale.kube.api_paths import InvalidPathSegment, api_path
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import ALL, DEPLOYMENTS, REPLICA_SETS, STATEFUL_SETS, ResourceType
from kubescale.objects.deployment import Deployment
from kubescale.objects.meta import ObjectMeta
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.scale import Scale, ScaleStatus
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.objects.stateful_set import StatefulSet
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = [
    "CACHED_WORKLOADS",
    "ScaleTargetError",
    "ScaleTargets",
    "scale_view",
    "split_api_version",
]

CACHED_WORKLOADS: Final = (DEPLOYMENTS, STATEFUL_SETS, REPLICA_SETS)
"""Built-in workloads whose Scale is read from the informer cache: the ``/scale`` view is
computed from the object, so the answer is the one ``GET /scale`` gives."""

_MAX_ENTRIES: Final = 1024


class ScaleTargetError(Exception):
    """The reference cannot be mapped; the message is upstream's error text."""


def split_api_version(api_version: str) -> tuple[str, str]:
    """``schema.ParseGroupVersion``: ``v1`` → ("", "v1"), ``apps/v1`` → ("apps", "v1")."""
    if not api_version:
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ScaleTargetError(f"unexpected GroupVersion string: {api_version}")


class ScaleTargets:
    """Reference → resource types, cached (module docstring)."""

    def __init__(self, client: KubeClient, *, freshness: float = 600.0) -> None:
        self.client = client
        self.freshness = freshness
        self._cache: OrderedDict[tuple[str, str], tuple[float, tuple[ResourceType, ...]]] = (
            OrderedDict()
        )

    async def resolve(self, api_version: str, kind: str) -> tuple[ResourceType, ...]:
        group, version = split_api_version(api_version)
        catalogued = tuple(rt for rt in ALL if rt.group == group and rt.kind == kind)
        if catalogued:
            return catalogued
        key = (api_version, kind)
        now = self.client.clock.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] + self.freshness > now:
            self._cache.move_to_end(key)
            found = cached[1]
        else:
            found = await self._discover(group, version, kind)
            self._cache[key] = (now, found)
            self._cache.move_to_end(key)
            while len(self._cache) > _MAX_ENTRIES:
                self._cache.popitem(last=False)
        if not found:
            raise ScaleTargetError(f'no matches for kind "{kind}" in group "{group}"')
        return found

    async def current_scale(
        self, api_version: str, kind: str, *, name: str, namespace: str, informers: InformerSet
    ) -> tuple[Scale, ResourceType]:
        """The target's Scale and the resource it was read from: from the informer cache for
        :data:`CACHED_WORKLOADS`, else ``GET /scale`` on each mapping in turn (the first error is
        raised when every mapping fails). A cached workload is never read with ``GET /scale``
        (the ClusterRole grants ``apps`` scale ``patch`` only): while its cache is not synced the
        answer is an error, as a loop does not decide on an unsynced cache."""
        resources = await self.resolve(api_version, kind)
        for resource in resources:
            if resource in CACHED_WORKLOADS:
                informer = informers.informer(resource)
                if not informer.synced:
                    raise KubeApiError(
                        code=503,
                        reason="ServiceUnavailable",
                        message=f"the {resource.plural}.{resource.group} cache has not synced",
                    )
                obj = informer.lister.get(name, namespace)
                if obj is None:
                    raise KubeApiError(
                        code=404,
                        reason="NotFound",
                        message=f'{resource.plural}.{resource.group} "{name}" not found',
                    )
                return scale_view(obj), resource
        error: KubeError | None = None
        for resource in resources:
            try:
                scale = await self.client.get_scale(resource, name, namespace=namespace)
            except KubeError as err:
                error = error or err
                continue
            # the API server's autoscaling/v1 Scale; read through ScaleSpec/ScaleStatus
            return cast(Scale, scale), resource
        assert error is not None
        raise error

    async def _discover(self, group: str, version: str, kind: str) -> tuple[ResourceType, ...]:
        if not version:
            return ()
        try:
            path = api_path(group=group, version=version)
        except InvalidPathSegment as err:
            raise ScaleTargetError(str(err)) from err
        placeholder = ResourceType(
            group=group, version=version, kind="APIResourceList", plural="", namespaced=False
        )
        try:
            document = await self.client.request(
                verb="get", method="GET", resource=placeholder, path=path
            )
        except KubeApiError as err:
            if err.not_found:
                return ()
            raise
        except KubeError:
            raise
        entries: list[object] = list(document.get("resources") or [])
        names = {str(e.get("name") or "") for e in entries if isinstance(e, dict)}
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            name = str(entry.get("name") or "")
            if "/" in name or entry.get("kind") != kind:
                continue
            subresources = frozenset(n.split("/", 1)[1] for n in names if n.startswith(name + "/"))
            return (
                ResourceType(
                    group=group,
                    version=version,
                    kind=kind,
                    plural=name,
                    namespaced=bool(entry.get("namespaced", True)),
                    subresources=subresources,
                ),
            )
        return ()


def scale_view(obj: Deployment | StatefulSet | ReplicaSet) -> Scale:
    """The ``autoscaling/v1`` Scale of a Deployment, StatefulSet or ReplicaSet: its replicas,
    status replicas and ``spec.selector`` as selector text."""
    meta = Meta(obj).raw
    spec = spec_of(obj)
    selector = ""
    try:
        raw = spec.get("selector")
        selector = str(label_selector_from_dict(raw)) if raw is not None else ""
    except SelectorError:
        selector = ""
    status = ScaleStatus(replicas=int(status_of(obj).get("replicas") or 0))
    if selector:
        status["selector"] = selector
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        # the workload's own name, namespace and uid (ObjectMeta fields, copied as they are)
        "metadata": cast(
            ObjectMeta, {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}
        ),
        "spec": {"replicas": int(spec.get("replicas") or 0)},
        "status": status,
    }
