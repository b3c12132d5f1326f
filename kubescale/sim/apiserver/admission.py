"""Dynamic admission: calling Mutating- and ValidatingWebhookConfigurations as kube-apiserver does.

The in-process API server runs every CREATE and UPDATE (not status-only writes) through
:meth:`AdmissionChain.admit` with the webhook configurations from its store, so a webhook under
test (kubescale's VPA admission controller, or any aiohttp app) sees the same AdmissionReview
requests, over real TLS, that a cluster would send, and the client sees the same errors.

Contract (upstream: ``k8s.io/apiserver/pkg/admission/plugin/webhook/...``):

* Order: mutating configurations sorted by name, webhooks in order; then every validating
  webhook (upstream calls them in parallel; so do we, and the first denial in configuration
  order wins). Webhook configurations themselves are never sent to webhooks
  (``rules.IsExemptAdmissionConfigurationResource``).
* Which webhooks are called: :mod:`.admission_matching` (rules, namespaceSelector,
  objectSelector, scope). How a call is made and how it fails: :mod:`.webhook_calls`.
* Failures to call (connection, TLS, timeout, non-2xx, malformed review, wrong uid) follow
  ``failurePolicy`` (default Fail → 500 ``Internal error occurred: failed calling webhook ...``;
  Ignore → logged and skipped). A denial is the webhook's Status with the upstream message
  prefix (code below 400 raised to 400). A patch is a base64 JSONPatch; one that does not apply
  is a 500 whatever the failurePolicy.
* dryRun: a matching webhook whose sideEffects is not None/NoneOnDryRun rejects the request
  with 400 ``admission webhook "<name>" does not support dry run``.
* ``reinvocationPolicy: IfNeeded``: one extra round re-calls those webhooks when a later webhook
  changed the object (``mutating/reinvocationcontext.go``). The in-tree plugins the server
  models (LimitRanger, :mod:`.in_tree_admission`) run before the mutating webhooks and in
  ``between`` (after them); they are not re-invoked.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubescale.base.logs import component_logger
from kubescale.kube.resources import ResourceType

from . import errors
from .admission_matching import (
    AdmissionDenied,
    RequestAttributes,
    Webhook,
    ordered_webhooks,
    request_attributes,
    should_call,
    webhook_matches,
)
from .patching import PatchError, apply_json_patch
from .webhook_calls import ServiceResolver, WebhookCallFailure, WebhookClient

__all__ = [
    "AdmissionChain",
    "AdmissionDenied",
    "AdmissionOutcome",
    "ServiceResolver",
    "webhook_matches",
]

_log = component_logger("apiserver.admission")

_SIDE_EFFECT_FREE: Final = frozenset({"None", "NoneOnDryRun"})


@dataclass(frozen=True)
class AdmissionOutcome:
    """What admission decided.

    ``allowed`` → ``object`` is the (possibly mutated) object to persist; denied → ``status``
    is the metav1.Status to answer with (code, reason and message as kube-apiserver's).
    """

    allowed: bool
    object: dict[str, Any] | None
    status: dict[str, Any] | None
    warnings: tuple[str, ...]


def _rejection(hook: Webhook, result: Any) -> dict[str, Any]:
    """``webhookerrors.ToStatusErr``: the webhook's Status, sanitised and prefixed."""
    status: dict[str, Any] = dict(result) if isinstance(result, Mapping) else {}
    denied_by = f"admission webhook {json.dumps(hook.name)} denied the request"
    try:
        code = int(status.get("code") or 0)
    except (TypeError, ValueError):
        code = 0
    status["code"] = max(code, 400)  # never a < 400 code along with a rejection
    if status.get("status") in (None, "", "Success"):
        status["status"] = "Failure"
    if status.get("message"):
        status["message"] = f"{denied_by}: {status['message']}"
    elif status.get("reason"):
        status["message"] = f"{denied_by}: {status['reason']}"
    else:
        status["message"] = f"{denied_by} without explanation"
    status.update(kind="Status", apiVersion="v1")
    status.setdefault("metadata", {})
    return status


def _patched(hook: Webhook, response: Mapping[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    """Apply a mutating webhook's JSONPatch (``callAttrMutatingHook``)."""
    try:
        operations = json.loads(base64.b64decode(str(response["patch"]), validate=True))
    except (binascii.Error, ValueError) as exc:
        raise WebhookCallFailure(
            hook, f"received undecodable patch in webhook response: {exc}"
        ) from exc
    if not isinstance(operations, list):
        raise WebhookCallFailure(
            hook,
            "received undecodable patch in webhook response: "
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        )
    if not operations:
        return obj
    if response.get("patchType") != "JSONPatch":
        raise WebhookCallFailure(hook, f'unsupported patch type "{response.get("patchType")}"')
    try:
        patched = apply_json_patch(obj, operations)
    except PatchError as exc:
        raise AdmissionDenied(errors.internal_error(str(exc)).status) from exc
    if not isinstance(patched, dict):
        raise AdmissionDenied(
            errors.internal_error("the patched object is not a JSON object").status
        )
    return patched


# --- the chain --------------------------------------------------------------------------------


class AdmissionChain:
    """The mutating then validating webhook phases of kube-apiserver's admission chain."""

    def __init__(self, *, resolver: ServiceResolver) -> None:
        self._client = WebhookClient(resolver)

    async def admit(
        self,
        *,
        operation: str,
        resource: ResourceType,
        subresource: str,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        mutating: Sequence[dict[str, Any]],
        validating: Sequence[dict[str, Any]],
        dry_run: bool = False,
        between: Callable[[dict[str, Any]], None] | None = None,
    ) -> AdmissionOutcome:
        """Run the request through every matching webhook; see the module docstring.

        ``between`` sees the object after the mutating phase and before the validating one
        (kube-apiserver's object validation and in-tree validating plugins run there); what it
        raises propagates.
        """
        attrs = request_attributes(
            operation=operation,
            resource=resource,
            subresource=subresource,
            obj=obj,
            old_obj=old_obj,
            dry_run=dry_run,
        )
        if resource.group == "admissionregistration.k8s.io":
            if between is not None:
                between(obj)
            return AdmissionOutcome(allowed=True, object=obj, status=None, warnings=())
        warnings: list[str] = []
        try:
            current = await self._mutate(
                attrs,
                obj=obj,
                old_obj=old_obj,
                namespace_obj=namespace_obj,
                hooks=ordered_webhooks(mutating, mutating=True),
                warnings=warnings,
            )
            if between is not None:
                between(current)
            await self._validate(
                attrs,
                obj=current,
                old_obj=old_obj,
                namespace_obj=namespace_obj,
                hooks=ordered_webhooks(validating, mutating=False),
                warnings=warnings,
            )
        except AdmissionDenied as denied:
            return AdmissionOutcome(
                allowed=False, object=None, status=denied.status, warnings=tuple(warnings)
            )
        return AdmissionOutcome(allowed=True, object=current, status=None, warnings=tuple(warnings))

    async def _mutate(
        self,
        attrs: RequestAttributes,
        *,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        hooks: list[Webhook],
        warnings: list[str],
    ) -> dict[str, Any]:
        current = obj
        invoked_reinvocable: set[tuple[str, int]] = set()
        to_reinvoke: set[tuple[str, int]] = set()
        changed_any = False
        for reinvocation in (False, True):
            if reinvocation and not (changed_any and to_reinvoke):
                break
            for hook in hooks:
                if reinvocation and hook.key not in to_reinvoke:
                    continue
                if not should_call(
                    hook, attrs, obj=current, old_obj=old_obj, namespace_obj=namespace_obj
                ):
                    continue
                result = await self._call(hook, attrs, current, old_obj, warnings)
                if result is not None and result != current:
                    current = result
                    changed_any = True
                    # webhooks that may want to see this change get one more call
                    to_reinvoke |= invoked_reinvocable
                    invoked_reinvocable = set()
                if hook.reinvocable:
                    invoked_reinvocable.add(hook.key)
        return current

    async def _validate(
        self,
        attrs: RequestAttributes,
        *,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        namespace_obj: dict[str, Any] | None,
        hooks: list[Webhook],
        warnings: list[str],
    ) -> None:
        called = [
            hook
            for hook in hooks
            if should_call(hook, attrs, obj=obj, old_obj=old_obj, namespace_obj=namespace_obj)
        ]
        per_hook: list[list[str]] = [[] for _ in called]
        outcomes = await asyncio.gather(
            *(
                self._call(hook, attrs, obj, old_obj, sink)
                for hook, sink in zip(called, per_hook, strict=True)
            ),
            return_exceptions=True,
        )
        for sink in per_hook:
            warnings.extend(sink)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                raise outcome

    async def _call(
        self,
        hook: Webhook,
        attrs: RequestAttributes,
        obj: dict[str, Any],
        old_obj: dict[str, Any] | None,
        warnings: list[str],
    ) -> dict[str, Any] | None:
        """Call one webhook: the patched object (mutating), None if skipped or unchanged."""
        if attrs.dry_run and hook.spec.get("sideEffects") not in _SIDE_EFFECT_FREE:
            if hook.spec.get("sideEffects") is None:
                self._fail_open_or_raise(
                    hook, WebhookCallFailure(hook, "Webhook SideEffects is nil")
                )
                return None
            message = f"admission webhook {json.dumps(hook.name)} does not support dry run"
            raise AdmissionDenied(errors.bad_request(message).status)
        try:
            response = await self._client.review(hook, attrs, obj, old_obj)
            warnings.extend(str(w) for w in response.get("warnings") or ())
            if not response.get("allowed"):
                raise AdmissionDenied(_rejection(hook, response.get("status")))
            if hook.mutating and response.get("patch"):
                return _patched(hook, response, obj)
        except WebhookCallFailure as failure:
            self._fail_open_or_raise(hook, failure)
        return None

    def _fail_open_or_raise(self, hook: Webhook, failure: WebhookCallFailure) -> None:
        if hook.ignore_failures:
            _log.warning(
                "Failed calling webhook, failing open %s: %s",
                hook.name,
                failure,
                extra={"fields": {"webhook": hook.name}},
            )
            return
        _log.warning("Failed calling webhook, failing closed %s: %s", hook.name, failure)
        raise AdmissionDenied(errors.internal_error(str(failure)).status)

    async def close(self) -> None:
        """Close the HTTP client (idempotent); the chain may be used again afterwards."""
        await self._client.close()
