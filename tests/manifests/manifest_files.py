"""The files of ``manifests/``, loaded and rendered as ``kubectl apply -k manifests/`` sees them.

:func:`render` does what kustomize does with ``manifests/kustomization.yaml``: it loads the listed
resource files in order and applies the inline ``NamespaceTransformer`` (every namespaced object
gets the namespace; with ``setRoleBindingSubjects: allServiceAccounts`` so does every
ServiceAccount subject of a RoleBinding or ClusterRoleBinding). Anything else in the
kustomization raises, so a new kustomize feature cannot be silently ignored here. The tests
compare this rendering with ``kubectl kustomize`` when kubectl is installed.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import yaml

MANIFESTS: Final = Path(__file__).resolve().parents[2] / "manifests"
CRD_DIR: Final = MANIFESTS / "crds"
KUSTOMIZATION: Final = MANIFESTS / "kustomization.yaml"

CLUSTER_SCOPED_KINDS: Final = frozenset(
    {
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "Namespace",
        "PriorityClass",
        "ValidatingWebhookConfiguration",
    }
)
_KNOWN_KUSTOMIZATION_KEYS: Final = frozenset({"apiVersion", "kind", "resources", "transformers"})
_BINDING_KINDS: Final = frozenset({"RoleBinding", "ClusterRoleBinding"})


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """PyYAML keeps the last of duplicate keys silently; kubectl's strict decoding refuses them."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key, deep=deep) for key, _ in node.value]
        duplicates = sorted({str(k) for k in keys if keys.count(k) > 1})
        if duplicates:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate keys {duplicates}", node.start_mark
            )
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_parsed: dict[tuple[Path, int, int], list[dict[str, Any]]] = {}
"""Documents by (file, mtime, size): the CRDs are long and many tests read them."""


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every YAML document of ``path`` (empty documents skipped); raises on a non-mapping."""
    stat = path.stat()
    key = (path.resolve(), stat.st_mtime_ns, stat.st_size)
    if key not in _parsed:
        text = path.read_text(encoding="utf-8")
        documents = [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc is not None]
        for doc in documents:
            if not isinstance(doc, dict):
                raise ValueError(f"{path}: a document is a {type(doc).__name__}, not a mapping")
        _parsed[key] = documents
    return copy.deepcopy(_parsed[key])


EXAMPLES: Final = MANIFESTS / "examples"
"""Examples an admin applies by hand (kube-scheduler's configuration, a descheduler policy):
not installed by the kustomization."""


def yaml_files() -> list[Path]:
    """Every ``*.yaml``/``*.yml`` file under ``manifests/`` (``examples/`` aside), sorted."""
    return sorted(
        p
        for p in MANIFESTS.rglob("*")
        if p.suffix in {".yaml", ".yml"} and EXAMPLES not in p.parents
    )


def kustomization() -> dict[str, Any]:
    (document,) = load_documents(KUSTOMIZATION)
    return document


def resource_files() -> list[Path]:
    """The files ``resources`` lists, in order."""
    return [MANIFESTS / str(entry) for entry in kustomization().get("resources") or []]


def namespace_transformer() -> dict[str, Any]:
    """The one inline ``NamespaceTransformer`` of the kustomization."""
    transformers = [yaml.safe_load(text) for text in kustomization().get("transformers") or []]
    (transformer,) = transformers
    if not isinstance(transformer, dict) or transformer.get("kind") != "NamespaceTransformer":
        raise ValueError(f"unexpected transformer {transformer!r}")
    return transformer


def install_namespace() -> str:
    """The namespace ``kubectl apply -k manifests/`` installs kubescale into."""
    return str(namespace_transformer()["metadata"]["namespace"])


def render(*, namespace: str | None = None) -> list[dict[str, Any]]:
    """The objects of ``kubectl kustomize manifests/``, in resource order (see module docstring).

    ``namespace`` renders as an overlay that sets another namespace with the same transformer
    would (README.md: installing elsewhere).
    """
    unknown = set(kustomization()) - _KNOWN_KUSTOMIZATION_KEYS
    if unknown:
        raise ValueError(f"kustomization.yaml uses {sorted(unknown)}: teach render() about them")
    transformer = namespace_transformer()
    namespace = namespace or install_namespace()
    subjects_mode = transformer.get("setRoleBindingSubjects", "defaultOnly")
    objects: list[dict[str, Any]] = []
    for path in resource_files():
        for doc in load_documents(path):
            obj = copy.deepcopy(doc)
            if obj.get("kind") not in CLUSTER_SCOPED_KINDS:
                obj.setdefault("metadata", {})["namespace"] = namespace
            if obj.get("kind") in _BINDING_KINDS:
                for subject in obj.get("subjects") or []:
                    if _subject_gets_namespace(subject, subjects_mode):
                        subject["namespace"] = namespace
            objects.append(obj)
    return objects


def _subject_gets_namespace(subject: dict[str, Any], mode: str) -> bool:
    if mode == "allServiceAccounts":
        return subject.get("kind") == "ServiceAccount"
    if mode == "defaultOnly":
        return subject.get("name") == "default"
    if mode == "none":
        return False
    raise ValueError(f"unknown setRoleBindingSubjects {mode!r}")


def find(objects: Iterable[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` (and ``name``); raises unless there is exactly one."""
    found = [
        obj
        for obj in objects
        if obj.get("kind") == kind and (name is None or obj["metadata"]["name"] == name)
    ]
    if len(found) != 1:
        raise LookupError(f"{len(found)} objects of kind {kind} named {name!r}")
    return found[0]


def crd(plural: str) -> dict[str, Any]:
    """The CRD document ``manifests/crds/<plural>.yaml``."""
    (document,) = load_documents(CRD_DIR / f"{plural}.yaml")
    return document


def version_schema(crd_document: dict[str, Any], version: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of one version of a CRD."""
    for entry in crd_document["spec"]["versions"]:
        if entry["name"] == version:
            schema: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
            return schema
    raise LookupError(f"no version {version}")
