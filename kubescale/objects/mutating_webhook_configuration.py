"""``admissionregistration.k8s.io/v1`` ``MutatingWebhookConfiguration``: what the VPA webhook
registers itself with (upstream's ``selfRegistration``)."""

from __future__ import annotations

from typing import TypedDict

from kubescale.objects.meta import LabelSelectorObject, ObjectMeta

__all__ = [
    "MutatingWebhook",
    "MutatingWebhookConfiguration",
    "RuleWithOperations",
    "ServiceReference",
    "WebhookClientConfig",
]


class ServiceReference(TypedDict, total=False):
    """``ServiceReference``."""

    namespace: str
    name: str
    path: str
    port: int


class WebhookClientConfig(TypedDict, total=False):
    """``WebhookClientConfig`` (``caBundle`` is base64, as JSON carries ``[]byte``)."""

    url: str
    service: ServiceReference
    caBundle: str


class RuleWithOperations(TypedDict, total=False):
    """``RuleWithOperations``."""

    operations: list[str]
    apiGroups: list[str]
    apiVersions: list[str]
    resources: list[str]
    scope: str


class MutatingWebhook(TypedDict, total=False):
    """``MutatingWebhook``."""

    name: str
    clientConfig: WebhookClientConfig
    rules: list[RuleWithOperations]
    failurePolicy: str
    sideEffects: str
    timeoutSeconds: int
    admissionReviewVersions: list[str]
    namespaceSelector: LabelSelectorObject
    objectSelector: LabelSelectorObject
    reinvocationPolicy: str


class MutatingWebhookConfiguration(TypedDict, total=False):
    """``MutatingWebhookConfiguration``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    webhooks: list[MutatingWebhook]
