"""The files of ``manifests/``, loaded and rendered as ``kubectl apply -k manifests/`` sees them.

:func:`render` does what kustomize does with the base, ``manifests/kustomization.yaml``: it loads
the listed ``resources`` in order — a file's objects, or a directory's kustomization rendered
first, where it is listed — and applies its ``namespace`` (every namespaced object gets the
namespace, and so does every ServiceAccount subject of a RoleBinding or ClusterRoleBinding, as
kustomize does). Anything else in the base's kustomization (a deprecated ``bases`` among them)
raises, so a new kustomize feature cannot be silently ignored here. The tests compare this
rendering with ``kubectl kustomize`` (Kustomize v5, ``$KUBECTL_KUSTOMIZE``) when it is
installed; the overlays (``manifests/overlays/*``) are rendered by kubectl only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import yaml

MANIFESTS: Final = Path(__file__).resolve().parents[2] / "manifests"
CRD_DIR: Final = MANIFESTS / "crds"
BASE: Final = MANIFESTS / "base"
KUSTOMIZATION: Final = BASE / "kustomization.yaml"
OVERLAYS: Final = MANIFESTS / "overlays"

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
_KNOWN_KUSTOMIZATION_KEYS: Final = frozenset({"apiVersion", "kind", "namespace", "resources"})
DEPRECATED_KUSTOMIZATION_FIELDS: Final = frozenset(
    {"bases", "commonLabels", "patchesJson6902", "patchesStrategicMerge", "vars"}
)
"""Fields Kustomize v5 warns about on every build (``kubectl apply -k``): ``bases`` (use
``resources``), ``patchesStrategicMerge`` and ``patchesJson6902`` (use ``patches``), ``vars``
(use ``replacements``), ``commonLabels`` (use ``labels``); ``kustomize edit fix`` rewrites them."""
_KUSTOMIZATION_NAMES: Final = ("kustomization.yaml", "kustomization.yml", "Kustomization")
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


def base_files() -> list[Path]:
    """The YAML files of the base and the CRDs it builds on."""
    return [p for p in yaml_files() if p.parent in (BASE, CRD_DIR)]


def json6902_patches() -> set[Path]:
    """The JSON patch files the overlays' ``patches`` name: a patch file holding a list of
    operations is a JSON patch (RFC 6902), any other a strategic merge patch, as kustomize
    decides by content."""
    files = {
        overlay / str(entry["path"])
        for overlay in overlays()
        for entry in _kustomization_of(overlay).get("patches") or []
        if "path" in entry
    }
    return {
        path for path in files if isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), list)
    }


def overlays() -> list[Path]:
    """Every overlay directory (one with a kustomization.yaml under ``manifests/overlays``)."""
    return sorted(p.parent for p in OVERLAYS.glob("*/kustomization.yaml"))


def kustomization() -> dict[str, Any]:
    (document,) = load_documents(KUSTOMIZATION)
    return document


def kustomization_files() -> list[Path]:
    """Every kustomization ``manifests/`` ships (the root, the base, the CRDs, each overlay)."""
    return sorted(p for name in _KUSTOMIZATION_NAMES for p in MANIFESTS.rglob(name))


def _kustomization_of(directory: Path) -> dict[str, Any]:
    for name in _KUSTOMIZATION_NAMES:
        if (directory / name).is_file():
            (document,) = load_documents(directory / name)
            return document
    raise LookupError(f"{directory} has no kustomization")


def resource_files(directory: Path = BASE) -> list[Path]:
    """The files a kustomization's ``resources`` list, in order: a directory entry is another
    kustomization, whose files come where it is listed (recursively)."""
    document = _kustomization_of(directory)
    files: list[Path] = []
    for entry in document.get("resources") or []:
        path = directory / str(entry)
        if path.is_dir():
            unknown = set(_kustomization_of(path)) - (_KNOWN_KUSTOMIZATION_KEYS - {"namespace"})
            if unknown:
                raise ValueError(f"{path}'s kustomization uses {sorted(unknown)}: teach render()")
            files.extend(resource_files(path.resolve()))
        else:
            files.append(path)
    return files


def install_namespace() -> str:
    """The namespace ``kubectl apply -k manifests/`` installs kubescale into."""
    return str(kustomization()["namespace"])


def render(*, namespace: str | None = None) -> list[dict[str, Any]]:
    """The objects of ``kubectl kustomize manifests/base``, in resource order (module docstring).

    ``namespace`` renders as an overlay that sets another ``namespace`` would (README.md:
    installing elsewhere).
    """
    unknown = set(kustomization()) - _KNOWN_KUSTOMIZATION_KEYS
    if unknown:
        raise ValueError(f"kustomization.yaml uses {sorted(unknown)}: teach render() about them")
    namespace = namespace or install_namespace()
    objects: list[dict[str, Any]] = []
    for path in resource_files():
        for doc in load_documents(path):
            obj = copy.deepcopy(doc)
            if obj.get("kind") not in CLUSTER_SCOPED_KINDS:
                obj.setdefault("metadata", {})["namespace"] = namespace
            if obj.get("kind") in _BINDING_KINDS:
                for subject in obj.get("subjects") or []:
                    if subject.get("kind") == "ServiceAccount":
                        subject["namespace"] = namespace
            objects.append(obj)
    return objects


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
