"""The kinds the in-process API server serves: kubescale's catalogue plus test-only kinds.

:mod:`kubescale.kube.resources` is what the product reads and writes. The API server serves all
of those (so every product feature can be tested against it) and, here, the kinds only tests
and simulations need — CustomResourceDefinitions (CRDs applied by ``kubectl``),
ValidatingWebhookConfigurations (the admission chain's other half), and what an install of
kubescale creates besides (``kubectl apply`` of ``manifests/`` in the install rehearsal):
ServiceAccounts, Services, Secrets and the four RBAC kinds. Add a kind here when a test needs
the server to serve it; add it to the product's catalogue only when kubescale reads it.
"""

from __future__ import annotations

from typing import Final

from kubescale.kube.resources import ALL, SECRETS, ResourceType, resource_type

__all__ = [
    "CUSTOM_RESOURCE_DEFINITIONS",
    "INSTALL_KINDS",
    "SERVED",
    "VALIDATING_WEBHOOK_CONFIGURATIONS",
    "served_kind",
]

VALIDATING_WEBHOOK_CONFIGURATIONS: Final = resource_type(
    "admissionregistration.k8s.io",
    "v1",
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
    namespaced=False,
)
CUSTOM_RESOURCE_DEFINITIONS: Final = resource_type(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
    subresources=("status",),
    short_names=("crd", "crds"),
)

_RBAC: Final = "rbac.authorization.k8s.io"
INSTALL_KINDS: Final[tuple[ResourceType, ...]] = (
    resource_type("", "v1", "ServiceAccount", "serviceaccounts", short_names=("sa",)),
    resource_type("", "v1", "Service", "services", subresources=("status",), short_names=("svc",)),
    SECRETS,
    resource_type(_RBAC, "v1", "ClusterRole", "clusterroles", namespaced=False),
    resource_type(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    resource_type(_RBAC, "v1", "Role", "roles"),
    resource_type(_RBAC, "v1", "RoleBinding", "rolebindings"),
)
"""What an install creates that kubescale itself never reads (the catalogue has ConfigMaps,
Namespaces, Deployments, PodDisruptionBudgets and MutatingWebhookConfigurations already)."""

SERVED: Final[tuple[ResourceType, ...]] = (
    *ALL,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    CUSTOM_RESOURCE_DEFINITIONS,
    *(kind for kind in INSTALL_KINDS if (kind.group_version, kind.kind) not in
      {(rt.group_version, rt.kind) for rt in ALL}),
)  # fmt: skip
"""Every built-in kind the server serves (CRD kinds are added at run time by its registry)."""

_BY_GVK: Final = {(rt.group_version, rt.kind): rt for rt in SERVED}


def served_kind(api_version: str, kind: str) -> ResourceType | None:
    """The built-in served type of an object from its ``apiVersion`` and ``kind``."""
    return _BY_GVK.get((api_version, kind))
