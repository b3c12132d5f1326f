"""The RBAC authorizer's decision, evaluated over the objects of ``manifests/``.

Kubernetes' RBAC authorizer (``plugin/pkg/auth/authorizer/rbac``) allows a request when some rule
of a role bound to the requester matches it:

* a ClusterRoleBinding applies its ClusterRole's rules to requests in every namespace and to
  cluster-scoped and all-namespace requests; a RoleBinding applies its Role's (or ClusterRole's)
  rules only to requests in the binding's own namespace;
* a subject of kind ServiceAccount matches by name *and* namespace;
* a rule matches when its verbs contain the verb or ``*``, its apiGroups the group or ``*``, its
  resources the resource (``pods``), the resource with subresource (``pods/eviction``), ``*``
  (which includes subresources) or ``*/<subresource>``; and, when the rule has resourceNames, the
  request names one of them (so such a rule never matches ``create``, ``list`` or ``watch``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class Request:
    """One API request as the authorizer sees it."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str | None = None
    """``None`` for cluster-scoped objects and for lists/watches across all namespaces."""
    name: str = ""

    def __str__(self) -> str:
        resource = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        named = f" {self.name}" if self.name else ""
        where = f" in {self.namespace}" if self.namespace else " (cluster-wide)"
        return f"{self.verb} {self.group or 'core'}/{resource}{named}{where}"


@dataclass(frozen=True, kw_only=True)
class ServiceAccountRef:
    namespace: str
    name: str


def _resource_matches(rule: dict[str, Any], request: Request) -> bool:
    combined = (
        f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    )
    for resource in rule.get("resources") or []:
        if resource in ("*", combined):
            return True
        if request.subresource and resource == f"*/{request.subresource}":
            return True
    return False


def rule_allows(rule: dict[str, Any], request: Request) -> bool:
    """Whether one PolicyRule matches the request."""
    verbs = rule.get("verbs") or []
    if request.verb not in verbs and "*" not in verbs:
        return False
    groups = rule.get("apiGroups") or []
    if request.group not in groups and "*" not in groups:
        return False
    if not _resource_matches(rule, request):
        return False
    names = rule.get("resourceNames") or []
    return not names or request.name in names


def _subject_is(subject: dict[str, Any], account: ServiceAccountRef) -> bool:
    return (
        subject.get("kind") == "ServiceAccount"
        and subject.get("name") == account.name
        and subject.get("namespace") == account.namespace
    )


def _role(
    objects: Sequence[dict[str, Any]], ref: dict[str, Any], namespace: str | None
) -> dict[str, Any] | None:
    for obj in objects:
        if obj.get("kind") != ref.get("kind") or obj["metadata"]["name"] != ref.get("name"):
            continue
        if obj["kind"] == "Role" and obj["metadata"].get("namespace") != namespace:
            continue
        return obj
    return None


def effective_rules(
    objects: Sequence[dict[str, Any]], *, account: ServiceAccountRef, namespace: str | None
) -> list[dict[str, Any]]:
    """The rules that apply to ``account``'s requests in ``namespace`` (``None``: cluster-wide)."""
    rules: list[dict[str, Any]] = []
    for binding in objects:
        kind = binding.get("kind")
        if kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not any(_subject_is(s, account) for s in binding.get("subjects") or []):
            continue
        binding_namespace = binding["metadata"].get("namespace")
        if kind == "RoleBinding" and binding_namespace != namespace:
            continue
        role = _role(objects, binding["roleRef"], binding_namespace)
        if role is not None:
            rules.extend(role.get("rules") or [])
    return rules


def allowed(
    objects: Sequence[dict[str, Any]], *, account: ServiceAccountRef, request: Request
) -> bool:
    """The RBAC authorizer's answer for ``account`` making ``request``."""
    rules = effective_rules(objects, account=account, namespace=request.namespace)
    return any(rule_allows(rule, request) for rule in rules)


def refused(
    objects: Sequence[dict[str, Any]], *, account: ServiceAccountRef, requests: Iterable[Request]
) -> list[str]:
    """The requests of ``requests`` that RBAC would refuse, as text (empty when all pass)."""
    return [str(r) for r in requests if not allowed(objects, account=account, request=r)]
