"""The RBAC objects let kubescale's ServiceAccount make every request kubescale makes, and no more.

Requests are listed with the code that makes them (the in-process API server's request log of
the VPA scenarios — webhook, recommender, updater — shows the same set: list/watch of the
informed collections, the writes below, the status Lease read by name). Upstream VPA's grants
to its three components (deploy/vpa-rbac.yaml) are covered where kubescale makes the request,
and each one it does not make is listed with the reason it is left out. Everything is evaluated
with :mod:`.rbac_rules` over the rendered manifests.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.kube.controller_lookups import WELL_KNOWN_INFORMED
from kubescale.kube.resources import (
    CORE_EVENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    LIMIT_RANGES,
    MACHINE_DEPLOYMENTS,
    MACHINE_SETS,
    MACHINES,
    NAMESPACES,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    PRIORITY_CLASSES,
    VERTICAL_POD_AUTOSCALERS,
    VPA_CHECKPOINTS,
)
from kubescale.webhook.registration import WEBHOOK_CONFIG_NAME

from .manifest_files import find, install_namespace, render
from .rbac_rules import Request, ServiceAccountRef, allowed, refused, rule_allows

OTHER_NAMESPACE = "team-a"  # any namespace that is not kubescale's own
LEADER_LEASE = "kubescale"  # --leader-elect-resource-name's default
STATUS_LEASE = "vpa-admission-controller"  # the webhook's status Lease (upstream's name)


def _objects() -> list[dict[str, Any]]:
    return render()


def _account(objects: list[dict[str, Any]] | None = None) -> ServiceAccountRef:
    deployment = find(objects if objects is not None else _objects(), "Deployment", "kubescale")
    return ServiceAccountRef(
        namespace=deployment["metadata"]["namespace"],
        name=deployment["spec"]["template"]["spec"]["serviceAccountName"],
    )


def _refused(requests: list[Request]) -> list[str]:
    return refused(_objects(), account=_account(), requests=requests)


def _everywhere(
    verb: str, group: str, resource: str, subresource: str = "", name: str = ""
) -> list[Request]:
    """The request cluster-wide, in kubescale's namespace and in another one."""
    return [
        Request(
            verb=verb,
            group=group,
            resource=resource,
            subresource=subresource,
            namespace=ns,
            name=name,
        )
        for ns in (None, install_namespace(), OTHER_NAMESPACE)
    ]


INFORMED = [
    # (resource, who informs on it)
    *[(rt, "kube/controller_lookups.py: the well-known controllers") for rt in
      WELL_KNOWN_INFORMED.values()],
    (PODS, "recommender cluster_feeder, updater"),
    (LIMIT_RANGES, "webhook caches, updater"),
    (VERTICAL_POD_AUTOSCALERS, "webhook, recommender, updater"),
    (VPA_CHECKPOINTS, "recommender checkpoint store"),
    (CORE_EVENTS, "recommender: eviction events (reason=Evicted)"),
    (NODES, "webhook --cap-to-largest-node, cluster autoscaler"),
    (HORIZONTAL_POD_AUTOSCALERS, "webhook --avoid-hpa-conflict"),
    *[(rt, "cluster autoscaler: autoscaler_loop.py, clusterapi_provider.py") for rt in
      (NAMESPACES, POD_DISRUPTION_BUDGETS, PRIORITY_CLASSES, MACHINE_DEPLOYMENTS, MACHINE_SETS,
       MACHINES)],
]  # fmt: skip


def test_the_informers_can_list_and_watch_what_they_inform_on() -> None:
    requests = [
        request
        for rt, _ in INFORMED
        for verb in ("list", "watch")
        for request in _everywhere(verb, rt.group, rt.plural)
    ]
    assert len(requests) == 2 * 3 * len(INFORMED)
    assert _refused(requests) == []


def _own(verb: str, name: str = "") -> Request:
    return Request(
        verb=verb,
        group="coordination.k8s.io",
        resource="leases",
        namespace=install_namespace(),
        name=name,
    )


@pytest.mark.parametrize("namespace", [None, "team-b"], ids=["default", "overlay"])
def test_leases_only_kubescales_own_by_name(namespace: str | None) -> None:
    # kube/leader_election.py and the webhook's status Lease (upstream pkg/utils/status): get,
    # create when missing, update; the updater gets the status Lease. All in the pod's
    # namespace. Creating cannot be limited by name (RBAC: the name is not known before the
    # object exists), so create is granted in kubescale's namespace only; everything else
    # names the two Leases, so the control plane's leader Leases in kube-system stay untouchable.
    objects = render(namespace=namespace)
    account = _account(objects)
    own = [
        Request(verb=verb, group="coordination.k8s.io", resource="leases",
                namespace=account.namespace, name=name)
        for name in (LEADER_LEASE, STATUS_LEASE)
        for verb in ("get", "update")
    ] + [Request(verb="create", group="coordination.k8s.io", resource="leases",
                 namespace=account.namespace)]  # fmt: skip
    assert refused(objects, account=account, requests=own) == []
    foreign = [
        Request(verb=verb, group="coordination.k8s.io", resource="leases", namespace=ns,
                name=name)
        for ns in (account.namespace, None, OTHER_NAMESPACE)
        for name in ("kube-controller-manager", "kube-scheduler", "cluster-autoscaler")
        for verb in ("get", "update", "patch", "delete")
    ] + [
        Request(verb=verb, group="coordination.k8s.io", resource="leases", namespace=ns)
        for ns in (account.namespace, None, OTHER_NAMESPACE)
        for verb in ("list", "watch", "deletecollection")
    ] + [
        Request(verb="create", group="coordination.k8s.io", resource="leases", namespace=ns)
        for ns in (None, OTHER_NAMESPACE)
    ]  # fmt: skip
    assert refused(objects, account=account, requests=foreign) == [str(r) for r in foreign]


def _static_requests() -> list[Request]:
    namespaces = (install_namespace(), OTHER_NAMESPACE)
    requests = [
        # webhook/registration.py: create, or get + update (update_with_retry) an existing one;
        # the CA refresh gets it and JSON-patches its caBundle.
        Request(verb="create", group="admissionregistration.k8s.io",
                resource="mutatingwebhookconfigurations"),
        *[Request(verb=verb, group="admissionregistration.k8s.io",
                  resource="mutatingwebhookconfigurations", name=WEBHOOK_CONFIG_NAME)
          for verb in ("get", "update", "patch")],
    ]  # fmt: skip
    for namespace in namespaces:
        requests += [
            # kube/events.py: create, then a strategic-merge patch of a repeated event.
            Request(verb="create", group="", resource="events", namespace=namespace),
            Request(verb="patch", group="", resource="events", namespace=namespace),
            # Recommender: VPA status (a merge patch of /status, vpa_status.py); checkpoints
            # written (JSON patch, create when missing) and garbage-collected.
            Request(
                verb="patch",
                group="autoscaling.k8s.io",
                resource="verticalpodautoscalers",
                subresource="status",
                namespace=namespace,
            ),
            *[
                Request(
                    verb=verb,
                    group="autoscaling.k8s.io",
                    resource="verticalpodautoscalercheckpoints",
                    namespace=namespace,
                )
                for verb in ("create", "patch", "delete")
            ],
            # Updater: kube/client.py evict() posts pods/eviction; in-place resize patches
            # pods/resize, then annotates the pod (reference §3.5).
            Request(
                verb="create",
                group="",
                resource="pods",
                subresource="eviction",
                namespace=namespace,
            ),
            Request(
                verb="patch", group="", resource="pods", subresource="resize", namespace=namespace
            ),
            Request(verb="patch", group="", resource="pods", namespace=namespace),
            # kube/scale_lookups.py: get of the scale subresource of a workload a pod names
            # (a VPA target's selector) that no informer caches (kube/controller_lookups.py's
            # WELL_KNOWN_INFORMED are read from the cache): the Cluster API kinds kubescale
            # knows (a custom kind needs a rule naming it: README.md, no wildcard); the HPA's
            # GET of a ReplicationController's /scale (controllers/hpa/scale_targets.py).
            *[
                Request(
                    verb="get",
                    group=group,
                    resource=plural,
                    subresource="scale",
                    namespace=namespace,
                )
                for group, plural in (
                    ("", "replicationcontrollers"),
                    ("cluster.x-k8s.io", "machinedeployments"),
                    ("cluster.x-k8s.io", "machinesets"),
                )
            ],
            # Recommender: PodMetrics from the metrics API.
            Request(verb="list", group="metrics.k8s.io", resource="pods", namespace=namespace),
        ]
    requests += [Request(verb="list", group="metrics.k8s.io", resource="pods")]
    return requests


def test_the_cluster_autoscaler_can_make_its_writes() -> None:
    # controllers/autoscaler, through runtime/plans/node_taints.py (GET + PUT of a node's taints and
    # cordon), clusterapi_provider.py (/scale of MachineDeployments and MachineSets; GET + PUT of a
    # Machine's delete-machine annotation), loop_status.py (the status ConfigMap in --namespace,
    # kubescale's own: its informer, GET, create once, then PUT), scale_down_actuator.py
    # (pods/eviction).
    own = install_namespace()
    requests = [
        Request(verb="get", group="", resource="nodes", name="node-1"),
        Request(verb="update", group="", resource="nodes", name="node-1"),
        *[Request(verb=verb, group="", resource="configmaps", namespace=own)
          for verb in ("list", "watch", "create")],
        *[Request(verb=verb, group="", resource="configmaps", namespace=own,
                  name="cluster-autoscaler-status") for verb in ("get", "update")],
    ]  # fmt: skip
    for namespace in (own, OTHER_NAMESPACE):
        requests += [
            Request(verb="get", group="cluster.x-k8s.io", resource="machines", namespace=namespace),
            Request(
                verb="update", group="cluster.x-k8s.io", resource="machines", namespace=namespace
            ),
            *[
                Request(
                    verb=verb,
                    group="cluster.x-k8s.io",
                    resource=plural,
                    subresource="scale",
                    namespace=namespace,
                )
                for verb in ("get", "patch")
                for plural in ("machinedeployments", "machinesets")
            ],
            Request(
                verb="create",
                group="",
                resource="pods",
                subresource="eviction",
                namespace=namespace,
            ),
        ]
    assert _refused(requests) == []
    # no other ConfigMap may be rewritten, none read outside kubescale's namespace
    others = [
        Request(verb="update", group="", resource="configmaps", namespace=own, name="coredns"),
        Request(verb="get", group="", resource="configmaps", namespace=own, name="coredns"),
        *[Request(verb=verb, group="", resource="configmaps", namespace=namespace)
          for namespace in (None, OTHER_NAMESPACE) for verb in ("list", "watch", "create")],
    ]  # fmt: skip
    assert _refused(others) == [str(r) for r in others]


def test_the_hpa_controller_can_make_its_requests() -> None:
    # controllers/hpa: hpa_loop.py (merge PATCH of the target's /scale; GET of it where no
    # informer caches the target — the apps workloads' Scale is read from the cache), PUT of the
    # HPA's status, metrics_sources.py (the three metrics APIs), scale_targets.py (discovery: no
    # RBAC for non-resource URLs of discovery, granted to every authenticated user)
    requests = [
        *[request for group, plural in (("apps", "deployments"), ("apps", "statefulsets"),
                                        ("apps", "replicasets"), ("", "replicationcontrollers"))
          for request in _everywhere("patch", group, plural, "scale", name="web")],
        *_everywhere("get", "", "replicationcontrollers", "scale", name="web"),
        *_everywhere("update", "autoscaling", "horizontalpodautoscalers", "status", name="web"),
        *_everywhere("list", "metrics.k8s.io", "pods"),
        *_everywhere("get", "custom.metrics.k8s.io", "pods", "http_requests", name="*"),
        *_everywhere("get", "custom.metrics.k8s.io", "deployments.apps", "qps", name="web"),
        *_everywhere("list", "external.metrics.k8s.io", "queue_messages_ready"),
    ]  # fmt: skip
    assert _refused(requests) == []


def test_every_request_kubescale_makes_is_allowed() -> None:
    requests = _static_requests()
    assert len(requests) > 30
    assert _refused(requests) == []


# Upstream VPA's ClusterRoles for admission-controller, recommender and updater
# (deploy/vpa-rbac.yaml: system:metrics-reader, vpa-actor, vpa-status-actor,
# vpa-checkpoint-actor, evictioner, vpa-target-reader, vpa-admission-controller,
# vpa-status-reader, vpa-updater-in-place), without the retired poc.autoscaling.k8s.io and
# extensions groups: (group, resources, verbs kubescale needs, verbs it leaves out and why).
UPSTREAM_GRANTS: list[tuple[str, tuple[str, ...], tuple[str, ...], str]] = [
    ("metrics.k8s.io", ("pods",), ("list",), "get: the recommender lists PodMetrics only"),
    ("", ("pods", "limitranges"), ("list", "watch"), "get: informers list and watch"),
    ("", ("nodes",), ("list", "watch"), "get: informer (--cap-to-largest-node)"),
    ("", ("configmaps",), (),
     "no VPA component reads ConfigMaps (the cluster autoscaler, in its own namespace only)"),
    ("", ("events",), ("list", "watch", "create", "patch"),
     "get: informer; update: repeats are patched"),
    ("autoscaling.k8s.io", ("verticalpodautoscalers",), ("list", "watch"), "get: informer"),
    ("autoscaling.k8s.io", ("verticalpodautoscalers/status",), ("patch",),
     "get: the status is patched from the informer's copy"),
    ("autoscaling.k8s.io", ("verticalpodautoscalercheckpoints",),
     ("list", "watch", "create", "patch", "delete"), "get: informer"),
    ("", ("namespaces",), ("list",), "get: informer (the cluster autoscaler's)"),
    ("apps", ("replicasets",), ("list", "watch"), "get: informer"),
    ("", ("pods/eviction",), ("create",), ""),
    ("*", ("*/scale",), (),
     "get: the /scale of the apps workloads is read from their informers (a GET only for kinds"
     " without one: ReplicationControllers for the HPA, Cluster API, custom kinds with a rule"
     " naming them (README)); watch: never"),
    ("", ("replicationcontrollers",), ("list", "watch"), "get: informer"),
    ("apps", ("daemonsets", "deployments", "replicasets", "statefulsets"), ("list", "watch"),
     "get: informer"),
    ("batch", ("jobs", "cronjobs"), ("list", "watch"), "get: informer"),
    ("admissionregistration.k8s.io", ("mutatingwebhookconfigurations",), ("create",),
     "get/update/patch by name only (vpa-webhook-config); list and delete: never made"),
    ("", ("pods/resize",), ("patch",), ""),
    ("", ("pods",), ("patch",), ""),
]  # fmt: skip


def _requests_for(group: str, resource: str, verbs: tuple[str, ...]) -> list[Request]:
    plural, _, subresource = resource.partition("/")
    cases = (
        [("apps", "deployments"), ("apps", "statefulsets")] if plural == "*" else [(group, plural)]
    )
    return [
        request
        for request_group, request_plural in cases
        for verb in verbs
        for request in _everywhere(verb, request_group, request_plural, subresource)
    ]


def test_kubescale_may_do_what_upstream_vpa_does_that_it_does() -> None:
    requests = [
        request
        for group, resources, verbs, _ in UPSTREAM_GRANTS
        for resource in resources
        for request in _requests_for(group, resource, verbs)
    ]
    assert _refused(requests) == []


NOT_NEEDED = [
    # (request, why kubescale must not be able to make it)
    *_everywhere("get", "", "secrets"),
    *_everywhere("list", "", "secrets"),
    *_everywhere("delete", "", "pods"),
    *_everywhere("update", "apps", "deployments"),
    *_everywhere("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
    *_everywhere("escalate", "rbac.authorization.k8s.io", "clusterroles"),
    *_everywhere("update", "autoscaling.k8s.io", "verticalpodautoscalers"),
    # the cluster autoscaler taints nodes (update, as upstream's grant) but never deletes
    # one: nodes go through the provider (a Machine's delete-machine annotation + /scale)
    *_everywhere("delete", "", "nodes"),
    *_everywhere("delete", "cluster.x-k8s.io", "machines"),
    # the scale subresource is read and merge-patched (HPA, node groups), never updated,
    # listed or watched; the apps workloads' Scale is read from their informers, never GET
    *[request for plural in ("deployments", "statefulsets", "replicasets")
      for request in _everywhere("get", "apps", plural, "scale", name="web")],
    *[request for verb in ("update", "list", "watch")
      for group, plural in (("apps", "deployments"), ("apps", "statefulsets"),
                            ("example.com", "widgets"))
      for request in _everywhere(verb, group, plural, "scale")],
    *_everywhere("update", "cluster.x-k8s.io", "machinedeployments", "scale"),
    # no wildcard: the scale of a kind kubescale does not know is not granted (README.md: add a
    # rule naming it), nor that of kinds without one (nodes have no /scale)
    *[request for verb in ("get", "patch")
      for request in _everywhere(verb, "example.com", "widgets", "scale", name="w")],
    # HPAs: the status is written, never the spec; metrics are read, never written
    *_everywhere("update", "autoscaling", "horizontalpodautoscalers"),
    *_everywhere("patch", "autoscaling", "horizontalpodautoscalers"),
    *_everywhere("create", "custom.metrics.k8s.io", "pods"),
    *_everywhere("list", "custom.metrics.k8s.io", "pods"),
    # only kubescale's own MutatingWebhookConfiguration, by name
    *[Request(verb=verb, group="admissionregistration.k8s.io",
              resource="mutatingwebhookconfigurations", name=name)
      for name in ("istio-sidecar-injector", "cert-manager-webhook", "")
      for verb in ("get", "update", "patch", "delete")],
    *[Request(verb=verb, group="admissionregistration.k8s.io",
              resource="mutatingwebhookconfigurations", name=WEBHOOK_CONFIG_NAME)
      for verb in ("delete",)],
    *[Request(verb=verb, group="admissionregistration.k8s.io",
              resource="mutatingwebhookconfigurations")
      for verb in ("list", "watch", "deletecollection")],
    # reads no code makes
    *[request for verb in ("get", "list", "watch")
      for group, plural in (("apiextensions.k8s.io", "customresourcedefinitions"),
                            ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
                            ("events.k8s.io", "events"))
      for request in _everywhere(verb, group, plural)],
    # informed kinds are listed and watched, never read one by one
    *[request for group, plural in (("", "namespaces"), ("scheduling.k8s.io", "priorityclasses"),
                                    ("policy", "poddisruptionbudgets"), ("", "pods"),
                                    ("apps", "deployments"))
      for request in _everywhere("get", group, plural, name="x")],
    # writes no code makes
    *_everywhere("create", "events.k8s.io", "events"),
    *_everywhere("update", "", "events"),
    *_everywhere("update", "autoscaling.k8s.io", "verticalpodautoscalers", "status"),
    *_everywhere("update", "autoscaling.k8s.io", "verticalpodautoscalercheckpoints"),
    *_everywhere("update", "", "pods", "resize"),
]  # fmt: skip


def test_nothing_beyond_what_kubescale_needs() -> None:
    objects, account = _objects(), _account()
    wrongly_allowed = [
        str(request) for request in NOT_NEEDED if allowed(objects, account=account, request=request)
    ]
    assert wrongly_allowed == []


def test_the_bindings_point_at_the_service_account_and_existing_roles() -> None:
    objects = _objects()
    account = _account()
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        binding = find(objects, kind)
        (subject,) = binding["subjects"]
        assert (subject["kind"], subject["namespace"], subject["name"]) == (
            "ServiceAccount",
            account.namespace,
            account.name,
        )
        assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
        assert binding["roleRef"]["kind"] == role_kind
        find(objects, role_kind, binding["roleRef"]["name"])


# The authorizer's matching rules themselves (plugin/pkg/auth/authorizer/rbac, documented at
# kubernetes.io/docs/reference/access-authn-authz/rbac).
RULE_CASES = [
    (
        "exact resource",
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        Request(verb="get", group="", resource="pods"),
        True,
    ),
    (
        "a resource rule does not cover its subresources",
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
        Request(verb="create", group="", resource="pods", subresource="eviction"),
        False,
    ),
    (
        "resource/subresource",
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        Request(verb="create", group="", resource="pods", subresource="eviction"),
        True,
    ),
    (
        "* covers subresources",
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        Request(verb="patch", group="", resource="pods", subresource="resize"),
        True,
    ),
    (
        "*/scale covers every scale",
        {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]},
        Request(verb="get", group="apps", resource="deployments", subresource="scale"),
        True,
    ),
    (
        "*/scale is not the resource",
        {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["get"]},
        Request(verb="get", group="apps", resource="deployments"),
        False,
    ),
    (
        "group must match",
        {"apiGroups": ["apps"], "resources": ["pods"], "verbs": ["get"]},
        Request(verb="get", group="", resource="pods"),
        False,
    ),
    (
        "verb must match",
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
        Request(verb="list", group="", resource="pods"),
        False,
    ),
    (
        "resourceNames limit by name",
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["a"]},
        Request(verb="get", group="", resource="configmaps", name="b"),
        False,
    ),
    (
        "resourceNames never match create",
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["create"],
            "resourceNames": ["a"],
        },
        Request(verb="create", group="", resource="configmaps"),
        False,
    ),
]


@pytest.mark.parametrize(
    ("rule", "request_", "expected"),
    [(rule, req, exp) for _, rule, req, exp in RULE_CASES],
    ids=[name for name, *_ in RULE_CASES],
)
def test_rule_matching_follows_the_rbac_authorizer(
    rule: dict[str, Any], request_: Request, expected: bool
) -> None:
    assert rule_allows(rule, request_) is expected


def test_a_role_binding_grants_only_in_its_namespace() -> None:
    account = ServiceAccountRef(namespace="ns-a", name="sa")
    objects = [
        {
            "kind": "Role",
            "metadata": {"name": "r", "namespace": "ns-a"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "b", "namespace": "ns-a"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns-a"}],
        },
    ]
    verdicts = [
        allowed(
            objects,
            account=account,
            request=Request(verb="list", group="", resource="pods", namespace=ns),
        )
        for ns in ("ns-a", "ns-b", None)
    ]
    assert verdicts == [True, False, False]
    other_account = ServiceAccountRef(namespace="ns-b", name="sa")  # same name, other namespace
    request = Request(verb="list", group="", resource="pods", namespace="ns-a")
    assert not allowed(objects, account=other_account, request=request)
