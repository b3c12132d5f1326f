"""Every request path is built by one function that validates and escapes each segment.

Rules from apimachinery's validation (``IsDNS1123Subdomain`` for groups, ``IsDNS1035Label`` for
versions and resources, ``IsDNS1123Label`` for namespaces, ``ValidatePathSegmentName`` for
object names); the property checks that whatever the segments, a path that is built survives
an HTTP client's normalisation unchanged and splits back into exactly the segments given.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from yarl import URL

import kubescale
from kubescale.kube.api_paths import (
    InvalidPathSegment,
    api_path,
    metrics_api_path,
    split_api_version,
)
from kubescale.kube.resources import ALL, DEPLOYMENTS, NODES, PODS

PATHS = [
    # (arguments, path)
    ({"group": "", "version": "v1"}, "/api/v1"),
    ({"group": "apps", "version": "v1"}, "/apis/apps/v1"),
    ({"group": "", "version": "v1", "plural": "pods"}, "/api/v1/pods"),
    (
        {"group": "", "version": "v1", "plural": "pods", "namespace": "default"},
        "/api/v1/namespaces/default/pods",
    ),
    (
        {
            "group": "apps",
            "version": "v1",
            "plural": "deployments",
            "namespace": "ns",
            "name": "web",
            "subresource": "scale",
        },
        "/apis/apps/v1/namespaces/ns/deployments/web/scale",
    ),
    (
        {"group": "autoscaling.k8s.io", "version": "v1beta2", "plural": "verticalpodautoscalers"},
        "/apis/autoscaling.k8s.io/v1beta2/verticalpodautoscalers",
    ),
    # names are escaped: RBAC-style names with ':' stay one segment
    (
        {
            "group": "rbac.authorization.k8s.io",
            "version": "v1",
            "plural": "clusterroles",
            "name": "system:controller:x",
        },
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Acontroller%3Ax",
    ),
    (
        {"group": "", "version": "v1", "plural": "pods", "namespace": "d", "name": "a?b#c"},
        "/api/v1/namespaces/d/pods/a%3Fb%23c",
    ),
]


@pytest.mark.parametrize(("arguments", "path"), PATHS)
def test_paths(arguments: dict[str, str], path: str) -> None:
    assert api_path(**arguments) == path


REFUSED = [
    # (arguments, what the message names)
    ({"group": "../../api/v1/namespaces/kube-system/secrets", "version": "v1"}, "API group"),
    ({"group": "apps?watch=true&x=", "version": "v1"}, "API group"),
    ({"group": "Apps", "version": "v1"}, "API group"),
    ({"group": "apps.", "version": "v1"}, "API group"),
    ({"group": "a" * 254, "version": "v1"}, "API group"),
    ({"group": "apps", "version": "v1#"}, "API version"),
    ({"group": "apps", "version": "1v"}, "API version"),
    ({"group": "apps", "version": ""}, "API version"),
    ({"group": "", "version": "v1", "plural": "pods/../secrets"}, "resource"),
    ({"group": "", "version": "v1", "plural": "Pods"}, "resource"),
    ({"group": "", "version": "v1", "plural": "pods", "namespace": "kube system"}, "namespace"),
    ({"group": "", "version": "v1", "plural": "pods", "namespace": "../x"}, "namespace"),
    ({"group": "", "version": "v1", "plural": "pods", "namespace": "a" * 64}, "namespace"),
    ({"group": "", "version": "v1", "plural": "pods", "name": ".."}, "object name"),
    ({"group": "", "version": "v1", "plural": "pods", "name": "."}, "object name"),
    ({"group": "", "version": "v1", "plural": "pods", "name": "a/b"}, "object name"),
    ({"group": "", "version": "v1", "plural": "pods", "name": "a%2Fb"}, "object name"),
    ({"group": "", "version": "v1", "plural": "pods", "name": "a b"}, "object name"),
    ({"group": "", "version": "v1", "plural": "pods", "name": "a\nb"}, "object name"),
    (
        {"group": "", "version": "v1", "plural": "pods", "name": "p", "subresource": "../x"},
        "subresource",
    ),
    ({"group": "", "version": "v1", "plural": "pods", "subresource": "status"}, "subresource"),
    ({"group": "", "version": "v1", "name": "p"}, "needs a resource"),
]


@pytest.mark.parametrize(("arguments", "named"), REFUSED)
def test_refused_segments_name_themselves(arguments: dict[str, str], named: str) -> None:
    with pytest.raises(InvalidPathSegment, match=named):
        api_path(**arguments)


# The metrics APIs' paths (HPA): segments from an HPA spec, each a path segment, escaped.
METRICS_PATHS = [
    # (group, segments, path)
    ("metrics.k8s.io", ["pods"], "/apis/metrics.k8s.io/v1beta1/namespaces/ns/pods"),
    # `*` alone stays literal: upstream's custom metrics client asks for every pod so
    ("custom.metrics.k8s.io", ["pods", "*", "http_requests"],
     "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/pods/*/http_requests"),
    # a Prometheus-style name keeps its meaning: ':' is escaped, the server decodes it
    ("custom.metrics.k8s.io", ["deployments.apps", "web", "job:rate5m"],
     "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/deployments.apps/web/job%3Arate5m"),
    # '?' and '#' in a metric name stay in its segment
    ("external.metrics.k8s.io", ["queue?x=1#y"],
     "/apis/external.metrics.k8s.io/v1beta1/namespaces/ns/queue%3Fx%3D1%23y"),
]  # fmt: skip


@pytest.mark.parametrize(("group", "segments", "path"), METRICS_PATHS)
def test_metrics_paths(group: str, segments: list[str], path: str) -> None:
    assert (
        metrics_api_path(group=group, version="v1beta1", namespace="ns", segments=segments) == path
    )


@pytest.mark.parametrize(
    ("namespace", "segments"),
    [("ns", ["..", "secrets"]), ("ns", ["pods", "a/b"]), ("ns", ["%2e%2e"]), ("ns", [" "]),
     ("kube system", ["pods"]), ("../x", ["pods"])],
)  # fmt: skip
def test_metrics_paths_refuse_what_would_leave_their_segment(
    namespace: str, segments: list[str]
) -> None:
    with pytest.raises(InvalidPathSegment):
        metrics_api_path(
            group="custom.metrics.k8s.io", version="v1beta2", namespace=namespace,
            segments=segments,
        )  # fmt: skip


@pytest.mark.parametrize(
    ("api_version", "parsed"),
    [
        ("v1", ("", "v1")),
        ("apps/v1", ("apps", "v1")),
        ("x-k8s.io/v1beta1", ("x-k8s.io", "v1beta1")),
    ],
)
def test_split_api_version(api_version: str, parsed: tuple[str, str]) -> None:
    assert split_api_version(api_version) == parsed


@pytest.mark.parametrize("api_version", ["", "/v1", "a/b/v1", "apps/", "../v1", "apps/v1?x"])
def test_split_api_version_refuses(api_version: str) -> None:
    with pytest.raises(InvalidPathSegment):
        split_api_version(api_version)


def test_the_catalogue_builds_its_paths_through_it() -> None:
    assert PODS.object_path("p", "ns", "eviction") == "/api/v1/namespaces/ns/pods/p/eviction"
    assert NODES.object_path("n1") == "/api/v1/nodes/n1"
    assert DEPLOYMENTS.collection_path() == "/apis/apps/v1/deployments"
    assert DEPLOYMENTS.base_path() == "/apis/apps/v1"
    for rt in ALL:
        assert rt.collection_path("default" if rt.namespaced else None)
    with pytest.raises(InvalidPathSegment):
        DEPLOYMENTS.object_path("", "ns")
    with pytest.raises(InvalidPathSegment):
        DEPLOYMENTS.object_path("../../secrets/x", "ns")


segment_text = st.one_of(
    st.text(
        alphabet=st.sampled_from("abcz09-.:/?#%@ ~!$&'()*+,;=_AZ\t\u00e9"), min_size=0, max_size=12
    ),
    st.sampled_from(["..", ".", "%2e%2e", "a/../b", "?watch=1", "#", "a%2Fb"]),
)


VALID: dict[str, tuple[str | None, ...]] = {
    "group": ("", "apps", "cluster.x-k8s.io"),
    "version": ("v1", "v1beta1"),
    "plural": ("pods", "machinedeployments", ""),
    "namespace": (None, "default", "kube-system"),
    "name": ("web", "system:node:n1", "a.b-c", ""),
    "subresource": ("", "scale", "status"),
}


@st.composite
def segments(draw: st.DrawFn) -> dict[str, str | None]:
    """Valid segments, one or two of them replaced by any text."""
    chosen = {field: draw(st.sampled_from(values)) for field, values in VALID.items()}
    for field in draw(st.lists(st.sampled_from(sorted(VALID)), min_size=1, max_size=2)):
        chosen[field] = draw(segment_text)
    return chosen


def _valid(**changes: str) -> dict[str, str | None]:
    return {**{field: values[1] for field, values in VALID.items()}, **changes}


@settings(max_examples=300)
@given(segments())
@example(_valid(name=".."))
@example(_valid(name="."))
@example(_valid(name="a?watch=1#x"))
@example(_valid(group="apps/../../api/v1"))
def test_a_built_path_is_exactly_its_segments(parts: dict[str, Any]) -> None:
    group, version, plural = parts["group"], parts["version"], parts["plural"]
    namespace, name, subresource = parts["namespace"], parts["name"], parts["subresource"]
    try:
        path = api_path(
            group=group,
            version=version,
            plural=plural,
            namespace=namespace,
            name=name,
            subresource=subresource,
        )
    except InvalidPathSegment:
        return
    # what an HTTP client sends: dot segments removed, '?' and '#' ending the path
    url = URL("https://kube.example" + path)
    assert url.raw_query_string == ""
    assert url.raw_fragment == ""
    expected = ["apis", group] if group else ["api"]
    expected.append(version)
    expected += ["namespaces", namespace] if namespace is not None else []
    expected += [plural] if plural else []  # no plural: the group version's discovery path
    expected += [name] if name else []
    expected += [subresource] if subresource else []
    assert [unquote(part) for part in path.split("/")[1:]] == expected
    assert [unquote(part) for part in url.raw_path.split("/")[1:]] == expected


# --- nothing else builds a path ------------------------------------------------------------

PRODUCT = Path(kubescale.__file__).parent
# Prometheus' HTTP API (kubescale/prometheus/) also lives under /api/v1: another server.
NOT_KUBERNETES = {PRODUCT / "prometheus"}
BUILDER = PRODUCT / "kube" / "api_paths.py"


def _product_files() -> list[Path]:
    return [
        path
        for path in sorted(PRODUCT.rglob("*.py"))
        if "sim" not in path.relative_to(PRODUCT).parts[:1]
        and not any(path.is_relative_to(d) for d in NOT_KUBERNETES)
    ]


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def test_no_other_product_code_builds_an_api_server_path() -> None:
    offenders = []
    for path in _product_files():
        if path == BUILDER:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, text in _strings(tree):
            # a path literal, or the start of one in an f-string
            if text.startswith(("/api/", "/apis/")) or text in ("/api", "/apis"):
                offenders.append(f"{path.relative_to(PRODUCT)}:{line}: {text!r}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "ApiPath"
            ):
                offenders.append(f"{path.relative_to(PRODUCT)}:{node.lineno}: ApiPath(...)")
    assert offenders == []


def test_the_scan_would_see_an_offender(tmp_path: Path) -> None:
    # The check above must be able to fail: the old discovery code, as it was written.
    source = 'path = f"/apis/{group}/{version}" if group else f"/api/{version}"\n'
    assert [text for _, text in _strings(ast.parse(source))] == ["/apis/", "/", "/api/"]
