"""The three PATCH content types: RFC 6902 and RFC 7386 appendix examples, strategic merge
patch as kube-apiserver applies it to built-in kinds, and invariants (no input is mutated, a
merge patch computed from a diff reproduces its target)."""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.sim.apiserver.patching import (
    PatchError,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
    supports_strategic_merge,
)
from tests import builders

POD = functools.partial(builders.pods.pod, name="p", namespace=None, containers=None)


def canonical(value: Any) -> str:
    """Type-exact comparison: ``true`` is not ``1`` and key order does not matter."""
    return json.dumps(value, sort_keys=True)


# --- RFC 6902 appendix A ---------------------------------------------------------------------

RFC6902_EXAMPLES: list[tuple[str, Any, list[dict[str, Any]], Any]] = [
    (
        "A.1 adding an object member",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux"}],
        {"baz": "qux", "foo": "bar"},
    ),
    (
        "A.2 adding an array element",
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    (
        "A.3 removing an object member",
        {"baz": "qux", "foo": "bar"},
        [{"op": "remove", "path": "/baz"}],
        {"foo": "bar"},
    ),
    (
        "A.4 removing an array element",
        {"foo": ["bar", "qux", "baz"]},
        [{"op": "remove", "path": "/foo/1"}],
        {"foo": ["bar", "baz"]},
    ),
    (
        "A.5 replacing a value",
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        "A.6 moving a value",
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        "A.7 moving an array element",
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        "A.8 testing a value: success",
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [
            {"op": "test", "path": "/baz", "value": "qux"},
            {"op": "test", "path": "/foo/1", "value": 2},
        ],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        "A.9 testing a value: error",
        {"baz": "qux"},
        [{"op": "test", "path": "/baz", "value": "bar"}],
        PatchError,
    ),
    (
        "A.10 adding a nested member object",
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        "A.11 ignoring unrecognized elements",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
    ),
    (
        "A.12 adding to a nonexistent target",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": "qux"}],
        PatchError,
    ),
    # A.13 (an operation with two "op" members) is a JSON-text defect the server's decoder sees;
    # decoded (last member wins) it removes the missing /baz, which fails all the same.
    (
        "A.13 invalid JSON patch document",
        {"foo": "bar"},
        [{"op": "remove", "path": "/baz", "value": "qux"}],
        PatchError,
    ),
    (
        "A.14 ~ escape ordering",
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": 10}],
        {"/": 9, "~1": 10},
    ),
    (
        "A.15 comparing strings and numbers",
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": "10"}],
        PatchError,
    ),
    (
        "A.16 adding an array value",
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
]


@pytest.mark.parametrize(
    ("document", "patch", "expected"),
    [
        pytest.param(doc, patch, expected, id=name)
        for name, doc, patch, expected in RFC6902_EXAMPLES
    ],
)
def test_rfc6902_appendix_a(document: Any, patch: list[dict[str, Any]], expected: Any) -> None:
    if expected is PatchError:
        with pytest.raises(PatchError):
            apply_json_patch(document, patch)
    else:
        assert canonical(apply_json_patch(document, patch)) == canonical(expected)


JSON_PATCH_CASES: list[tuple[str, Any, list[dict[str, Any]], Any]] = [
    (
        "~1 in a token is a slash",
        {"a/b": 1},
        [{"op": "replace", "path": "/a~1b", "value": 2}],
        {"a/b": 2},
    ),
    (
        "empty path replaces the document",
        {"a": 1},
        [{"op": "replace", "path": "", "value": [1]}],
        [1],
    ),
    (
        "add at the end index",
        {"a": [1]},
        [{"op": "add", "path": "/a/1", "value": 2}],
        {"a": [1, 2]},
    ),
    (
        "add replaces an existing member",
        {"a": 1},
        [{"op": "add", "path": "/a", "value": 2}],
        {"a": 2},
    ),
    (
        "copy duplicates a subtree",
        {"a": {"b": [1]}},
        [{"op": "copy", "from": "/a", "path": "/c"}],
        {"a": {"b": [1]}, "c": {"b": [1]}},
    ),
    (
        "move onto itself is a no-op",
        {"a": 1},
        [{"op": "move", "from": "/a", "path": "/a"}],
        {"a": 1},
    ),
    (
        "test compares numbers by value",
        {"n": 1},
        [{"op": "test", "path": "/n", "value": 1.0}],
        {"n": 1},
    ),
    (
        "test compares objects regardless of member order",
        {"o": {"x": 1, "y": [True, None]}},
        [{"op": "test", "path": "/o", "value": {"y": [True, None], "x": 1}}],
        {"o": {"x": 1, "y": [True, None]}},
    ),
    (
        "operations apply in sequence",
        {"spec": {"replicas": 1}},
        [
            {"op": "test", "path": "/spec/replicas", "value": 1},
            {"op": "replace", "path": "/spec/replicas", "value": 3},
            {"op": "add", "path": "/metadata", "value": {"labels": {}}},
            {"op": "add", "path": "/metadata/labels/app", "value": "web"},
        ],
        {"spec": {"replicas": 3}, "metadata": {"labels": {"app": "web"}}},
    ),
]


@pytest.mark.parametrize(
    ("document", "patch", "expected"),
    [
        pytest.param(doc, patch, expected, id=name)
        for name, doc, patch, expected in JSON_PATCH_CASES
    ],
)
def test_json_patch_cases(document: Any, patch: list[dict[str, Any]], expected: Any) -> None:
    assert canonical(apply_json_patch(document, patch)) == canonical(expected)


JSON_PATCH_ERRORS: list[tuple[str, Any, Any, str]] = [
    (
        "replace of a missing key",
        {"spec": {}},
        [{"op": "replace", "path": "/spec/x", "value": 1}],
        "jsonpatch replace operation does not apply: doc is missing key: /spec/x",
    ),
    (
        "remove of a missing member",
        {"spec": {}},
        [{"op": "remove", "path": "/spec/x"}],
        "jsonpatch remove operation does not apply: doc is missing path: /spec/x",
    ),
    (
        "add under a missing parent",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz/bat", "value": 1}],
        "doc is missing path: /baz/bat",
    ),
    (
        "move from a missing path",
        {"a": 1},
        [{"op": "move", "from": "/b", "path": "/c"}],
        "doc is missing from path: /b",
    ),
    (
        "copy from a missing path",
        {"a": 1},
        [{"op": "copy", "from": "/b/0", "path": "/c"}],
        "doc is missing from path: /b/0",
    ),
    (
        "index past the end",
        {"a": [1, 2]},
        [{"op": "add", "path": "/a/3", "value": 1}],
        "index 3 is out of bounds for an array of length 2 at /a/3",
    ),
    (
        "remove past the end",
        {"a": [1]},
        [{"op": "remove", "path": "/a/1"}],
        "index 1 is out of bounds for an array of length 1 at /a/1",
    ),
    (
        "leading zero index",
        {"a": [1, 2]},
        [{"op": "replace", "path": "/a/01", "value": 1}],
        '"01" is not a valid array index in /a/01',
    ),
    ('"-" outside add', {"a": [1]}, [{"op": "remove", "path": "/a/-"}], "missing path: /a/-"),
    (
        "test mismatch",
        {"a": True},
        [{"op": "test", "path": "/a", "value": 1}],
        "the value at /a is not the expected value",
    ),
    (
        "move into own child",
        {"a": {"b": 1}},
        [{"op": "move", "from": "/a", "path": "/a/b/c"}],
        "/a cannot be moved into its own child /a/b/c",
    ),
    (
        "pointer without slash",
        {"a": 1},
        [{"op": "remove", "path": "a"}],
        'invalid JSON pointer "a"',
    ),
    ("bad escape", {"a": 1}, [{"op": "remove", "path": "/~2"}], 'invalid JSON pointer "/~2"'),
    ("unknown op", {}, [{"op": "merge", "path": "/a"}], 'unexpected kind "merge"'),
    ("missing value", {}, [{"op": "add", "path": "/a"}], "add operation on /a: missing value"),
    ("missing from", {"a": 1}, [{"op": "copy", "path": "/b"}], '"from" must be a JSON pointer'),
    ("not an array", {}, {"op": "add", "path": "/a", "value": 1}, "must be a JSON array"),
    ("not an object", {}, ["add"], "operation 0 is not a JSON object"),
    ("remove the document", {"a": 1}, [{"op": "remove", "path": ""}], "cannot remove the document"),
]


@pytest.mark.parametrize(
    ("document", "patch", "message"),
    [pytest.param(doc, patch, msg, id=name) for name, doc, patch, msg in JSON_PATCH_ERRORS],
)
def test_json_patch_errors_name_the_path(document: Any, patch: Any, message: str) -> None:
    with pytest.raises(PatchError, match=re.escape(message)):
        apply_json_patch(document, patch)


# --- RFC 7386 appendix A ---------------------------------------------------------------------

RFC7386_EXAMPLES: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("document", "patch", "expected"), RFC7386_EXAMPLES)
def test_rfc7386_appendix_a(document: Any, patch: Any, expected: Any) -> None:
    assert canonical(apply_merge_patch(document, patch)) == canonical(expected)


def test_merge_patch_keeps_member_order_of_the_document() -> None:
    result = apply_merge_patch({"a": 1, "b": 2, "c": 3}, {"a": 9, "d": 4, "b": None})
    assert list(result) == ["a", "c", "d"]


# --- strategic merge patch -------------------------------------------------------------------


def smp(document: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    return apply_strategic_merge_patch(
        document, patch, api_version=document["apiVersion"], kind=document["kind"]
    )


def names(items: list[dict[str, Any]], key: str = "name") -> list[Any]:
    return [item[key] for item in items]


APP = {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}
SIDECAR = {"name": "sidecar", "image": "proxy:1"}


def test_containers_merge_by_name_and_keep_the_others() -> None:
    result = smp(
        POD(spec={"containers": [APP, SIDECAR]}),
        {"spec": {"containers": [{"name": "app", "image": "app:2"}]}},
    )
    assert result["spec"]["containers"] == [
        {"name": "app", "image": "app:2", "env": [{"name": "A", "value": "1"}]},
        SIDECAR,
    ]


def test_kubectl_patch_tutorial_adds_a_container_and_replaces_tolerations() -> None:
    # kubernetes.io "Update API Objects in Place Using kubectl patch": the patched deployment
    # lists the new container (redis) before the existing one (nginx); tolerations have no
    # patch strategy, so the patch's list replaces the live one.
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "patch-demo"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": "nginx"}},
                "spec": {
                    "containers": [{"name": "patch-demo-ctr", "image": "nginx"}],
                    "tolerations": [
                        {"effect": "NoSchedule", "key": "dedicated", "value": "test-team"}
                    ],
                },
            },
        },
    }
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "patch-demo-ctr-2", "image": "redis"}],
                    "tolerations": [{"effect": "NoSchedule", "key": "disktype", "value": "ssd"}],
                }
            }
        }
    }
    template = smp(deployment, patch)["spec"]["template"]
    assert names(template["spec"]["containers"]) == ["patch-demo-ctr-2", "patch-demo-ctr"]
    assert template["spec"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "disktype", "value": "ssd"}
    ]
    assert template["metadata"] == {"labels": {"app": "nginx"}}


def test_patch_delete_directive_removes_a_container() -> None:
    result = smp(
        POD(spec={"containers": [APP, SIDECAR]}),
        {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}},
    )
    assert result["spec"]["containers"] == [APP]


def test_patch_replace_directive_on_a_list_and_on_a_map() -> None:
    document = POD(spec={"containers": [APP, SIDECAR]}, labels={"a": "1", "b": "2"})
    patch = {
        "metadata": {"labels": {"$patch": "replace", "c": "3"}},
        "spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}]},
    }
    result = smp(document, patch)
    assert result["metadata"]["labels"] == {"c": "3"}
    assert result["spec"]["containers"] == [{"name": "only", "image": "x"}]


def test_patch_delete_directive_on_a_map_empties_it() -> None:
    result = smp(
        POD(spec={"containers": [APP]}, labels={"a": "1"}),
        {"metadata": {"labels": {"$patch": "delete"}}},
    )
    assert result["metadata"]["labels"] == {}


def test_patch_merge_directive_on_a_map_is_the_default_merge() -> None:
    result = smp(
        POD(spec={"containers": [APP]}, labels={"a": "1"}),
        {"metadata": {"labels": {"$patch": "merge", "b": "2"}}},
    )
    assert result["metadata"]["labels"] == {"a": "1", "b": "2"}


def test_env_merges_by_name() -> None:
    app = {"name": "app", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    patch = {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
                }
            ]
        }
    }
    env = smp(POD(spec={"containers": [app]}), patch)["spec"]["containers"][0]["env"]
    # Patch items in patch order, the live-only A placed by its live position before B; the
    # new C follows B as it does in the patch.
    assert env == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "20"},
        {"name": "C", "value": "3"},
    ]


def test_env_entry_field_deleted_with_null() -> None:
    app = {"name": "app", "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}
    patch = {
        "spec": {
            "containers": [{"name": "app", "env": [{"name": "A", "valueFrom": None, "value": "v"}]}]
        }
    }
    env = smp(POD(spec={"containers": [app]}), patch)["spec"]["containers"][0]["env"]
    assert env == [{"name": "A", "value": "v"}]


def test_set_element_order_reorders_and_places_server_only_items() -> None:
    injected = {"name": "injected", "image": "mesh"}
    document = POD(spec={"containers": [injected, APP, SIDECAR]})
    # What kubectl apply sends to swap app and sidecar and add "new" at the end.
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}, {"name": "new"}],
            "containers": [{"name": "new", "image": "new:1"}],
        }
    }
    containers = smp(document, patch)["spec"]["containers"]
    assert names(containers) == ["injected", "sidecar", "app", "new"]
    assert containers[2] == APP


def test_set_element_order_for_primitives() -> None:
    document = POD(spec={"containers": [APP]}, metadata_extra={"finalizers": ["a", "b", "c"]})
    patch = {"metadata": {"$setElementOrder/finalizers": ["c", "a", "b"]}}
    assert smp(document, patch)["metadata"]["finalizers"] == ["c", "a", "b"]


def test_set_element_order_must_agree_with_the_patch_list() -> None:
    patch = {
        "spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
            "containers": [{"name": "sidecar", "image": "s"}, {"name": "app", "image": "a"}],
        }
    }
    with pytest.raises(PatchError, match=re.escape("spec.containers: the order in the patch list")):
        smp(POD(spec={"containers": [APP, SIDECAR]}), patch)


def test_delete_from_primitive_list_on_finalizers() -> None:
    document = POD(spec={"containers": [APP]}, metadata_extra={"finalizers": ["a", "b", "c"]})
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zz"]}}
    assert smp(document, patch)["metadata"]["finalizers"] == ["a", "c"]


def test_finalizers_merge_as_a_set_new_ones_first() -> None:
    document = POD(spec={"containers": [APP]}, metadata_extra={"finalizers": ["a", "b"]})
    result = smp(document, {"metadata": {"finalizers": ["b", "c"]}})
    assert result["metadata"]["finalizers"] == ["a", "b", "c"]
    result = smp(document, {"metadata": {"finalizers": ["c"]}})
    assert result["metadata"]["finalizers"] == ["c", "a", "b"]


def test_retain_keys_clears_the_other_strategy_fields() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
    }
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}
    assert smp(deployment, patch)["spec"]["strategy"] == {"type": "Recreate"}


def test_retain_keys_rejects_a_patch_setting_an_unlisted_key() -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"strategy": {}}}
    patch = {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}}
    with pytest.raises(
        PatchError, match=re.escape("spec.strategy: invalid patch format of retainKeys")
    ):
        smp(deployment, patch)


def test_volumes_merge_by_name_with_retain_keys() -> None:
    volumes = [{"name": "data", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]
    patch = {
        "spec": {
            "volumes": [
                {"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}
            ]
        }
    }
    result = smp(POD(spec={"containers": [APP], "volumes": volumes}), patch)
    assert result["spec"]["volumes"] == [
        {"name": "data", "hostPath": {"path": "/d"}},
        {"name": "cfg", "configMap": {"name": "c"}},
    ]


CONTAINER_LIST_CASES: list[tuple[str, str, list[Any], list[Any], list[Any]]] = [
    (
        "ports by containerPort",
        "ports",
        [{"containerPort": 80, "name": "http"}, {"containerPort": 443}],
        [{"containerPort": 80, "name": "web"}],
        [{"containerPort": 80, "name": "web"}, {"containerPort": 443}],
    ),
    (
        "volumeMounts by mountPath",
        "volumeMounts",
        [{"mountPath": "/a", "name": "x"}, {"mountPath": "/b", "name": "y"}],
        [{"mountPath": "/b", "readOnly": True}],
        [{"mountPath": "/a", "name": "x"}, {"mountPath": "/b", "name": "y", "readOnly": True}],
    ),
    (
        "volumeDevices by devicePath",
        "volumeDevices",
        [{"devicePath": "/dev/a", "name": "x"}],
        [{"devicePath": "/dev/a", "$patch": "delete"}],
        [],
    ),
    (
        "args replace",
        "args",
        ["--a", "--b"],
        ["--c"],
        ["--c"],
    ),
]


@pytest.mark.parametrize(
    ("field", "live", "patch", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in CONTAINER_LIST_CASES],
)
def test_container_lists(
    field: str, live: list[Any], patch: list[Any], expected: list[Any]
) -> None:
    document = POD(spec={"containers": [{"name": "app", field: live}]})
    result = smp(document, {"spec": {"containers": [{"name": "app", field: patch}]}})
    assert result["spec"]["containers"][0][field] == expected


POD_SPEC_LIST_CASES: list[
    tuple[str, str, list[dict[str, Any]], list[dict[str, Any]], list[Any]]
] = [
    (
        "initContainers by name",
        "initContainers",
        [{"name": "init", "image": "a"}, {"name": "init2", "image": "b"}],
        [{"name": "init2", "image": "c"}],
        [{"name": "init", "image": "a"}, {"name": "init2", "image": "c"}],
    ),
    (
        "imagePullSecrets by name",
        "imagePullSecrets",
        [{"name": "a"}],
        [{"name": "b"}],
        [{"name": "b"}, {"name": "a"}],
    ),
    (
        "hostAliases by ip",
        "hostAliases",
        [{"ip": "10.0.0.1", "hostnames": ["a"]}],
        [{"ip": "10.0.0.1", "hostnames": ["b"]}],
        [{"ip": "10.0.0.1", "hostnames": ["b"]}],
    ),
    (
        "topologySpreadConstraints by topologyKey",
        "topologySpreadConstraints",
        [{"topologyKey": "zone", "maxSkew": 1}, {"topologyKey": "host", "maxSkew": 1}],
        [{"topologyKey": "zone", "maxSkew": 2}],
        [{"topologyKey": "zone", "maxSkew": 2}, {"topologyKey": "host", "maxSkew": 1}],
    ),
    (
        "tolerations replace",
        "tolerations",
        [{"key": "a", "operator": "Exists"}],
        [{"key": "b", "operator": "Exists"}],
        [{"key": "b", "operator": "Exists"}],
    ),
]


@pytest.mark.parametrize(
    ("field", "live", "patch", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in POD_SPEC_LIST_CASES],
)
def test_pod_spec_lists(field: str, live: list[Any], patch: list[Any], expected: list[Any]) -> None:
    result = smp(POD(spec={"containers": [APP], field: live}), {"spec": {field: patch}})
    assert result["spec"][field] == expected


def test_pod_status_conditions_merge_by_type() -> None:
    document = POD(spec={"containers": [APP]})
    document["status"] = {
        "conditions": [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False"},
        ]
    }
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert smp(document, patch)["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True"},
    ]


def test_owner_references_merge_by_uid() -> None:
    owner = {"uid": "u1", "kind": "ReplicaSet", "name": "rs"}
    document = POD(spec={"containers": [APP]}, metadata_extra={"ownerReferences": [owner]})
    patch = {"metadata": {"ownerReferences": [{"uid": "u1", "controller": True}]}}
    assert smp(document, patch)["metadata"]["ownerReferences"] == [{**owner, "controller": True}]


def test_node_taints_replace_and_pod_cidrs_merge() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "InternalIP", "address": "1.2.3.4"}],
        },
    }
    patch = {
        "spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "podCIDRs": ["fd00::/64"]},
        "status": {"addresses": [{"type": "Hostname", "address": "n"}]},
    }
    result = smp(node, patch)
    assert result["spec"]["taints"] == [{"key": "b", "effect": "NoExecute"}]
    assert result["spec"]["podCIDRs"] == ["fd00::/64", "10.0.0.0/24"]
    assert names(result["status"]["addresses"], "type") == ["Hostname", "InternalIP"]


def test_null_deletes_and_unmatched_null_is_ignored() -> None:
    document = POD(spec={"containers": [APP]}, labels={"a": "1", "b": "2"})
    result = smp(
        document, {"metadata": {"labels": {"a": None, "zz": None}}, "spec": {"nodeName": None}}
    )
    assert result["metadata"]["labels"] == {"b": "2"}
    assert "nodeName" not in result["spec"]


def test_new_values_lose_nulls_and_directives() -> None:
    patch = {
        "spec": {
            "containers": [
                {"name": "new", "image": "n", "command": None, "resources": {"limits": None}}
            ],
            "securityContext": {"runAsUser": 1, "fsGroup": None, "$retainKeys": ["runAsUser"]},
        }
    }
    result = smp(POD(spec={"containers": [APP]}), patch)
    assert result["spec"]["containers"][0] == {"name": "new", "image": "n", "resources": {}}
    assert result["spec"]["securityContext"] == {"runAsUser": 1}


WORKLOADS: list[tuple[str, str, list[str]]] = [
    ("apps/v1", "Deployment", ["spec", "template", "spec"]),
    ("apps/v1", "ReplicaSet", ["spec", "template", "spec"]),
    ("apps/v1", "StatefulSet", ["spec", "template", "spec"]),
    ("apps/v1", "DaemonSet", ["spec", "template", "spec"]),
    ("batch/v1", "Job", ["spec", "template", "spec"]),
    ("batch/v1", "CronJob", ["spec", "jobTemplate", "spec", "template", "spec"]),
    ("v1", "ReplicationController", ["spec", "template", "spec"]),
    ("v1", "PodTemplate", ["template", "spec"]),
]


def nest(path: list[str], leaf: dict[str, Any]) -> dict[str, Any]:
    for key in reversed(path):
        leaf = {key: leaf}
    return leaf


def dig(document: dict[str, Any], path: list[str]) -> Any:
    for key in path:
        document = document[key]
    return document


@pytest.mark.parametrize(
    ("api_version", "kind", "pod_spec_path"),
    [pytest.param(*workload, id=workload[1]) for workload in WORKLOADS],
)
def test_pod_template_containers_merge_in_every_workload(
    api_version: str, kind: str, pod_spec_path: list[str]
) -> None:
    document = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "w"},
        **nest(pod_spec_path, {"containers": [APP, SIDECAR]}),
    }
    patch = nest(
        pod_spec_path,
        {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}]},
    )
    containers = dig(smp(document, patch), [*pod_spec_path, "containers"])
    assert names(containers) == ["app", "sidecar"]
    assert names(containers[0]["env"]) == ["B", "A"]
    assert containers[1] == SIDECAR


def test_other_built_in_kinds_merge_maps_and_replace_lists() -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "finalizers": ["x"]},
        "data": {"a": "1", "b": "2"},
        "list": [1, 2],
    }
    patch = {"metadata": {"finalizers": ["y"]}, "data": {"b": None, "c": "3"}, "list": [3]}
    result = smp(config_map, patch)
    assert result["data"] == {"a": "1", "c": "3"}
    assert result["list"] == [3]
    assert result["metadata"]["finalizers"] == ["y", "x"]


def test_webhook_configurations_merge_webhooks_by_name() -> None:
    document = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "m"},
        "webhooks": [{"name": "a.example.com", "timeoutSeconds": 5}, {"name": "b.example.com"}],
    }
    patch = {"webhooks": [{"name": "a.example.com", "timeoutSeconds": 10}]}
    assert smp(document, patch)["webhooks"] == [
        {"name": "a.example.com", "timeoutSeconds": 10},
        {"name": "b.example.com"},
    ]


SMP_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    (
        "element without its merge key",
        {"spec": {"containers": [{"image": "x"}]}},
        'spec.containers: element {"image": "x"} does not contain declared merge key "name"',
    ),
    (
        "delete element without its merge key",
        {"spec": {"containers": [{"$patch": "delete"}]}},
        'spec.containers: a $patch: delete element must name its merge key "name"',
    ),
    (
        "unknown directive on a map",
        {"spec": {"containers": [{"name": "app", "resources": {"$patch": "nope"}}]}},
        'spec.containers[name="app"].resources: unknown patch type "nope" in map',
    ),
    (
        "merge directive in a list",
        {"spec": {"containers": [{"$patch": "merge"}]}},
        "spec.containers: merging lists cannot yet be specified in the patch",
    ),
    (
        "mixed element types",
        {"metadata": {"finalizers": [{"name": "x"}]}},
        "metadata.finalizers: list element types are not identical: map, string",
    ),
    (
        "deletion list of objects",
        {"spec": {"$deleteFromPrimitiveList/containers": [{"name": "app"}]}},
        "spec.containers: $deleteFromPrimitiveList applies to lists of primitives only",
    ),
    (
        "deletion list not a list",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
        "metadata.finalizers: invalid patch format of primitive list",
    ),
    (
        "malformed directive key",
        {"metadata": {"$setElementOrder": []}},
        "metadata: invalid patch format of $setElementOrder",
    ),
]


@pytest.mark.parametrize(
    ("patch", "message"), [pytest.param(patch, msg, id=name) for name, patch, msg in SMP_ERRORS]
)
def test_strategic_merge_errors_name_the_path(patch: dict[str, Any], message: str) -> None:
    document = POD(spec={"containers": [APP]}, metadata_extra={"finalizers": ["a"]})
    with pytest.raises(PatchError, match=re.escape(message)):
        smp(document, patch)


def test_strategic_merge_refuses_custom_resources() -> None:
    vpa = {"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler", "spec": {}}
    with pytest.raises(PatchError, match="not supported for VerticalPodAutoscaler"):
        smp(vpa, {"spec": {"updatePolicy": {"updateMode": "Off"}}})


@pytest.mark.parametrize(
    ("api_version", "kind", "supported"),
    [
        ("v1", "Pod", True),
        ("v1", "ConfigMap", True),
        ("apps/v1", "Deployment", True),
        ("batch/v1", "CronJob", True),
        ("policy/v1", "PodDisruptionBudget", True),
        ("autoscaling/v2", "HorizontalPodAutoscaler", True),
        ("coordination.k8s.io/v1", "Lease", True),
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", True),
        ("scheduling.k8s.io/v1", "PriorityClass", True),
        ("events.k8s.io/v1", "Event", True),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition", True),
        ("autoscaling.k8s.io/v1", "VerticalPodAutoscaler", False),
        ("autoscaling.k8s.io/v1", "VerticalPodAutoscalerCheckpoint", False),
        ("cluster.x-k8s.io/v1beta1", "MachineDeployment", False),
        ("example.com/v1", "Widget", False),
    ],
)
def test_supports_strategic_merge(api_version: str, kind: str, supported: bool) -> None:
    assert supports_strategic_merge(api_version, kind) is supported


# --- invariants ------------------------------------------------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=3)
    | st.floats(allow_nan=False, allow_infinity=False, width=16)
    | st.text(alphabet="ab", max_size=2)
)
KEYS = st.text(alphabet="ab~/", max_size=3)


def json_values(
    scalars: st.SearchStrategy[Any] = SCALARS, *, lists: bool = True
) -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        objects = st.dictionaries(KEYS, children, max_size=4)
        return (st.lists(children, max_size=3) | objects) if lists else objects

    return st.recursive(scalars, extend, max_leaves=12)


JSON_OBJECTS = st.dictionaries(KEYS, json_values(), max_size=4)


def pointers(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every JSON pointer into ``value`` with the value it names."""
    yield prefix, value
    if isinstance(value, dict):
        for key, item in value.items():
            token = key.replace("~", "~0").replace("/", "~1")
            yield from pointers(item, f"{prefix}/{token}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from pointers(item, f"{prefix}/{index}")


def containers(value: Any) -> Iterator[Any]:
    if isinstance(value, dict | list):
        yield value
        for item in value.values() if isinstance(value, dict) else value:
            yield from containers(item)


@st.composite
def document_and_operations(draw: st.DrawFn) -> tuple[Any, list[dict[str, Any]]]:
    document = draw(JSON_OBJECTS)
    paths = [pointer for pointer, _ in pointers(document)] + ["/zz", "/0", "/-", "/a/-"]
    operations = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]))
        operation: dict[str, Any] = {"op": op, "path": draw(st.sampled_from(paths))}
        if op in ("add", "replace", "test"):
            operation["value"] = draw(json_values())
        if op in ("move", "copy"):
            operation["from"] = draw(st.sampled_from(paths))
        operations.append(operation)
    return document, operations


@settings(max_examples=150, deadline=None)
@given(document_and_operations())
def test_json_patch_never_mutates_or_aliases_its_inputs(
    case: tuple[Any, list[dict[str, Any]]],
) -> None:
    document, operations = case
    before = (copy.deepcopy(document), copy.deepcopy(operations))
    try:
        result = apply_json_patch(document, operations)
    except PatchError:
        result = None
    assert canonical((document, operations)) == canonical(before)
    shared = {id(c) for c in containers(result)} & {
        id(c) for c in containers((document, operations))
    }
    assert not shared


@settings(max_examples=100, deadline=None)
@given(JSON_OBJECTS)
def test_json_patch_test_succeeds_at_every_pointer(document: dict[str, Any]) -> None:
    operations = [
        {"op": "test", "path": pointer, "value": value} for pointer, value in pointers(document)
    ]
    assert apply_json_patch(document, operations) == document


def merge_patch_diff(source: Any, target: Any) -> Any:
    """A JSON merge patch turning ``source`` into ``target`` (like jsonpatch.CreateMergePatch)."""
    if not (isinstance(source, dict) and isinstance(target, dict)):
        return target
    patch: dict[str, Any] = {key: None for key in source if key not in target}
    for key, value in target.items():
        if key not in source:
            patch[key] = value
        elif isinstance(source[key], dict) and isinstance(value, dict):
            nested = merge_patch_diff(source[key], value)
            if nested:
                patch[key] = nested
        elif canonical(source[key]) != canonical(value):
            patch[key] = value
    return patch


# A merge patch cannot set a member to null, so targets hold no nulls (documents may).
NULL_FREE_OBJECTS = st.dictionaries(
    KEYS, json_values(SCALARS.filter(lambda v: v is not None)), max_size=4
)


@settings(max_examples=150, deadline=None)
@given(JSON_OBJECTS, NULL_FREE_OBJECTS)
def test_merge_patch_of_a_diff_reaches_the_target(
    document: dict[str, Any], target: dict[str, Any]
) -> None:
    patch = merge_patch_diff(document, target)
    before = copy.deepcopy((document, patch))
    assert canonical(apply_merge_patch(document, patch)) == canonical(target)
    assert canonical((document, patch)) == canonical(before)


LIST_FREE_OBJECTS = st.dictionaries(
    st.text(alphabet="ab", max_size=2), json_values(lists=False), max_size=4
)


@settings(max_examples=150, deadline=None)
@given(LIST_FREE_OBJECTS, LIST_FREE_OBJECTS)
def test_strategic_merge_without_lists_or_directives_is_a_merge_patch(
    document: dict[str, Any], patch: dict[str, Any]
) -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "data": document}
    before = copy.deepcopy((config_map, patch))
    result = smp(config_map, {"data": patch})
    assert canonical(result["data"]) == canonical(apply_merge_patch(document, patch))
    assert canonical((config_map, patch)) == canonical(before)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), unique=True, max_size=4),
)
def test_strategic_merge_of_containers_keeps_every_name_once(
    live: list[str], patched: list[str]
) -> None:
    document = POD(spec={"containers": [{"name": name, "image": "live"} for name in live]})
    patch = {"spec": {"containers": [{"name": name, "image": "patched"} for name in patched]}}
    before = copy.deepcopy((document, patch))
    result = smp(document, patch)["spec"]["containers"]
    assert sorted(names(result)) == sorted(set(live) | set(patched))
    assert all(
        item["image"] == ("patched" if item["name"] in patched else "live") for item in result
    )
    # Patch items keep their relative order, and so do the server-only ones.
    assert [n for n in names(result) if n in patched] == patched
    assert [n for n in names(result) if n not in patched] == [n for n in live if n not in patched]
    assert canonical((document, patch)) == canonical(before)
