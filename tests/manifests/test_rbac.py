"""The RBAC objects let kubescale's ServiceAccount make every request kubescale makes, and no more.

Requests are derived from the code where the code lists them (every kind of
``kubescale.kube.resources.ALL`` is cached through informers: get/list/watch across namespaces) and
otherwise listed with the code or upstream rule that makes them. Upstream VPA's grants to its
three components (deploy/vpa-rbac.yaml) are facts kubescale must cover too, since it replaces
all three. Everything is evaluated with :mod:`.rbac_rules` over the rendered manifests.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.kube.resources import ALL, LEASES

from .manifest_files import find, install_namespace, render
from .rbac_rules import Request, ServiceAccountRef, allowed, refused, rule_allows

OTHER_NAMESPACE = "team-a"  # any namespace that is not kubescale's own


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


def _everywhere(verb: str, group: str, resource: str, subresource: str = "") -> list[Request]:
    """The request cluster-wide, in kubescale's namespace and in another one."""
    return [
        Request(verb=verb, group=group, resource=resource, subresource=subresource, namespace=ns)
        for ns in (None, install_namespace(), OTHER_NAMESPACE)
    ]


def test_the_informer_caches_can_list_and_watch_every_catalogued_kind() -> None:
    requests = [
        request
        for rt in ALL
        if rt is not LEASES  # leases: only in kubescale's own namespace, below
        for verb in ("get", "list", "watch")
        for request in _everywhere(verb, rt.group, rt.plural)
    ]
    assert len(requests) == 3 * 3 * (len(ALL) - 1)
    assert _refused(requests) == []


@pytest.mark.parametrize("namespace", [None, "team-b"], ids=["default", "overlay"])
def test_leases_only_in_kubescales_own_namespace(namespace: str | None) -> None:
    # kube/leader_election.py (get, create, update) and the webhook's status Lease (upstream
    # pkg/utils/status: get, create, update), both in the pod's namespace; the updater reads it.
    objects = render(namespace=namespace)
    account = _account(objects)
    own = [
        Request(
            verb=verb, group="coordination.k8s.io", resource="leases", namespace=account.namespace
        )
        for verb in ("get", "list", "watch", "create", "update", "patch")
    ]
    assert refused(objects, account=account, requests=own) == []
    foreign = [
        Request(verb="update", group="coordination.k8s.io", resource="leases", namespace=ns)
        for ns in (None, OTHER_NAMESPACE)
    ]
    assert refused(objects, account=account, requests=foreign) == [str(r) for r in foreign]


def _static_requests() -> list[Request]:
    namespaces = (install_namespace(), OTHER_NAMESPACE)
    requests = [
        Request(
            verb=verb,
            group="admissionregistration.k8s.io",
            resource="mutatingwebhookconfigurations",
        )
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
    ]
    for namespace in namespaces:
        requests += [
            # kube/events.py: create, then a strategic-merge patch of a repeated event.
            Request(verb="create", group="", resource="events", namespace=namespace),
            Request(verb="patch", group="", resource="events", namespace=namespace),
            Request(verb="create", group="events.k8s.io", resource="events", namespace=namespace),
            # Recommender: status of VPAs; checkpoints written (JSON patch of /status, create
            # when missing) and garbage-collected (reference §2.6).
            *[
                Request(
                    verb=verb,
                    group="autoscaling.k8s.io",
                    resource="verticalpodautoscalers",
                    subresource="status",
                    namespace=namespace,
                )
                for verb in ("get", "update", "patch")
            ],
            *[
                Request(
                    verb=verb,
                    group="autoscaling.k8s.io",
                    resource="verticalpodautoscalercheckpoints",
                    namespace=namespace,
                )
                for verb in ("create", "update", "patch", "delete")
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
            # Webhook and kube/client.py get_scale()/scale(): the scale subresource of any
            # workload, built-in or custom (a VPA target's selector; replicas).
            *[
                Request(
                    verb=verb,
                    group=group,
                    resource=plural,
                    subresource="scale",
                    namespace=namespace,
                )
                for verb in ("get", "update", "patch")
                for group, plural in (
                    ("apps", "deployments"),
                    ("apps", "statefulsets"),
                    ("apps", "replicasets"),
                    ("", "replicationcontrollers"),
                    ("cluster.x-k8s.io", "machinedeployments"),
                    ("example.com", "widgets"),  # any CRD with a scale subresource
                )
            ],
            # Recommender: PodMetrics from the metrics API.
            Request(verb="list", group="metrics.k8s.io", resource="pods", namespace=namespace),
        ]
    # Well-known VPA target missing from the catalogue: ReplicationControllers (reference §1.4).
    requests += _everywhere("list", "", "replicationcontrollers")
    requests += _everywhere("watch", "", "replicationcontrollers")
    return requests


def test_the_cluster_autoscaler_can_make_its_writes() -> None:
    # controllers/autoscaler: node_writes.py (GET + PUT of a node's taints and cordon),
    # clusterapi_provider.py (/scale of MachineDeployments and MachineSets; GET + PUT of a
    # Machine's delete-machine annotation), loop_status.py (the status ConfigMap in --namespace),
    # scale_down_actuator.py (pods/eviction).
    requests = [
        Request(verb="get", group="", resource="nodes", name="node-1"),
        Request(verb="update", group="", resource="nodes", name="node-1"),
        Request(verb="create", group="", resource="configmaps", namespace="kube-system"),
        Request(
            verb="update",
            group="",
            resource="configmaps",
            namespace="kube-system",
            name="cluster-autoscaler-status",
        ),
    ]
    for namespace in (install_namespace(), OTHER_NAMESPACE):
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
    # no other ConfigMap may be rewritten
    other = Request(
        verb="update", group="", resource="configmaps", namespace="kube-system", name="coredns"
    )
    assert _refused([other]) == [str(other)]


def test_every_write_kubescale_makes_is_allowed() -> None:
    requests = _static_requests()
    assert len(requests) > 40
    assert _refused(requests) == []


# Upstream VPA's ClusterRoles for admission-controller, recommender and updater
# (deploy/vpa-rbac.yaml: system:metrics-reader, vpa-actor, vpa-status-actor,
# vpa-checkpoint-actor, evictioner, vpa-target-reader, vpa-admission-controller,
# vpa-status-reader, vpa-updater-in-place), without the retired poc.autoscaling.k8s.io and
# extensions groups. Leases are granted cluster-wide upstream; kubescale keeps them to its own
# namespace, where its components put them.
UPSTREAM_GRANTS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("metrics.k8s.io", ("pods",), ("get", "list")),
    ("", ("pods", "nodes", "limitranges", "configmaps"), ("get", "list", "watch")),
    ("", ("events",), ("get", "list", "watch", "create", "patch", "update")),
    ("autoscaling.k8s.io", ("verticalpodautoscalers",), ("get", "list", "watch")),
    ("autoscaling.k8s.io", ("verticalpodautoscalers/status",), ("get", "patch")),
    (
        "autoscaling.k8s.io",
        ("verticalpodautoscalercheckpoints",),
        ("get", "list", "watch", "create", "patch", "delete"),
    ),
    ("", ("namespaces",), ("get", "list")),
    ("apps", ("replicasets",), ("get",)),
    ("", ("pods/eviction",), ("create",)),
    ("*", ("*/scale",), ("get", "watch")),
    ("", ("replicationcontrollers",), ("get", "list", "watch")),
    (
        "apps",
        ("daemonsets", "deployments", "replicasets", "statefulsets"),
        ("get", "list", "watch"),
    ),
    ("batch", ("jobs", "cronjobs"), ("get", "list", "watch")),
    (
        "admissionregistration.k8s.io",
        ("mutatingwebhookconfigurations",),
        ("create", "delete", "get", "list"),
    ),
    ("", ("pods/resize",), ("patch",)),
    ("", ("pods",), ("patch",)),
]


def _upstream_requests() -> list[Request]:
    requests = []
    for group, resources, verbs in UPSTREAM_GRANTS:
        for resource in resources:
            plural, _, subresource = resource.partition("/")
            if plural == "*":
                cases = [("apps", "deployments"), ("example.com", "widgets")]
            else:
                cases = [(group, plural)]
            for request_group, request_plural in cases:
                for verb in verbs:
                    requests += _everywhere(verb, request_group, request_plural, subresource)
    requests += [
        Request(
            verb=verb, group="coordination.k8s.io", resource="leases", namespace=install_namespace()
        )
        for verb in ("create", "update", "get", "list", "watch")
    ]
    return requests


def test_kubescale_may_do_whatever_upstream_vpa_may() -> None:
    assert _refused(_upstream_requests()) == []


def test_nothing_beyond_what_kubescale_needs() -> None:
    # No secrets, no RBAC escalation, no deleting workloads or pods outside the Eviction API.
    for request in (
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
    ):
        assert not allowed(_objects(), account=_account(), request=request), str(request)


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
