"""Which webhooks kube-apiserver calls for a request: rules, scope, namespace and object selectors.

Expected values follow ``predicates/rules/rules.go``, ``predicates/namespace/matcher.go`` and
``predicates/object/matcher.go`` of k8s.io/apiserver and the admissionregistration/v1 API docs
(``pods/*`` covers the subresources *and*, as upstream's splitResource makes it, the pod itself;
``*`` covers no subresource; a Namespace object is Cluster scope and is matched by
namespaceSelector against its own labels; cluster-scoped objects are never exempted by a
namespaceSelector; objectSelector matches if the new *or* the old object matches).
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.kube.resources import DEPLOYMENTS, NAMESPACES, NODES, PODS, ResourceType
from kubescale.sim.apiserver.admission_matching import AdmissionDenied, webhook_matches
from tests import builders

pod = functools.partial(
    builders.pods.pod, labels={}, containers=[builders.pods.container(image="nginx")]
)
node = functools.partial(builders.nodes.node, name="n1", labels={})
deployment = functools.partial(builders.workloads.deployment, name="web")
ns = builders.meta.namespace
BARE = {"labels": None}
"""Metadata extra of a namespace whose labels are null."""


SCALE = {
    "apiVersion": "autoscaling/v1",
    "kind": "Scale",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 3},
}


def rule(
    *,
    operations: list[str] | None = None,
    groups: list[str] | None = None,
    versions: list[str] | None = None,
    resources: list[str] | None = None,
    scope: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "operations": operations if operations is not None else ["*"],
        "apiGroups": groups if groups is not None else ["*"],
        "apiVersions": versions if versions is not None else ["*"],
        "resources": resources if resources is not None else ["*/*"],
    }
    if scope is not None:
        out["scope"] = scope
    return out


def hook(*rules: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": "check.example.com", "rules": list(rules), **fields}


DEFAULT_NS = ns(name="default", labels={"env": "prod"})


def matches(
    webhook: dict[str, Any],
    *,
    operation: str = "CREATE",
    resource: ResourceType = PODS,
    subresource: str = "",
    obj: dict[str, Any] | None = None,
    old_obj: dict[str, Any] | None = None,
    namespace_obj: dict[str, Any] | None = DEFAULT_NS,
) -> bool:
    return webhook_matches(
        webhook,
        operation=operation,
        resource=resource,
        subresource=subresource,
        obj=obj if obj is not None else pod(),
        old_obj=old_obj,
        namespace_obj=namespace_obj,
    )


# --- rules ------------------------------------------------------------------------------------

RuleCase = tuple[str, dict[str, Any], str, ResourceType, str, dict[str, Any], bool]

RULE_CASES: list[RuleCase] = [
    # (id, rule, operation, resource, subresource, object, expected)
    ("create-only-on-create", rule(operations=["CREATE"]), "CREATE", PODS, "", pod(), True),
    ("create-only-on-update", rule(operations=["CREATE"]), "UPDATE", PODS, "", pod(), False),
    ("ops-list", rule(operations=["DELETE", "UPDATE"]), "UPDATE", PODS, "", pod(), True),
    ("ops-wildcard", rule(operations=["*"]), "UPDATE", PODS, "", pod(), True),
    ("no-ops", rule(operations=[]), "CREATE", PODS, "", pod(), False),
    ("core-group", rule(groups=[""]), "CREATE", PODS, "", pod(), True),
    ("apps-group-for-pod", rule(groups=["apps"]), "CREATE", PODS, "", pod(), False),
    ("apps-group-for-deploy", rule(groups=["apps"]), "CREATE", DEPLOYMENTS, "", deployment(), True),
    ("version-v1", rule(versions=["v1"]), "CREATE", PODS, "", pod(), True),
    ("version-v1beta1", rule(versions=["v1beta1"]), "CREATE", PODS, "", pod(), False),
    ("pods", rule(resources=["pods"]), "CREATE", PODS, "", pod(), True),
    ("deployments-not-pods", rule(resources=["deployments"]), "CREATE", PODS, "", pod(), False),
    ("res-wildcard-main", rule(resources=["*"]), "CREATE", PODS, "", pod(), True),
    ("res-wildcard-no-sub", rule(resources=["*"]), "UPDATE", DEPLOYMENTS, "scale", SCALE, False),
    ("plain-no-sub", rule(resources=["deployments"]), "UPDATE", DEPLOYMENTS, "scale", SCALE, False),
    (
        "exact-sub",
        rule(resources=["deployments/scale"]),
        "UPDATE",
        DEPLOYMENTS,
        "scale",
        SCALE,
        True,
    ),
    ("exact-sub-main", rule(resources=["deployments/scale"]), "UPDATE", DEPLOYMENTS, "", {}, False),
    ("any-res-scale", rule(resources=["*/scale"]), "UPDATE", DEPLOYMENTS, "scale", SCALE, True),
    ("any-res-scale-main", rule(resources=["*/scale"]), "UPDATE", DEPLOYMENTS, "", {}, False),
    ("res-any-sub", rule(resources=["deployments/*"]), "UPDATE", DEPLOYMENTS, "scale", SCALE, True),
    # splitResource: "pods/*" has sub "*", which also matches the empty subresource
    ("res-any-sub-main", rule(resources=["pods/*"]), "CREATE", PODS, "", pod(), True),
    ("all-all-sub", rule(resources=["*/*"]), "UPDATE", DEPLOYMENTS, "scale", SCALE, True),
    ("all-all-main", rule(resources=["*/*"]), "CREATE", PODS, "", pod(), True),
    ("pods-status-sub", rule(resources=["pods/status"]), "UPDATE", PODS, "status", pod(), True),
    ("pods-status-main", rule(resources=["pods/status"]), "UPDATE", PODS, "", pod(), False),
    ("namespaced-pod", rule(scope="Namespaced"), "CREATE", PODS, "", pod(), True),
    ("namespaced-node", rule(scope="Namespaced"), "CREATE", NODES, "", node(), False),
    (
        "namespaced-namespace",
        rule(scope="Namespaced"),
        "UPDATE",
        NAMESPACES,
        "",
        ns(name="team", metadata_extra=BARE),
        False,
    ),
    ("cluster-pod", rule(scope="Cluster"), "CREATE", PODS, "", pod(), False),
    ("cluster-node", rule(scope="Cluster"), "CREATE", NODES, "", node(), True),
    (
        "cluster-namespace",
        rule(scope="Cluster"),
        "UPDATE",
        NAMESPACES,
        "",
        ns(name="t", metadata_extra=BARE),
        True,
    ),
    ("all-scope-pod", rule(scope="*"), "CREATE", PODS, "", pod(), True),
    ("all-scope-node", rule(scope="*"), "CREATE", NODES, "", node(), True),
]


@pytest.mark.parametrize("case", RULE_CASES, ids=[case[0] for case in RULE_CASES])
def test_rules(case: RuleCase) -> None:
    _, rule_, operation, resource, subresource, obj, expected = case
    webhook = hook(rule_)
    got = matches(webhook, operation=operation, resource=resource, subresource=subresource, obj=obj)
    assert got is expected


def test_any_rule_suffices_and_no_rule_matches_nothing() -> None:
    apps_only = rule(groups=["apps"])
    core_only = rule(groups=[""])
    assert matches(hook(apps_only, core_only)) is True
    assert matches(hook(apps_only)) is False
    assert matches(hook()) is False


# --- namespaceSelector ------------------------------------------------------------------------

PROD = {"matchLabels": {"env": "prod"}}
NOT_SYSTEM = {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["system"]}]}

NAMESPACE_CASES = [
    # (id, selector, resource, obj, namespace_obj, expected)
    ("prod-in-prod", PROD, PODS, pod(), ns(name="default", labels={"env": "prod"}), True),
    ("prod-in-dev", PROD, PODS, pod(), ns(name="default", labels={"env": "dev"}), False),
    ("prod-in-unlabelled", PROD, PODS, pod(), ns(name="default", metadata_extra=BARE), False),
    ("notin-unlabelled", NOT_SYSTEM, PODS, pod(), ns(name="default", metadata_extra=BARE), True),
    ("notin-system", NOT_SYSTEM, PODS, pod(), ns(name="default", labels={"tier": "system"}), False),
    ("empty-selector", {}, PODS, pod(), ns(name="default", labels={"env": "dev"}), True),
    # cluster-scoped objects other than namespaces are never exempted
    ("node-always", PROD, NODES, node(), None, True),
    # a Namespace being written is matched against its own (new) labels
    ("namespace-own-labels", PROD, NAMESPACES, ns(name="a", labels={"env": "prod"}), None, True),
    ("namespace-own-labels-no", PROD, NAMESPACES, ns(name="a", labels={"env": "dev"}), None, False),
]


@pytest.mark.parametrize(
    ("selector", "resource", "obj", "namespace_obj", "expected"),
    [case[1:] for case in NAMESPACE_CASES],
    ids=[case[0] for case in NAMESPACE_CASES],
)
def test_namespace_selector(
    selector: dict[str, Any],
    resource: ResourceType,
    obj: dict[str, Any],
    namespace_obj: dict[str, Any] | None,
    expected: bool,
) -> None:
    webhook = hook(rule(), namespaceSelector=selector)
    assert (
        matches(
            webhook, resource=resource, obj=obj, namespace_obj=namespace_obj, operation="CREATE"
        )
        is expected
    )


def test_namespace_selector_on_missing_namespace_is_404() -> None:
    webhook = hook(rule(), namespaceSelector=PROD)
    with pytest.raises(AdmissionDenied) as denied:
        matches(webhook, obj=pod(namespace="ghost"), namespace_obj=None)
    assert denied.value.status["code"] == 404
    assert denied.value.status["reason"] == "NotFound"
    assert denied.value.status["message"] == 'namespaces "ghost" not found'


def test_missing_namespace_does_not_matter_when_rules_do_not_match() -> None:
    webhook = hook(rule(groups=["apps"]), namespaceSelector=PROD)
    assert matches(webhook, obj=pod(namespace="ghost"), namespace_obj=None) is False


def test_unparsable_selector_is_an_internal_error() -> None:
    webhook = hook(rule(), objectSelector={"matchLabels": {"bad key!": "x"}})
    with pytest.raises(AdmissionDenied) as denied:
        matches(webhook)
    assert denied.value.status["code"] == 500
    assert denied.value.status["message"].startswith("Internal error occurred: ")


# --- objectSelector ---------------------------------------------------------------------------

WEB = {"matchLabels": {"app": "web"}}
NOT_OPTED_OUT = {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}

OBJECT_CASES = [
    # (id, selector, new labels, old labels or None, expected)
    ("new-matches", WEB, {"app": "web"}, None, True),
    ("new-differs", WEB, {"app": "db"}, None, False),
    ("old-matches", WEB, {"app": "db"}, {"app": "web"}, True),
    ("neither", WEB, {"app": "db"}, {"app": "cache"}, False),
    ("does-not-exist", NOT_OPTED_OUT, {"app": "web"}, None, True),
    ("opted-out", NOT_OPTED_OUT, {"skip": "true"}, None, False),
    ("opted-out-now-only", NOT_OPTED_OUT, {"skip": "true"}, {}, True),
    ("empty", {}, {}, None, True),
]


@pytest.mark.parametrize(
    ("selector", "new_labels", "old_labels", "expected"),
    [case[1:] for case in OBJECT_CASES],
    ids=[case[0] for case in OBJECT_CASES],
)
def test_object_selector(
    selector: dict[str, Any],
    new_labels: dict[str, str],
    old_labels: dict[str, str] | None,
    expected: bool,
) -> None:
    old = None if old_labels is None else pod(labels=old_labels)
    operation = "CREATE" if old is None else "UPDATE"
    webhook = hook(rule(), objectSelector=selector)
    assert (
        matches(webhook, operation=operation, obj=pod(labels=new_labels), old_obj=old) is expected
    )


# --- invariants -------------------------------------------------------------------------------

OPERATIONS = ["CREATE", "UPDATE", "DELETE", "CONNECT"]
GROUPS = ["", "apps", "batch"]
VERSIONS = ["v1", "v1beta1", "v2"]
RESOURCES = ["pods", "deployments", "nodes", "pods/status", "deployments/scale", "*/scale"]
SCOPES = [None, "*", "Cluster", "Namespaced"]
REQUESTS = [
    ("CREATE", PODS, "", pod()),
    ("UPDATE", PODS, "status", pod()),
    ("UPDATE", DEPLOYMENTS, "scale", SCALE),
    ("CREATE", DEPLOYMENTS, "", deployment()),
    ("CREATE", NODES, "", node()),
    ("UPDATE", NAMESPACES, "", ns(name="team", metadata_extra=BARE)),
]

rules_strategy = st.builds(
    rule,
    operations=st.lists(st.sampled_from(OPERATIONS), max_size=2),
    groups=st.lists(st.sampled_from(GROUPS), max_size=2),
    versions=st.lists(st.sampled_from(VERSIONS), max_size=2),
    resources=st.lists(st.sampled_from(RESOURCES), max_size=2),
    scope=st.sampled_from(SCOPES),
)


@given(
    rule_=rules_strategy,
    request=st.sampled_from(REQUESTS),
    widen=st.sampled_from(["operations", "apiGroups", "apiVersions", "resources", "scope"]),
)
def test_widening_a_rule_never_unmatches(
    rule_: dict[str, Any], request: tuple[str, ResourceType, str, dict[str, Any]], widen: str
) -> None:
    operation, resource, subresource, obj = request
    wider = dict(rule_)
    wider[widen] = {"resources": ["*/*"], "scope": "*"}.get(widen, ["*"])
    narrow = matches(
        hook(rule_), operation=operation, resource=resource, subresource=subresource, obj=obj
    )
    wide = matches(
        hook(wider), operation=operation, resource=resource, subresource=subresource, obj=obj
    )
    assert wide or not narrow


@given(first=rules_strategy, second=rules_strategy, request=st.sampled_from(REQUESTS))
def test_rules_are_a_disjunction(
    first: dict[str, Any],
    second: dict[str, Any],
    request: tuple[str, ResourceType, str, dict[str, Any]],
) -> None:
    operation, resource, subresource, obj = request
    kwargs: dict[str, Any] = {
        "operation": operation,
        "resource": resource,
        "subresource": subresource,
        "obj": obj,
    }
    both = matches(hook(first, second), **kwargs)
    assert both == (matches(hook(first), **kwargs) or matches(hook(second), **kwargs))


label_sets = st.dictionaries(
    st.sampled_from(["app", "tier", "env"]), st.sampled_from(["a", "b"]), max_size=3
)


@given(labels=label_sets, picked=st.sets(st.sampled_from(["app", "tier", "env"])))
def test_object_selector_from_own_labels_always_matches(
    labels: dict[str, str], picked: set[str]
) -> None:
    selector = {"matchLabels": {key: value for key, value in labels.items() if key in picked}}
    assert matches(hook(rule(), objectSelector=selector), obj=pod(labels=labels)) is True
