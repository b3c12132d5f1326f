"""The kinds the in-process API server serves: kubescale's catalogue plus test-only kinds.

:mod:`kubescale.kube.resources` is what the product reads and writes. The API server serves all
of those (so every product feature can be tested against it) and, here, the kinds only tests
and simulations need — CustomResourceDefinitions (CRDs applied by ``kubectl``) and
ValidatingWebhookConfigurations (the admission chain's other half). Add a kind here when a test
needs the server to serve it; add it to the product's catalogue only when kubescale reads it.
"""

from __future__ import annotations

from typing import Final

from kubescale.kube.resources import ALL, ResourceType, resource_type

__all__ = [
    "CUSTOM_RESOURCE_DEFINITIONS",
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

SERVED: Final[tuple[ResourceType, ...]] = (
    *ALL,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    CUSTOM_RESOURCE_DEFINITIONS,
)
"""Every built-in kind the server serves (CRD kinds are added at run time by its registry)."""

_BY_GVK: Final = {(rt.group_version, rt.kind): rt for rt in SERVED}


def served_kind(api_version: str, kind: str) -> ResourceType | None:
    """The built-in served type of an object from its ``apiVersion`` and ``kind``."""
    return _BY_GVK.get((api_version, kind))
