"""LIST semantics: label/field selection, resourceVersion matching, limit/continue paging.

Field selectors only accept the field labels a kind registers (``AddFieldLabelConversionFunc``
in ``pkg/apis/<group>/v1/conversion.go``): ``metadata.name``/``metadata.namespace`` for every
kind, plus e.g. ``spec.nodeName`` and ``status.phase`` for pods and ``involvedObject.*`` for
core events. Anything else is ``400 BadRequest: field label not supported: X``. The value a
label reads is the one kube's ``GetAttrs``/``ToSelectableFields`` renders (a pod's unset
``spec.hostNetwork`` reads ``false``).

Continue tokens are opaque to clients but shaped like upstream's (``storage.EncodeContinue``):
base64 of ``{"v":"meta.k8s.io/v1","rv":<list resourceVersion>,"start":"<last key>\\u0000"}``.
The next page is cut from the snapshot at ``rv`` (rebuilt from the change log), so paging is
consistent, and a token older than the change log is ``410 Expired`` — the etcd-compaction case.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kubescale.kube.resources import ResourceType
from kubescale.objects.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)

from . import errors
from .encoded import list_bytes
from .registry import BUILTIN_GROUPS
from .storage import Storage

__all__ = ["ListPage", "Selection", "list_page", "list_page_bytes", "parse_resource_version"]

_COMMON_FIELDS: Final = ("metadata.name", "metadata.namespace")
_POD_FIELDS: Final = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS: Final = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
_EXTRA_FIELDS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("", "pods"): _POD_FIELDS,
    ("", "events"): _EVENT_FIELDS,
    ("", "nodes"): ("spec.unschedulable",),
    ("", "namespaces"): ("status.phase",),
    ("apps", "replicasets"): ("status.replicas",),
    ("batch", "jobs"): ("status.successful",),
}
_CONTINUE_VERSION: Final = "meta.k8s.io/v1"
_INCONSISTENT_CONTINUE: Final = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


def supported_field_labels(rt: ResourceType) -> tuple[str, ...]:
    return _COMMON_FIELDS + _EXTRA_FIELDS.get(rt.key, ())


def _lookup(obj: Mapping[str, Any], path: str) -> Any:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    return str(value)


def selectable_fields(rt: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object's field set as nested dicts of strings (what a field selector reads)."""
    view: dict[str, Any] = {}
    for label in supported_field_labels(rt):
        if label == "source" and rt.key == ("", "events"):
            value = _render(_lookup(obj, "source.component"))
        elif label in {"spec.hostNetwork", "spec.unschedulable"}:
            value = _render(bool(_lookup(obj, label)))
        else:
            value = _render(_lookup(obj, label))
        node = view
        parts = label.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return view


@dataclass(frozen=True)
class Selection:
    """A parsed label and field selector for one kind."""

    rt: ResourceType
    labels: LabelSelector
    fields: FieldSelector

    @classmethod
    def parse(cls, rt: ResourceType, *, label_selector: str, field_selector: str) -> Selection:
        """Parse both selectors; 400 BadRequest for bad syntax or an unsupported field label."""
        try:
            labels = parse_label_selector(label_selector or "")
            fields = parse_field_selector(field_selector or "")
        except SelectorError as exc:
            raise errors.bad_request(str(exc)) from None
        allowed = set(supported_field_labels(rt))
        for requirement in fields.requirements:
            if requirement.field not in allowed:
                if rt.group in BUILTIN_GROUPS:
                    message = f"field label not supported: {requirement.field}"
                else:
                    message = (
                        f'"{requirement.field}" is not a known field selector: only '
                        '"metadata.name", "metadata.namespace"'
                    )
                raise errors.bad_request(message)
        return cls(rt=rt, labels=labels, fields=fields)

    @property
    def everything(self) -> bool:
        return self.labels.empty() and self.fields.empty()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        if self.everything:
            return True
        meta = obj.get("metadata") or {}
        if not self.labels.matches(meta.get("labels") or {}):
            return False
        return self.fields.empty() or self.fields.matches(selectable_fields(self.rt, obj))


def parse_resource_version(text: str, *, what: str = "resourceVersion") -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise errors.bad_request(f"invalid {what}: {text!r}")
    return value


def _encode_continue(rv: int, key: str) -> str:
    payload = json.dumps(
        {"v": _CONTINUE_VERSION, "rv": rv, "start": key + "\x00"}, separators=(",", ":")
    )
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        if data.get("v") != _CONTINUE_VERSION:
            raise ValueError("incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
        rv = int(data["rv"])
        start = str(data["start"])
    except (binascii.Error, ValueError, KeyError, TypeError) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from None
    if rv == 0 or not start:
        raise errors.bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion"
        )
    return rv, start.rstrip("\x00")


def _key(rt: ResourceType, obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if rt.namespaced else str(meta["name"])


@dataclass(frozen=True, kw_only=True)
class ListPage:
    items: list[dict[str, Any]]
    resource_version: int
    continue_token: str
    remaining: int | None


def list_page(
    store: Storage,
    rt: ResourceType,
    *,
    namespace: str | None,
    selection: Selection,
    limit: int = 0,
    continue_token: str = "",
    resource_version: str = "",
    resource_version_match: str = "",
) -> ListPage:
    """One LIST answer (items are shared snapshots; the caller serialises them)."""
    current = store.resource_version
    start_after = ""
    if continue_token:
        if resource_version:
            raise errors.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        rv, start_after = _decode_continue(continue_token)
        if rv < 0:
            rv = current  # an inconsistent continuation (the token a 410 hands out)
        elif rv < store.events.floor:
            token = _encode_continue(-1, start_after)
            error = errors.expired(_INCONSISTENT_CONTINUE)
            error.status["metadata"] = {"continue": token}
            raise error
    elif resource_version and resource_version != "0":
        wanted = parse_resource_version(resource_version)
        if resource_version_match == "Exact":
            rv = wanted
        else:
            if wanted > current:
                raise errors.status_error(
                    code=504,
                    reason="Timeout",
                    message=f"Too large resource version: {wanted}, current: {current}",
                    details={
                        "causes": [
                            {
                                "reason": "ResourceVersionTooLarge",
                                "message": "Too large resource version",
                            }
                        ],
                        "retryAfterSeconds": 1,
                    },
                )
            rv = current
    else:
        rv = current
    # The snapshot is sorted by key and shared by the pages of one LIST: each page starts by
    # bisection and scans only until it is full, so a paged LIST of N objects costs O(N).
    objects = store.snapshots_at(rt, namespace, rv)
    start = 0
    if start_after:
        start = bisect.bisect_right(objects, start_after, key=lambda o: _key(rt, o))
    matched: list[dict[str, Any]] = []
    scanned = start
    for obj in itertools.islice(objects, start, None):
        if limit > 0 and len(matched) == limit:
            break
        scanned += 1
        if selection.matches(obj):
            matched.append(obj)
    more = limit > 0 and any(selection.matches(o) for o in itertools.islice(objects, scanned, None))
    if more:
        token = _encode_continue(rv, _key(rt, matched[-1]))
        remaining = len(objects) - scanned if selection.everything else None
        return ListPage(
            items=matched, resource_version=rv, continue_token=token, remaining=remaining
        )
    return ListPage(items=matched, resource_version=rv, continue_token="", remaining=None)


def list_page_bytes(store: Storage, rt: ResourceType, page: ListPage) -> bytes:
    """The ``<Kind>List`` document of ``page``, its items' JSON reused from ``store`` (encoded
    once per stored object, :mod:`.encoded`); items of built-in kinds carry no
    apiVersion/kind (as kube)."""
    meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
    if page.continue_token:
        meta["continue"] = page.continue_token
    if page.remaining is not None:
        meta["remainingItemCount"] = page.remaining
    builtin = rt.group in BUILTIN_GROUPS
    return list_bytes(
        kind=rt.list_kind,
        api_version=rt.group_version,
        metadata=meta,
        items=[store.list_item(rt, o, builtin=builtin) for o in page.items],
    )
