"""The catalogue of Kubernetes resource types kubescale reads and writes.

One declaration per kind; the access layer builds its URLs from them, through the one path
builder (:func:`kubescale.kube.api_paths.api_path`). This is what the
*product* knows — every controller kind upstream VPA supports, the objects of the suite's
systems. What the in-process API server serves is its own list
(:mod:`kubescale.sim.apiserver.served_kinds`), which starts from these and adds the kinds only
tests and simulations use, so a test-server limit never shapes product behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubescale.kube.api_paths import ApiPath, api_path, validate_object_name


@dataclass(frozen=True, kw_only=True)
class ResourceType:
    """What the REST protocol needs to know about one kind."""

    group: str
    """API group; ``""`` for the core (legacy) group served under ``/api``."""
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: frozenset[str] = field(default_factory=frozenset)
    """Subresources besides the object itself: ``status``, ``scale``, ``eviction``, ``binding``,
    ``resize``."""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )

    @property
    def group_version(self) -> str:
        """``v1`` for the core group, else ``group/version`` (an object's ``apiVersion``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> tuple[str, str]:
        """``(group, plural)``: unique within the catalogue."""
        return (self.group, self.plural)

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def base_path(self) -> ApiPath:
        """``/api/v1`` or ``/apis/<group>/<version>`` (the group version's discovery)."""
        return api_path(group=self.group, version=self.version)

    def collection_path(self, namespace: str | None = None) -> ApiPath:
        """The collection URL; ``namespace=None`` on a namespaced kind lists across namespaces."""
        return api_path(
            group=self.group,
            version=self.version,
            plural=self.plural,
            namespace=namespace if self.namespaced else None,
        )

    def object_path(
        self, name: str, namespace: str | None = None, subresource: str = ""
    ) -> ApiPath:
        """An object's URL (or its subresource's); every segment validated, the name escaped
        (:func:`~kubescale.kube.api_paths.api_path`)."""
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        return api_path(  # an empty name is refused: this is an object's path
            group=self.group,
            version=self.version,
            plural=self.plural,
            namespace=namespace if self.namespaced else None,
            name=validate_object_name(name),
            subresource=subresource,
        )


def resource_type(
    group: str,
    version: str,
    kind: str,
    plural: str,
    *,
    namespaced: bool = True,
    subresources: tuple[str, ...] = (),
    short_names: tuple[str, ...] = (),
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        namespaced=namespaced,
        subresources=frozenset(subresources),
        short_names=short_names,
    )


PODS = resource_type(
    "",
    "v1",
    "Pod",
    "pods",
    subresources=("status", "eviction", "binding", "resize"),
    short_names=("po",),
)
NODES = resource_type(
    "", "v1", "Node", "nodes", namespaced=False, subresources=("status",), short_names=("no",)
)
NAMESPACES = resource_type(
    "",
    "v1",
    "Namespace",
    "namespaces",
    namespaced=False,
    subresources=("status",),
    short_names=("ns",),
)
LIMIT_RANGES = resource_type("", "v1", "LimitRange", "limitranges", short_names=("limits",))
CORE_EVENTS = resource_type("", "v1", "Event", "events", short_names=("ev",))
CONFIG_MAPS = resource_type("", "v1", "ConfigMap", "configmaps", short_names=("cm",))
PERSISTENT_VOLUME_CLAIMS = resource_type(
    "",
    "v1",
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    subresources=("status",),
    short_names=("pvc",),
)
DEPLOYMENTS = resource_type(
    "apps",
    "v1",
    "Deployment",
    "deployments",
    subresources=("status", "scale"),
    short_names=("deploy",),
)
REPLICATION_CONTROLLERS = resource_type(
    "",
    "v1",
    "ReplicationController",
    "replicationcontrollers",
    subresources=("status", "scale"),
    short_names=("rc",),
)
REPLICA_SETS = resource_type(
    "apps", "v1", "ReplicaSet", "replicasets", subresources=("status", "scale"), short_names=("rs",)
)
STATEFUL_SETS = resource_type(
    "apps",
    "v1",
    "StatefulSet",
    "statefulsets",
    subresources=("status", "scale"),
    short_names=("sts",),
)
DAEMON_SETS = resource_type(
    "apps", "v1", "DaemonSet", "daemonsets", subresources=("status",), short_names=("ds",)
)
JOBS = resource_type("batch", "v1", "Job", "jobs", subresources=("status",))
CRON_JOBS = resource_type(
    "batch", "v1", "CronJob", "cronjobs", subresources=("status",), short_names=("cj",)
)
POD_DISRUPTION_BUDGETS = resource_type(
    "policy",
    "v1",
    "PodDisruptionBudget",
    "poddisruptionbudgets",
    subresources=("status",),
    short_names=("pdb",),
)
HORIZONTAL_POD_AUTOSCALERS = resource_type(
    "autoscaling",
    "v2",
    "HorizontalPodAutoscaler",
    "horizontalpodautoscalers",
    subresources=("status",),
    short_names=("hpa",),
)
VERTICAL_POD_AUTOSCALERS = resource_type(
    "autoscaling.k8s.io",
    "v1",
    "VerticalPodAutoscaler",
    "verticalpodautoscalers",
    subresources=("status",),
    short_names=("vpa",),
)
VPA_CHECKPOINTS = resource_type(
    "autoscaling.k8s.io",
    "v1",
    "VerticalPodAutoscalerCheckpoint",
    "verticalpodautoscalercheckpoints",
    short_names=("vpacheckpoint",),
)
LEASES = resource_type("coordination.k8s.io", "v1", "Lease", "leases")
MUTATING_WEBHOOK_CONFIGURATIONS = resource_type(
    "admissionregistration.k8s.io",
    "v1",
    "MutatingWebhookConfiguration",
    "mutatingwebhookconfigurations",
    namespaced=False,
)
PRIORITY_CLASSES = resource_type(
    "scheduling.k8s.io",
    "v1",
    "PriorityClass",
    "priorityclasses",
    namespaced=False,
    short_names=("pc",),
)
EVENTS = resource_type("events.k8s.io", "v1", "Event", "events", short_names=("ev",))
MACHINE_DEPLOYMENTS = resource_type(
    "cluster.x-k8s.io",
    "v1beta1",
    "MachineDeployment",
    "machinedeployments",
    subresources=("status", "scale"),
    short_names=("md",),
)
MACHINE_SETS = resource_type(
    "cluster.x-k8s.io",
    "v1beta1",
    "MachineSet",
    "machinesets",
    subresources=("status", "scale"),
    short_names=("ms",),
)
MACHINES = resource_type(
    "cluster.x-k8s.io",
    "v1beta1",
    "Machine",
    "machines",
    subresources=("status",),
    short_names=("ma",),
)


NODE_METRICS = ResourceType(
    group="metrics.k8s.io",
    version="v1beta1",
    kind="NodeMetrics",
    plural="nodes",
    namespaced=False,
    verbs=("get", "list"),
)
"""metrics-server's node usage (not cached through informers: read on demand)."""
POD_METRICS = ResourceType(
    group="metrics.k8s.io",
    version="v1beta1",
    kind="PodMetrics",
    plural="pods",
    namespaced=True,
    verbs=("get", "list"),
)
"""metrics-server's pod usage (not cached through informers: read on demand)."""
SECRETS = resource_type("", "v1", "Secret", "secrets")
"""Read on demand only (the descheduler's Prometheus token), never cached or served."""

ALL: tuple[ResourceType, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    LIMIT_RANGES,
    CORE_EVENTS,
    CONFIG_MAPS,
    PERSISTENT_VOLUME_CLAIMS,
    DEPLOYMENTS,
    REPLICATION_CONTROLLERS,
    REPLICA_SETS,
    STATEFUL_SETS,
    DAEMON_SETS,
    JOBS,
    CRON_JOBS,
    POD_DISRUPTION_BUDGETS,
    HORIZONTAL_POD_AUTOSCALERS,
    VERTICAL_POD_AUTOSCALERS,
    VPA_CHECKPOINTS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    PRIORITY_CLASSES,
    EVENTS,
    MACHINE_DEPLOYMENTS,
    MACHINE_SETS,
    MACHINES,
)

_BY_KEY = {rt.key: rt for rt in ALL}
_BY_GVK = {(rt.group_version, rt.kind): rt for rt in ALL}


def by_plural(group: str, plural: str) -> ResourceType | None:
    return _BY_KEY.get((group, plural))


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    """The type of an object from its ``apiVersion`` and ``kind``."""
    return _BY_GVK.get((api_version, kind))
