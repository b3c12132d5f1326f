"""Every file of ``manifests/`` parses, is in the kustomization, and renders as kustomize does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import kubectl_kustomize, needs_kustomize
from .manifest_files import (
    CLUSTER_SCOPED_KINDS,
    DEPRECATED_KUSTOMIZATION_FIELDS,
    EXAMPLES,
    KUSTOMIZATION,
    MANIFESTS,
    base_files,
    install_namespace,
    json6902_patches,
    kustomization_files,
    load_documents,
    render,
    resource_files,
    yaml_files,
)


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_every_yaml_file_parses_into_kubernetes_objects(path: Path) -> None:
    if path in json6902_patches():
        (operations,) = yaml.safe_load_all(path.read_text(encoding="utf-8"))
        assert all({"op", "path"} <= set(operation) for operation in operations)
        return
    documents = load_documents(path)
    assert documents, f"{path} has no documents"
    for doc in documents:
        if path.name == KUSTOMIZATION.name:
            assert doc["kind"] == "Kustomization"
            continue
        assert isinstance(doc.get("apiVersion"), str)
        assert isinstance(doc.get("kind"), str)
        if EXAMPLES in path.parents and "metadata" not in doc:
            continue  # a component's own configuration file (KubeSchedulerConfiguration)
        assert doc["metadata"]["name"]
        # Namespace-agnostic: the kustomization decides the namespace.
        namespace = doc["metadata"].get("namespace", "$(KUBESCALE_NAMESPACE)")
        assert namespace == "$(KUBESCALE_NAMESPACE)", f"{path}: {doc['kind']} names a namespace"


def test_the_kustomization_lists_every_manifest_exactly_once() -> None:
    listed = resource_files()
    assert len(listed) == len(set(listed))
    assert all(path.is_file() for path in listed)
    assert set(listed) == set(base_files()) - {KUSTOMIZATION}


def test_kustomization_files_finds_every_shipped_kustomization() -> None:
    assert [str(p.relative_to(MANIFESTS)) for p in kustomization_files()] == [
        "base/kustomization.yaml",
        "crds/Kustomization",
        "kustomization.yaml",
        "overlays/cert-manager/kustomization.yaml",
        "overlays/self-signed/kustomization.yaml",
        "overlays/service-monitor/kustomization.yaml",
    ]


@pytest.mark.parametrize("path", kustomization_files(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_no_kustomization_uses_a_field_kustomize_v5_deprecates(path: Path) -> None:
    # `kubectl apply -k` with a current kubectl warns on each of them, every time (issue 32.5)
    (document,) = load_documents(path)
    assert sorted(set(document) & DEPRECATED_KUSTOMIZATION_FIELDS) == [], path
    for entry in document.get("patches") or []:  # `patches` entries name a file or inline it
        assert set(entry) <= {"path", "patch", "target", "options"}, entry


def test_the_renderer_refuses_what_it_does_not_render(tmp_path: Path) -> None:
    # a deprecated `bases` (or any field render() does not apply) is an error, not ignored
    base = tmp_path / "base"
    base.mkdir()
    (base / "kustomization.yaml").write_text("kind: Kustomization\nbases:\n- ../crds\n")
    (tmp_path / "kustomization.yaml").write_text("kind: Kustomization\nresources:\n- base\n")
    with pytest.raises(ValueError, match=r"\['bases'\]: teach render\(\)"):
        resource_files(tmp_path)


def test_render_puts_namespaced_objects_and_service_account_subjects_in_one_namespace() -> None:
    namespace = install_namespace()
    assert namespace == "kube-system"  # where upstream VPA runs; overlays may change it
    objects = render()
    kinds = sorted({obj["kind"] for obj in objects})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Deployment",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    for obj in objects:
        if obj["kind"] in CLUSTER_SCOPED_KINDS:
            assert "namespace" not in obj["metadata"]
        else:
            assert obj["metadata"]["namespace"] == namespace
        for subject in obj.get("subjects") or []:
            assert subject["namespace"] == namespace


def _identity(obj: dict[str, Any]) -> tuple[str, str]:
    return (str(obj["kind"]), str(obj["metadata"]["name"]))


@needs_kustomize
async def test_render_equals_kubectl_kustomize(tmp_path: Path) -> None:
    kustomized = await kubectl_kustomize(MANIFESTS, home=tmp_path)
    ours = render()
    assert sorted(map(_identity, kustomized)) == sorted(map(_identity, ours))
    assert sorted(kustomized, key=_identity) == sorted(ours, key=_identity)


def test_duplicate_keys_are_refused_as_kubectl_does(tmp_path: Path) -> None:
    # PyYAML alone would keep the second `served` silently; kubectl's strict decoding refuses.
    path = tmp_path / "crd.yaml"
    path.write_text("spec:\n  versions:\n  - name: v1\n    served: true\n    served: false\n")
    with pytest.raises(yaml.constructor.ConstructorError, match=r"duplicate keys \['served'\]"):
        load_documents(path)
