"""Which admission webhooks kube-apiserver calls for a request, and in which order.

Pure decisions over the request and the webhook configurations from the store; no I/O. The
chain (:mod:`.admission`) calls the webhooks this module selects (:mod:`.webhook_calls`).

Contract (upstream: ``k8s.io/apiserver/pkg/admission/plugin/webhook/...``):

* Order: configurations sorted by name, webhooks in the order they are listed; ``key``
  (configuration name, index) tells a webhook apart from a same-named one elsewhere.
* Matching (``generic/webhook.go ShouldCallHook``): the rules (operations, apiGroups,
  apiVersions, resources with ``*``/``res/sub``/``*/*`` forms, scope), namespaceSelector, then
  objectSelector (new *or* old object). ``matchPolicy: Equivalent`` is treated as Exact: the
  catalogue serves one version per kind, so there is no equivalent resource to convert to.
  ``matchConditions`` (CEL) are not evaluated: such a webhook is called as if they matched.
* Where upstream fails the request instead of deciding, :class:`AdmissionDenied` carries the
  Status: a selector that does not parse (500), a namespaceSelector to evaluate for a namespace
  that does not exist (404).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kubescale.kube.resources import NAMESPACES, ResourceType
from kubescale.objects.selectors import SelectorError, label_selector_from_dict

from . import errors

__all__ = [
    "AdmissionDenied",
    "RequestAttributes",
    "Webhook",
    "ordered_webhooks",
    "request_attributes",
    "should_call",
    "webhook_matches",
]

DEFAULT_TIMEOUT_SECONDS: Final = 10  # admissionregistration/v1 defaults.go
MAX_TIMEOUT_SECONDS: Final = 30  # validation: 1..30


class AdmissionDenied(Exception):
    """A final answer: a webhook's rejection or an error no failurePolicy can soften.

    ``status`` is the metav1.Status to answer with.
    """

    def __init__(self, status: dict[str, Any]) -> None:
        super().__init__(status.get("message", ""))
        self.status = status


@dataclass(frozen=True)
class RequestAttributes:
    """``admission.Attributes`` of one request: what matching and the review are built from."""

    operation: str
    resource: ResourceType
    subresource: str
    kind: tuple[str, str, str]  # group, version, kind of the object sent
    name: str
    namespace: str
    dry_run: bool

    @property
    def is_namespace(self) -> bool:
        return self.resource.group == "" and self.resource.plural == "namespaces"


def request_attributes(
    *,
    operation: str,
    resource: ResourceType,
    subresource: str,
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any] | None,
    dry_run: bool,
) -> RequestAttributes:
    """The attributes of a write of ``obj`` (``old_obj`` the stored object, for an UPDATE)."""
    metadata = obj.get("metadata") or (old_obj or {}).get("metadata") or {}
    name = str(metadata.get("name") or "")
    api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
    if api_version and kind:
        group, _, version = api_version.rpartition("/")
        gvk = (group, version, kind)
    elif subresource == "scale":
        gvk = ("autoscaling", "v1", "Scale")
    else:
        gvk = (resource.group, resource.version, resource.kind)
    if resource.group == "" and resource.plural == "namespaces":
        # RequestInfo: /api/v1/namespaces/<name> names the namespace; the collection does not
        namespace = "" if operation == "CREATE" else name
    elif resource.namespaced:
        namespace = str(metadata.get("namespace") or "")
    else:
        namespace = ""
    return RequestAttributes(
        operation=operation,
        resource=resource,
        subresource=subresource,
        kind=gvk,
        name=name,
        namespace=namespace,
        dry_run=dry_run,
    )


@dataclass(frozen=True)
class Webhook:
    """One webhook of one configuration; ``key`` tells duplicates across configurations apart."""

    key: tuple[str, int]
    spec: Mapping[str, Any]
    mutating: bool

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    @property
    def ignore_failures(self) -> bool:
        return bool(self.spec.get("failurePolicy", "Fail") == "Ignore")

    @property
    def timeout(self) -> int:
        raw = self.spec.get("timeoutSeconds")
        seconds = DEFAULT_TIMEOUT_SECONDS if raw is None else int(raw)
        return min(max(seconds, 1), MAX_TIMEOUT_SECONDS)

    @property
    def reinvocable(self) -> bool:
        return self.mutating and self.spec.get("reinvocationPolicy") == "IfNeeded"


def ordered_webhooks(
    configurations: Sequence[Mapping[str, Any]], *, mutating: bool
) -> list[Webhook]:
    """Every webhook of the configurations, configurations sorted by name."""
    ordered = sorted(configurations, key=lambda c: str((c.get("metadata") or {}).get("name", "")))
    hooks: list[Webhook] = []
    for configuration in ordered:
        config_name = str((configuration.get("metadata") or {}).get("name", ""))
        for index, spec in enumerate(configuration.get("webhooks") or ()):
            hooks.append(Webhook(key=(config_name, index), spec=spec, mutating=mutating))
    return hooks


def _listed(items: Any, requested: str) -> bool:
    return isinstance(items, list) and any(item in ("*", requested) for item in items)


def _rule_matches(rule: Mapping[str, Any], attrs: RequestAttributes) -> bool:
    """``predicates/rules.Matcher.Matches``: scope, operation, group, version, resource."""
    scope = rule.get("scope") or "*"
    has_namespace = bool(attrs.namespace)
    if scope == "Namespaced":
        # a Namespace object is cluster-scoped even though its request names a namespace
        in_scope = not attrs.is_namespace and has_namespace
    elif scope == "Cluster":
        in_scope = attrs.is_namespace or not has_namespace
    else:
        in_scope = scope == "*"
    if not in_scope:
        return False
    if not _listed(rule.get("operations"), attrs.operation):
        return False
    if not _listed(rule.get("apiGroups"), attrs.resource.group):
        return False
    if not _listed(rule.get("apiVersions"), attrs.resource.version):
        return False
    for entry in rule.get("resources") or ():
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", attrs.resource.plural) and sub in ("*", attrs.subresource):
            return True
    return False


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    # API defaulting turns an absent selector into {} (everything); objects/selectors reads None
    # as "nothing", so absent is mapped here.
    if selector is None:
        return True
    return label_selector_from_dict(selector).matches(labels)


def _labels(obj: Mapping[str, Any] | None) -> dict[str, str]:
    if not obj:
        return {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return {str(k): str(v) for k, v in labels.items()}


def _namespace_matches(
    hook: Webhook,
    attrs: RequestAttributes,
    obj: Mapping[str, Any],
    namespace_obj: Mapping[str, Any] | None,
) -> bool:
    """``predicates/namespace.Matcher.MatchNamespaceSelector``."""
    if not attrs.namespace and not attrs.is_namespace:
        return True  # cluster-scoped objects other than Namespaces are never exempted
    selector = hook.spec.get("namespaceSelector")
    if selector is None or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return True
    if attrs.is_namespace and not attrs.subresource and attrs.operation in ("CREATE", "UPDATE"):
        labels = _labels(obj)  # the namespace being written is its own namespace
    elif namespace_obj is None:
        raise AdmissionDenied(errors.not_found(NAMESPACES, attrs.namespace).status)
    else:
        labels = _labels(namespace_obj)
    return _selector_matches(selector, labels)


def should_call(
    hook: Webhook,
    attrs: RequestAttributes,
    *,
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any] | None,
    namespace_obj: Mapping[str, Any] | None,
) -> bool:
    """Whether ``hook`` applies to the request (``ShouldCallHook``, minus CEL conditions)."""
    if not any(_rule_matches(rule, attrs) for rule in hook.spec.get("rules") or ()):
        return False
    try:
        if not _namespace_matches(hook, attrs, obj, namespace_obj):
            return False
        selector = hook.spec.get("objectSelector")
        return _selector_matches(selector, _labels(obj)) or (
            old_obj is not None and _selector_matches(selector, _labels(old_obj))
        )
    except SelectorError as exc:
        raise AdmissionDenied(errors.internal_error(str(exc)).status) from exc


def webhook_matches(
    webhook: Mapping[str, Any],
    *,
    operation: str,
    resource: ResourceType,
    subresource: str,
    obj: Mapping[str, Any],
    old_obj: Mapping[str, Any] | None = None,
    namespace_obj: Mapping[str, Any] | None = None,
) -> bool:
    """Whether kube-apiserver would call ``webhook`` (one entry of a configuration's
    ``webhooks``) for this request: rules, namespaceSelector and objectSelector.

    Raises :class:`AdmissionDenied` where upstream fails the request instead: a selector that
    does not parse (500), or a namespaceSelector to evaluate for a namespace that does not
    exist (404).
    """
    attrs = request_attributes(
        operation=operation,
        resource=resource,
        subresource=subresource,
        obj=obj,
        old_obj=old_obj,
        dry_run=False,
    )
    hook = Webhook(key=("", 0), spec=webhook, mutating=False)
    return should_call(hook, attrs, obj=obj, old_obj=old_obj, namespace_obj=namespace_obj)
