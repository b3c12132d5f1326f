"""Self-registration: the MutatingWebhookConfiguration that sends pods and VPAs to the webhook.

What is written is upstream's ``selfRegistration`` (``pkg/admission-controller/config.go``):
``MutatingWebhookConfiguration/vpa-webhook-config`` with one webhook ``vpa.k8s.io``,
``admissionReviewVersions: [v1]``, ``sideEffects: None``, ``timeoutSeconds`` from
``--webhook-timeout-seconds``, ``failurePolicy`` ``Ignore`` (``Fail`` with
``--webhook-failure-policy-fail``), the labels of ``--webhook-labels``, ``clientConfig.caBundle``
= the bytes of ``--client-ca-file`` and either ``service {namespace, name}`` — no ``path``, so
kube-apiserver posts to ``/``, which is where :mod:`kubescale.webhook.admission_routes` serves — or
``url: "<webhook-address>:<webhook-port>"`` (again no path). Rules: pods ``CREATE`` in ``""/v1``;
verticalpodautoscalers ``CREATE, UPDATE`` in ``autoscaling.k8s.io/*``. No objectSelector.
namespaceSelector on ``kubernetes.io/metadata.name``: ``NotIn`` the ignored namespaces, else
``In [--vpa-object-namespace]``, else empty (every namespace).

Differences, both deliberate:

- upstream's ``main.go`` splits an empty ``--ignored-vpa-object-namespaces`` into ``[""]`` and so
  always emits ``NotIn [""]`` (which matches every namespace) and never the ``In`` selector; here
  the selector is the one the function means to build. Which pods reach the webhook changes only
  with ``--vpa-object-namespace``, and then only by pods upstream would not have mutated anyway.
- upstream sleeps 10 s, deletes an existing configuration and creates it again, leaving a moment
  with no webhook. Here registration happens once the caches have synced (what the sleep
  approximates) and an existing configuration is replaced in place (update with its
  resourceVersion, retried on conflict), so pods are never created unmutated in between.

:class:`WebhookRegistration` is the loop that registers (retrying until it succeeds) and then,
with ``--reload-cert``, polls ``--client-ca-file`` every ``--cert-reload-interval``: when the file
changed and holds PEM certificates, it JSON-patches the caBundle of the ``vpa.k8s.io`` webhook
(guarded by a ``test`` of the webhook's name); a configuration that has gone is registered
anew.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from cryptography import x509

from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError, failure_log_level
from kubescale.kube.resources import MUTATING_WEBHOOK_CONFIGURATIONS
from kubescale.kube.writes import update_with_retry
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.meta import LabelSelectorObject, LabelSelectorRequirement, ObjectMeta
from kubescale.objects.mutating_webhook_configuration import (
    MutatingWebhook,
    MutatingWebhookConfiguration,
    WebhookClientConfig,
)
from kubescale.objects.views import Meta
from kubescale.webhook.webhook_config import WebhookSettings

__all__ = [
    "NAMESPACE_NAME_LABEL",
    "WEBHOOK_CONFIG_NAME",
    "WEBHOOK_NAME",
    "CaBundleError",
    "WebhookRegistration",
    "ca_bundle_patch",
    "read_ca_bundle",
    "register_webhook",
    "webhook_configuration",
]

log = component_logger("webhook.registration")

WEBHOOK_CONFIG_NAME: Final = "vpa-webhook-config"
WEBHOOK_NAME: Final = "vpa.k8s.io"
NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


class CaBundleError(ValueError):
    """The CA file cannot be published as a caBundle (unreadable, empty, not PEM)."""


def read_ca_bundle(path: Path) -> bytes:
    """The CA file's bytes, checked to hold at least one PEM certificate."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CaBundleError(f"{path}: cannot read the CA bundle: {exc.strerror or exc}") from exc
    try:
        certificates = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise CaBundleError(f"{path}: not a PEM certificate bundle: {exc}") from exc
    if not certificates:
        raise CaBundleError(f"{path}: no certificate in the CA bundle")
    return data


def _namespace_selector(settings: WebhookSettings) -> LabelSelectorObject:
    expression: LabelSelectorRequirement
    if settings.ignored_vpa_object_namespaces:
        expression = {
            "key": NAMESPACE_NAME_LABEL,
            "operator": "NotIn",
            "values": list(settings.ignored_vpa_object_namespaces),
        }
        return {"matchExpressions": [expression]}
    if settings.vpa_object_namespace:
        expression = {
            "key": NAMESPACE_NAME_LABEL,
            "operator": "In",
            "values": [settings.vpa_object_namespace],
        }
        return {"matchExpressions": [expression]}
    return {}


def webhook_configuration(
    settings: WebhookSettings, *, ca_bundle: bytes
) -> MutatingWebhookConfiguration:
    """The MutatingWebhookConfiguration upstream's ``selfRegistration`` creates."""
    client_config: WebhookClientConfig = {"caBundle": base64.b64encode(ca_bundle).decode("ascii")}
    if settings.register_by_url:
        client_config["url"] = settings.url
    else:
        client_config["service"] = {
            "namespace": settings.service_namespace,
            "name": settings.service_name,
        }
    metadata: ObjectMeta = {"name": WEBHOOK_CONFIG_NAME}
    if settings.labels:
        metadata["labels"] = dict(settings.labels)
    hook: MutatingWebhook = {
        "name": WEBHOOK_NAME,
        "admissionReviewVersions": ["v1"],
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["pods"],
            },
            {
                "operations": ["CREATE", "UPDATE"],
                "apiGroups": ["autoscaling.k8s.io"],
                "apiVersions": ["*"],
                "resources": ["verticalpodautoscalers"],
            },
        ],
        "failurePolicy": "Fail" if settings.failure_policy_fail else "Ignore",
        "clientConfig": client_config,
        "sideEffects": "None",
        "timeoutSeconds": settings.timeout_seconds,
        "namespaceSelector": _namespace_selector(settings),
    }
    return {
        "apiVersion": MUTATING_WEBHOOK_CONFIGURATIONS.group_version,
        "kind": MUTATING_WEBHOOK_CONFIGURATIONS.kind,
        "metadata": metadata,
        "webhooks": [hook],
    }


async def register_webhook(
    client: KubeClient, settings: WebhookSettings, *, ca_bundle: bytes
) -> dict[str, Any]:
    """Create the configuration, or replace an existing one in place; the stored object (as
    the client returns it: the server's JSON, untyped)."""
    desired = webhook_configuration(settings, ca_bundle=ca_bundle)

    # the stored object as the server sent it (update_with_retry's Mutation)
    def replace(current: dict[str, Any]) -> dict[str, Any]:
        metadata = Meta(current).raw.copy()
        metadata["labels"] = dict(settings.labels)
        return {**desired, "metadata": metadata}

    try:
        stored = await client.create(MUTATING_WEBHOOK_CONFIGURATIONS, desired)
        action = "created"
    except KubeApiError as err:
        if not err.already_exists:
            raise
        stored = await update_with_retry(
            client, MUTATING_WEBHOOK_CONFIGURATIONS, name=WEBHOOK_CONFIG_NAME, mutate=replace
        )
        action = "replaced"
    log.info(
        "self-registration as mutating webhook succeeded",
        extra={"fields": {"configuration": WEBHOOK_CONFIG_NAME, "action": action}},
    )
    return stored


def ca_bundle_patch(configuration: Mapping[str, Any], ca_bundle: bytes) -> list[JsonPatchOperation]:
    """JSON patch replacing the caBundle of every ``vpa.k8s.io`` webhook (each guarded by a
    ``test`` of its name, so a concurrent reordering fails instead of patching another hook).
    ``configuration`` is the stored object as read (its hooks checked, not assumed)."""
    encoded = base64.b64encode(ca_bundle).decode("ascii")
    patch: list[JsonPatchOperation] = []
    for index, hook in enumerate(configuration.get("webhooks") or []):
        if not isinstance(hook, Mapping) or hook.get("name") != WEBHOOK_NAME:
            continue
        if (hook.get("clientConfig") or {}).get("caBundle") == encoded:
            continue
        patch.append({"op": "test", "path": f"/webhooks/{index}/name", "value": WEBHOOK_NAME})
        patch.append(
            {"op": "replace", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": encoded}
        )
    return patch


class WebhookRegistration:
    """Self-registration, then the caBundle kept in step with ``--client-ca-file``.

    A loop of every replica (upstream registers from every replica too): each
    :meth:`run_once` registers the configuration until that has succeeded once, then — with
    ``--reload-cert`` — re-publishes the caBundle when the CA file changed. Failures are logged
    and retried at the next iteration; upstream exits instead.
    """

    name = "vpa-webhook-registration"

    def __init__(
        self,
        *,
        client: KubeClient,
        settings: WebhookSettings,
        ca_file: Path,
        reload: bool,
    ) -> None:
        self._client = client
        self._settings = settings
        self._ca_file = ca_file
        self._reload = reload
        self.published: bytes | None = None
        """The CA bytes the configuration carries (as far as this process knows)."""
        self.registered = asyncio.Event()
        self.refreshes = 0
        self.failures = 0

    async def run_once(self, now: datetime) -> None:
        if self.published is None:
            await self.register()
        elif self._reload:
            try:
                await self.refresh_if_changed()
            except KubeError as exc:
                self.failures += 1
                log.warning("re-publishing the CA bundle failed; will retry: %s", exc)

    async def register(self) -> bool:
        """One registration attempt; whether it succeeded."""
        try:
            candidate = read_ca_bundle(self._ca_file)
            await register_webhook(self._client, self._settings, ca_bundle=candidate)
        except (CaBundleError, KubeError) as exc:
            self.failures += 1
            log.log(
                failure_log_level(exc),
                "self-registration failed; retrying",
                extra={"fields": {"error": str(exc)}},
            )
            return False
        self.published = candidate
        self.registered.set()
        return True

    async def refresh_if_changed(self) -> bool:
        """Patch the caBundle if the file changed; ``True`` when the server was written to."""
        try:
            data = read_ca_bundle(self._ca_file)
        except CaBundleError as exc:
            self.failures += 1
            log.warning("not re-publishing the CA bundle: %s", exc)
            return False
        if data == self.published:
            return False
        try:
            current = await self._client.get(MUTATING_WEBHOOK_CONFIGURATIONS, WEBHOOK_CONFIG_NAME)
        except KubeApiError as err:
            if not err.not_found:
                raise
            await register_webhook(self._client, self._settings, ca_bundle=data)
        else:
            patch = ca_bundle_patch(current, data)
            if patch:
                await self._client.patch(
                    MUTATING_WEBHOOK_CONFIGURATIONS,
                    WEBHOOK_CONFIG_NAME,
                    patch,
                    patch_type="json",
                )
        self.published = data
        self.refreshes += 1
        log.info(
            "CA bundle changed; webhook caBundle re-published",
            extra={"fields": {"configuration": WEBHOOK_CONFIG_NAME, "file": str(self._ca_file)}},
        )
        return True
