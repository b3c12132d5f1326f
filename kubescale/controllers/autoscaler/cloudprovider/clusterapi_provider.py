"""The ``clusterapi`` cloud provider: node groups are MachineDeployments and MachineSets.

Reads and writes Cluster API objects exactly as upstream's clusterapi provider does (reference
§4.1; the parsing rules are in :mod:`.clusterapi_annotations`):

* **discovery** — every MachineDeployment, and every MachineSet not owned by one, that passes
  ``--node-group-auto-discovery`` (namespace, cluster name from ``spec.clusterName`` or the
  ``cluster.x-k8s.io/cluster-name`` label, labels), is not paused and has a max size > 0; a
  group at 0 replicas must be able to scale from zero. A resource whose annotations do not parse
  is skipped and reported (:class:`~.cloud_provider.ProviderProblem`) — upstream fails the whole
  ``NodeGroups()`` call instead; one bad resource should not stop the others;
* **instances** — the Machines its ``spec.selector`` selects in its namespace (and cluster);
* **size** — ``TargetSize`` is the cached ``spec.replicas``; ``IncreaseSize``,
  ``DecreaseTargetSize`` and ``DeleteNodes`` read the current size from ``GET .../scale`` and
  write it with a merge patch ``{"spec": {"replicas": n}}`` on ``/scale`` after checking it lies
  in [min, max] (``size increase too large - desired:%d max:%d``);
* **DeleteNodes** — refuses at min size, checks every node belongs to the group and that the
  group stays at or above min; per node, annotates its Machine with
  ``cluster.x-k8s.io/delete-machine: <time>`` (GET then PUT) and decrements the size by one,
  removing the annotation again when the resize fails;
* **rollouts** — a MachineDeployment with an older-revision MachineSet that still has replicas
  is rolling out (``IsMachineDeploymentAndRollingOut``): :attr:`~.cloud_provider.NodeGroup.
  rolling_out`, and none of its nodes is a scale-down candidate (upstream's
  ``ScaleDownNodeUpgradeProcessor``);
* **templates** — a Node built from the scale-from-zero annotations (name
  ``<resource>-asg-template``, labels ``kubernetes.io/{arch,os,hostname}`` + the resource's +
  arch/os/instance-type/region/zone of an existing node of the group), Ready, with the
  kube-proxy pod upstream's ``BuildKubeProxy`` adds (100m cpu).

The Cluster API version is ``CAPI_VERSION``, else the ``CAPI_GROUP`` group's preferred version
in discovery (:mod:`.clusterapi_versions`), found by :meth:`ClusterApiProvider.prepare` before the
first refresh. Reads come from the shared informers (MachineDeployments, MachineSets, Machines at
that version, Nodes); writes go through the client. Kubernetes errors become
:class:`~.cloud_provider.ProviderError`.

Every request to the API server is bounded by the loop's per-iteration budget of time spent
waiting on it (:mod:`.write_deadline`): a ``/scale`` patch or a Machine update left unanswered
raises :class:`~.cloud_provider.WriteOutcomeUnknown` and is not sent again in that iteration —
the next iteration reads the size back from the object; a ``GET`` left unanswered raises
:class:`~.cloud_provider.NothingWritten`. A resize whose outcome is unknown keeps the Machine's
``delete-machine`` mark (the size may have gone down).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final, TypeVar

from kubescale.base.go_time import go_time_string
from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    Instance,
    NodeGroup,
    ProviderError,
    ProviderProblem,
    ProviderSnapshot,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_annotations import (
    DELETE_MACHINE_ANNOTATION,
    DEPLOYMENT_NAME_LABEL,
    PAUSED_ANNOTATION,
    AnnotationError,
    group_id,
    is_real_provider_id,
    machine_instance,
    node_group_options,
    price_per_hour,
    rolling_out,
    scale_from_zero,
    scaling_bounds,
)
from kubescale.controllers.autoscaler.cloudprovider.clusterapi_versions import (
    DEFAULT_CAPI_GROUP,
    CapiTypes,
    CapiVersionError,
    capi_types,
    preferred_version,
)
from kubescale.controllers.autoscaler.cloudprovider.write_deadline import WriteDeadline
from kubescale.controllers.autoscaler.config.autoscaler_settings import (
    AutoDiscoverySpec,
    NodeGroupDefaults,
)
from kubescale.kube.api_paths import API_GROUP_LIST
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.informer import Informer
from kubescale.kube.informer_set import InformerSet
from kubescale.kube.resources import NODES, ResourceType
from kubescale.objects.machine import Machine
from kubescale.objects.machine_deployment import MachineDeployment
from kubescale.objects.machine_set import MachineSet, ScalableResource
from kubescale.objects.meta import ObjectMeta
from kubescale.objects.node import Node, NodeSpec
from kubescale.objects.pod import Pod
from kubescale.objects.selectors import SelectorError, label_selector_from_dict
from kubescale.objects.views import Meta, spec_of, status_of

__all__ = ["CLUSTER_NAME_LABEL", "ClusterApiProvider", "template_node"]

log = component_logger("cluster-autoscaler.clusterapi")

CLUSTER_NAME_LABEL: Final = "cluster.x-k8s.io/cluster-name"
CAPI_SYNC_WAIT: Final = 10.0
"""Seconds (on the client's clock) the first iteration waits for the Cluster API caches it just
declared to list; an iteration that finds them unsynced does nothing."""
REQUESTER: Final = "cluster-autoscaler"
"""The component the Cluster API collections are attributed to (its name)."""
_CAPI_PLURALS: Final = ("machinedeployments", "machinesets", "machines")
_NODE_LABELS_FROM_EXISTING: Final = (
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
)
KUBE_PROXY_CPU: Final = "100m"
T = TypeVar("T")


def _meta(obj: ScalableResource | Machine | Node) -> ObjectMeta:
    return Meta(obj).raw


def _normalized(provider_id: str) -> str:
    """``normalizedProviderString``: everything after the last ``/``."""
    return provider_id.rsplit("/", 1)[-1]


def _cluster_name(resource: ScalableResource | Machine) -> str:
    spec_name = spec_of(resource).get("clusterName")
    if isinstance(spec_name, str):
        return spec_name
    return str((_meta(resource).get("labels") or {}).get(CLUSTER_NAME_LABEL, ""))


def allowed_by_discovery(resource: ScalableResource, specs: Sequence[AutoDiscoverySpec]) -> bool:
    """``allowedByAutoDiscoverySpecs``: no spec allows all; else any spec matching."""
    if not specs:
        return True
    labels = _meta(resource).get("labels") or {}
    for spec in specs:
        if spec.namespace and spec.namespace != _meta(resource).get("namespace"):
            continue
        if spec.cluster_name and spec.cluster_name != _cluster_name(resource):
            continue
        if any(labels.get(k) != v for k, v in spec.labels.items()):
            continue
        return True
    return False


def template_node(
    *,
    resource: ScalableResource,
    existing_node: Node | None,
) -> tuple[Node, tuple[Pod, ...]] | None:
    """``TemplateNodeInfo``: the Node and start-up pods of a new machine; ``None`` when the
    resource cannot scale from zero. Raises :class:`AnnotationError`."""
    hints = scale_from_zero(resource)
    if hints is None:
        return None
    name = f"{_meta(resource).get('name', '')}-asg-template"
    labels: dict[str, str] = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
    }
    labels.update(hints.labels)
    if existing_node is not None:
        node_labels = _meta(existing_node).get("labels") or {}
        for key in _NODE_LABELS_FROM_EXISTING:
            if node_labels.get(key):
                labels[key] = node_labels[key]
    spec: NodeSpec = {}
    if hints.taints:
        spec["taints"] = [t.copy() for t in hints.taints]
    node: Node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "capacity": dict(hints.capacity),
            "allocatable": dict(hints.capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    kube_proxy: Pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"kube-proxy-{_meta(resource).get('name', '')}",
            "namespace": "kube-system",
            "annotations": {
                "kubernetes.io/config.source": "file",
                "kubernetes.io/config.mirror": "1234567890abcdef",
            },
        },
        "spec": {
            "nodeName": name,
            "containers": [
                {
                    "name": "kube-proxy",
                    "image": "kubernetes/kube-proxy",
                    "resources": {"requests": {"cpu": KUBE_PROXY_CPU}},
                }
            ],
        },
        "status": {"phase": "Running"},
    }
    return node, (kube_proxy,)


class ClusterApiProvider:
    """The provider (module docstring); a :class:`~.cloud_provider.CloudProvider`."""

    name = "clusterapi"

    def __init__(
        self,
        *,
        client: KubeClient,
        informers: InformerSet,
        defaults: NodeGroupDefaults,
        discovery: Sequence[AutoDiscoverySpec] = (),
        capi_group: str = DEFAULT_CAPI_GROUP,
        capi_version: str = "",
        deadline: WriteDeadline | None = None,
    ) -> None:
        """``capi_version`` empty: the group's preferred version, from discovery on the first
        :meth:`prepare` (the Cluster API caches are declared then)."""
        self.client = client
        self.deadline = deadline
        """The loop's per-iteration deadline for API calls; ``None``: the client's own."""
        self.defaults = defaults
        self.discovery = tuple(discovery)
        self.capi_group = capi_group
        self._informers = informers
        self.types: CapiTypes | None = None
        self._caches: (
            tuple[Informer[MachineDeployment], Informer[MachineSet], Informer[Machine]] | None
        ) = None
        if capi_version:
            self._declare(capi_types(capi_group, capi_version))
        self.nodes: Informer[Node] = informers.informer(NODES)
        self._machine_by_instance: dict[str, Machine] = {}
        self._resources: dict[str, ScalableResource] = {}

    # ------------------------------------------------------------------------- version

    def _declare(self, types: CapiTypes) -> None:
        self.types = types
        # declared after start-up (the version is discovered): attributed to the autoscaler as
        # the collections it declared when built are (its loop waits for them, /readyz names them)
        with self._informers.requested_by(REQUESTER):
            self._caches = (
                self._informers.informer(types.machine_deployments),
                self._informers.informer(types.machine_sets),
                self._informers.informer(types.machines),
            )
        log.info(
            "using Cluster API version",
            extra={"fields": {"group": types.machines.group, "version": types.machines.version}},
        )

    async def prepare(self) -> bool:
        """Discover the version once (``CAPI_VERSION`` given: none) and have the Cluster API
        caches synced; ``False`` while they are not. A group or version the server does not
        serve raises :class:`~.cloud_provider.ProviderError` (upstream's texts)."""
        if self._caches is None:
            version = await self._preferred_version()
            await self._check_served(version)
            self._declare(capi_types(self.capi_group, version))
        assert self._caches is not None
        for informer in self._caches:
            if not await informer.wait_synced(within=CAPI_SYNC_WAIT):
                return False
        return True

    async def unserved_apis(self) -> list[str]:
        """The Cluster API resources the server does not serve (``plural.group``, with
        ``/version`` when the group is served at a version lacking them), upstream's one-line
        reason logged; none when it serves them or cannot tell (a failed request proves
        nothing). With ``CAPI_VERSION`` the caches are declared already and their collections
        are checked as every component's are."""
        if self._caches is not None:
            return []
        try:
            document = await self.client.request(
                verb="get",
                method="GET",
                resource=ResourceType(
                    group="", version="v1", kind="APIGroupList", plural="", namespaced=False
                ),
                path=API_GROUP_LIST,
            )
            version = preferred_version(document, self.capi_group)
        except KubeError:
            return []
        except CapiVersionError as err:
            log.warning("%s", err)
            return [f"{plural}.{self.capi_group}" for plural in sorted(_CAPI_PLURALS)]
        try:
            await self._check_served(version)
        except ProviderError as err:
            cause = err.__cause__
            if isinstance(cause, KubeError) and not (
                isinstance(cause, KubeApiError) and cause.not_found
            ):
                return []
            log.warning("%s", err)
            return [f"{plural}.{self.capi_group}/{version}" for plural in sorted(_CAPI_PLURALS)]
        return []

    async def _preferred_version(self) -> str:
        """``getAPIGroupPreferredVersion`` on ``GET /apis``."""
        placeholder = ResourceType(
            group="", version="v1", kind="APIGroupList", plural="", namespaced=False
        )
        try:
            document = await self.client.request(
                verb="get", method="GET", resource=placeholder, path=API_GROUP_LIST
            )
        except KubeError as err:
            raise ProviderError(
                f'could not find preferred version for CAPI group "{self.capi_group}": failed '
                f"to get ServerGroups: {err}"
            ) from err
        try:
            return preferred_version(document, self.capi_group)
        except CapiVersionError as err:
            raise ProviderError(str(err)) from None

    async def _check_served(self, version: str) -> None:
        """``groupVersionHasResource``: the group version's discovery lists the three kinds."""
        group_version = f"{self.capi_group}/{version}"
        placeholder = ResourceType(
            group=self.capi_group,
            version=version,
            kind="APIResourceList",
            plural="",
            namespaced=False,
        )
        try:
            document = await self.client.request(
                verb="get", method="GET", resource=placeholder, path=placeholder.base_path()
            )
        except KubeApiError as err:
            raise ProviderError(
                f'failed to validate if resource "machinedeployments" is available for group '
                f'"{group_version}": failed to get ServerGroups: {err.message}'
            ) from err
        except KubeError as err:
            raise ProviderError(
                f'failed to validate if resource "machinedeployments" is available for group '
                f'"{group_version}": {err}'
            ) from err
        served = {
            str(entry.get("name"))
            for entry in (document.get("resources") or [])
            if isinstance(entry, dict)
        }
        for plural in _CAPI_PLURALS:
            if plural not in served:
                raise ProviderError(f'resource "{plural}" is not served in group "{group_version}"')

    def _ready(
        self,
    ) -> tuple[CapiTypes, Informer[MachineDeployment], Informer[MachineSet], Informer[Machine]]:
        if self.types is None or self._caches is None:
            raise ProviderError("the Cluster API version is not known yet")
        return (self.types, *self._caches)

    # ------------------------------------------------------------------------- reading

    def _scalable_resources(self) -> list[ScalableResource]:
        _, deployments, machine_sets, _ = self._ready()
        resources: list[ScalableResource] = list(deployments.lister.list())
        for machine_set in machine_sets.lister.list():
            owners = _meta(machine_set).get("ownerReferences") or ()
            if any(o.get("kind") == "MachineDeployment" and o.get("name") for o in owners):
                continue  # managed by its MachineDeployment, which is the node group
            resources.append(machine_set)
        return sorted(resources, key=group_id)

    def _machines_of(self, resource: ScalableResource) -> list[Machine]:
        """``listMachinesForScalableResource``: its selector, in its namespace and cluster."""
        try:
            selector = label_selector_from_dict(spec_of(resource).get("selector"))
        except SelectorError:
            return []
        cluster = _cluster_name(resource)
        namespace = str(_meta(resource).get("namespace", ""))
        machines: list[Machine] = []
        machine_cache = self._ready()[3]
        for machine in machine_cache.lister.list(namespace=namespace, selector=selector):
            if cluster and _cluster_name(machine) not in ("", cluster):
                continue
            machines.append(machine)
        return sorted(machines, key=lambda m: str(_meta(m).get("name", "")))

    def refresh(self) -> ProviderSnapshot:
        if self._caches is None:
            return ProviderSnapshot(groups={}, group_by_instance={})
        groups: dict[str, NodeGroup] = {}
        by_instance: dict[str, str] = {}
        problems: list[ProviderProblem] = []
        machine_by_instance: dict[str, Machine] = {}
        resources: dict[str, ScalableResource] = {}
        nodes_by_name = {str(_meta(n).get("name")): n for n in self.nodes.lister.list()}
        nodes_by_pid = {
            str(spec_of(n).get("providerID")): n
            for n in nodes_by_name.values()
            if spec_of(n).get("providerID")
        }
        for resource in self._scalable_resources():
            if not allowed_by_discovery(resource, self.discovery):
                continue
            if PAUSED_ANNOTATION in (_meta(resource).get("annotations") or {}):
                continue
            ident = group_id(resource)
            try:
                group = self._group(
                    resource, nodes_by_name, nodes_by_pid, machine_by_instance, problems
                )
            except AnnotationError as err:
                problems.append(
                    ProviderProblem(message=f"node group {ident}: {err}", source=resource)
                )
                continue
            if group is None:
                continue
            groups[ident] = group
            resources[ident] = resource
            for instance in group.instances:
                by_instance[instance.id] = ident
        self._machine_by_instance = machine_by_instance
        self._resources = resources
        # nodes whose providerID only matches after normalization (upstream's index)
        normalized = {_normalized(i): g for i, g in by_instance.items() if is_real_provider_id(i)}
        for node in nodes_by_name.values():
            pid = str(spec_of(node).get("providerID") or "")
            if pid and pid not in by_instance and _normalized(pid) in normalized:
                by_instance[pid] = normalized[_normalized(pid)]
        return ProviderSnapshot(
            groups=groups, group_by_instance=by_instance, problems=tuple(problems)
        )

    def _group(
        self,
        resource: ScalableResource,
        nodes_by_name: Mapping[str, Node],
        nodes_by_pid: Mapping[str, Node],
        machine_by_instance: dict[str, Machine],
        problems: list[ProviderProblem],
    ) -> NodeGroup | None:
        low, high = scaling_bounds(resource)
        if high == 0:
            return None  # "has no scaling capacity": not a node group
        replicas = spec_of(resource).get("replicas")
        if not isinstance(replicas, int):
            raise AnnotationError("spec.replicas is not set")
        instances: list[Instance] = []
        first_node: Node | None = None
        for machine in self._machines_of(resource):
            node_ref = status_of(machine).get("nodeRef") or {}
            node = nodes_by_name.get(str(node_ref.get("name", ""))) if node_ref else None
            node_pid = str(spec_of(node).get("providerID") or "") if node else None
            instance = machine_instance(machine, node_pid)
            if instance is None:
                continue
            instances.append(instance)
            machine_by_instance[instance.id] = machine
            if node is not None and first_node is None:
                first_node = node
        if first_node is None:
            first_node = next((nodes_by_pid[i.id] for i in instances if i.id in nodes_by_pid), None)
        built = template_node(resource=resource, existing_node=first_node)
        if replicas == 0 and built is None:
            return None  # cannot scale from zero: upstream does not offer the group
        options, option_problems = node_group_options(resource, self.defaults)
        ident = group_id(resource)
        problems.extend(
            ProviderProblem(message=f"node group {ident}: {p}", source=resource)
            for p in option_problems
        )
        return NodeGroup(
            id=ident,
            min_size=low,
            max_size=high,
            target_size=replicas,
            instances=tuple(instances),
            template=built[0] if built else None,
            template_pods=built[1] if built else (),
            options=options,
            price_per_hour=price_per_hour(resource),
            source=resource,
            rolling_out=self._rolling_out(resource),
        )

    def _rolling_out(self, resource: ScalableResource) -> bool:
        """``IsMachineDeploymentAndRollingOut``: a MachineDeployment whose MachineSets (those
        labelled ``cluster.x-k8s.io/deployment-name: <name>`` in its namespace) include an
        older revision with replicas (:func:`.clusterapi_annotations.rolling_out`). Upstream's
        ``ScaleDownNodeUpgradeProcessor`` then leaves every node of the group out of the
        scale-down candidates."""
        if resource.get("kind") != "MachineDeployment":
            return False
        meta = _meta(resource)
        selector = label_selector_from_dict(
            {"matchLabels": {DEPLOYMENT_NAME_LABEL: str(meta.get("name", ""))}}
        )
        machine_sets = self._ready()[2].lister.list(
            namespace=str(meta.get("namespace", "")), selector=selector
        )
        return rolling_out(machine_sets)

    # ------------------------------------------------------------------------- writing

    def _target(self, group: NodeGroup) -> tuple[ResourceType, str, str]:
        kind, _, rest = group.id.partition("/")
        namespace, _, name = rest.partition("/")
        resource = self._ready()[0].scalable(kind)
        if resource is None:
            raise ProviderError(f"unknown scalable resource kind {kind}")
        return resource, namespace, name

    async def _bounded(self, what: str, request: Callable[[], Awaitable[T]], *, writes: bool) -> T:
        if self.deadline is None:
            return await request()
        return await self.deadline.call(what, request, writes=writes)

    async def _replicas(self, group: NodeGroup) -> int:
        resource, namespace, name = self._target(group)
        try:
            scale = await self._bounded(
                f"read the size of {group.id}",
                lambda: self.client.get_scale(resource, name, namespace=namespace),
                writes=False,
            )
        except KubeError as err:
            raise ProviderError(f"cannot read the size of {group.id}: {err}") from err
        return int(spec_of(scale).get("replicas") or 0)

    async def _set_size(self, group: NodeGroup, replicas: int) -> None:
        """``SetSize``: bounds checked, then a merge patch on ``/scale``."""
        if replicas > group.max_size:
            raise ProviderError(
                f"size increase too large - desired:{replicas} max:{group.max_size}"
            )
        if replicas < group.min_size:
            raise ProviderError(
                f"size decrease too large - desired:{replicas} min:{group.min_size}"
            )
        resource, namespace, name = self._target(group)
        try:
            await self._bounded(
                f"resize {group.id} to {replicas}",
                lambda: self.client.scale(resource, name, namespace=namespace, replicas=replicas),
                writes=True,
            )
        except KubeError as err:
            raise ProviderError(f"cannot resize {group.id}: {err}") from err

    async def increase_size(self, group: NodeGroup, delta: int) -> None:
        if delta <= 0:
            raise ProviderError("size increase must be positive")
        size = await self._replicas(group)
        await self._set_size(group, size + delta)

    async def decrease_target_size(self, group: NodeGroup, delta: int) -> None:
        if delta >= 0:
            raise ProviderError("size decrease must be negative")
        size = await self._replicas(group)
        actual = sum(1 for i in group.instances if is_real_provider_id(i.id))
        if size + delta < actual:
            _, _, name = self._target(group)
            raise ProviderError(
                f"node group {name}: attempt to delete existing nodes currentReplicas:{size} "
                f"delta:{delta} existingNodes: {actual}"
            )
        await self._set_size(group, size + delta)

    async def delete_nodes(self, group: NodeGroup, nodes: Sequence[Node]) -> None:
        replicas = await self._replicas(group)
        if replicas <= group.min_size:
            raise ProviderError("min size reached, nodes will not be deleted")
        owned = {i.id for i in group.instances}
        for node in nodes:
            pid = str(spec_of(node).get("providerID") or "")
            if pid not in owned:
                raise ProviderError(f"node {pid!r} doesn't belong to node group {group.id!r}")
        if replicas - len(nodes) < group.min_size:
            raise ProviderError(
                f"unable to delete {len(nodes)} machines in {group.id!r}, machine replicas are "
                f"{replicas}, minSize is {group.min_size}"
            )
        for node in nodes:
            pid = str(spec_of(node).get("providerID") or "")
            machine = self._machine_by_instance.get(pid)
            if machine is None:
                raise ProviderError(f"unknown machine for node {pid!r}")
            if _meta(machine).get("deletionTimestamp"):
                continue  # already being deleted
            await self._mark(machine, True)
            try:
                await self._set_size(group, replicas - 1)
            except WriteOutcomeUnknown:
                raise  # the size may have gone down: the mark stays with it
            except ProviderError:
                try:
                    await self._mark(machine, False)
                except ProviderError as err:
                    log.warning("cannot unmark machine", extra={"fields": {"error": str(err)}})
                raise
            replicas -= 1

    async def _mark(self, machine: Machine, marked: bool) -> None:
        """``MarkMachineForDeletion`` / ``UnmarkMachineForDeletion``: GET, annotate, PUT."""
        meta = _meta(machine)
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        action = "mark" if marked else "unmark"
        try:
            machines = self._ready()[0].machines
            current = await self._bounded(
                f"read machine {namespace}/{name}",
                lambda: self.client.get(machines, name, namespace=namespace),
                writes=False,
            )
            annotations = dict(Meta(current).annotations)
            if marked:
                annotations[DELETE_MACHINE_ANNOTATION] = go_time_string(self.client.clock.now())
            else:
                annotations.pop(DELETE_MACHINE_ANNOTATION, None)
            current = {**current, "metadata": {**Meta(current).raw, "annotations": annotations}}
            await self._bounded(
                f"{action} machine {namespace}/{name} for deletion",
                lambda: self.client.update(machines, current),
                writes=True,
            )
        except KubeError as err:
            raise ProviderError(f"cannot annotate machine {namespace}/{name}: {err}") from err
