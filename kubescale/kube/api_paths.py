"""The one builder of the URL paths kubescale sends to the API server.

Why one function: pieces of a path come from objects other people write — an owner reference's
``apiVersion`` and ``name`` in a pod being admitted, a VPA's ``targetRef``, a discovery
document. Put into a URL unchecked, ``apps/../../api/v1/namespaces/kube-system/secrets/x`` is
resolved by the HTTP client (dot segments are removed before sending) into a GET of a Secret
with kubescale's token, and a ``?`` or ``#`` turns the rest into a query or drops it. So every
request path is built by :func:`api_path`, which validates each segment against the rule the
API server itself applies to that kind of name, and percent-escapes object names; the access
layer's transport only sends an :data:`ApiPath`, which only this module constructs (a test walks
the product for any other ``/api`` path or ``ApiPath(`` construction).

Rules (apimachinery ``pkg/util/validation`` and the API server's own validation):

* group — ``""`` (the core group, served under ``/api``) or a DNS-1123 subdomain
  (``IsDNS1123Subdomain``: lowercase alphanumerics, ``-`` and ``.``, at most 253 characters);
* version — a DNS-1035 label (a CRD's ``versions[].name``; ``v1``, ``v1beta1``, ``v2``);
* resource (plural) and subresource — DNS-1035 labels (a CRD's ``names.plural`` is one);
* namespace — a DNS-1123 label (``ValidateNamespaceName``);
* object name — ``ValidatePathSegmentName``: not ``.`` or ``..``, no ``/`` or ``%``; also no
  whitespace or control characters (no kind allows them); the name is percent-escaped, so ``?``
  and ``#`` stay part of the segment.

A segment that breaks its rule raises :class:`InvalidPathSegment` (a ``ValueError``) naming the
segment and the rule; nothing is sent.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, NewType
from urllib.parse import quote

__all__ = [
    "API_GROUP_LIST",
    "ApiPath",
    "InvalidPathSegment",
    "api_path",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "metrics_api_path",
    "split_api_version",
    "validate_group",
    "validate_kind",
    "validate_object_name",
    "validate_version",
]

ApiPath = NewType("ApiPath", str)
"""A request path built (validated and escaped) by :func:`api_path`; the transport sends only
these."""

API_GROUP_LIST: Final = ApiPath("/apis")
"""The ``APIGroupList`` of every served group and its versions (discovery)."""

_DNS1123_LABEL: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_KIND: Final = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_LABEL_MAX: Final = 63
_SUBDOMAIN_MAX: Final = 253


class InvalidPathSegment(ValueError):
    """A piece of a request path that breaks the API server's rule for it."""


def is_dns1123_label(text: str) -> bool:
    """``IsDNS1123Label``: at most 63 lowercase alphanumerics or ``-``, alphanumeric ends."""
    return len(text) <= _LABEL_MAX and _DNS1123_LABEL.fullmatch(text) is not None


def is_dns1123_subdomain(text: str) -> bool:
    """``IsDNS1123Subdomain``: at most 253 characters of dot-separated DNS-1123 labels."""
    return 0 < len(text) <= _SUBDOMAIN_MAX and all(
        _DNS1123_LABEL.fullmatch(label) is not None for label in text.split(".")
    )


def is_dns1035_label(text: str) -> bool:
    """``IsDNS1035Label``: a DNS-1123 label that starts with a letter."""
    return len(text) <= _LABEL_MAX and _DNS1035_LABEL.fullmatch(text) is not None


def validate_group(group: str) -> str:
    if group and not is_dns1123_subdomain(group):
        raise InvalidPathSegment(f"API group {group!r} is not a DNS-1123 subdomain")
    return group


def validate_version(version: str) -> str:
    if not is_dns1035_label(version):
        raise InvalidPathSegment(f"API version {version!r} is not a DNS-1035 label")
    return version


def validate_kind(kind: str) -> str:
    """A kind: a letter then letters and digits (a CRD's ``names.kind``, lower-cased, must be a
    DNS-1035 label; no kind has ``-``), at most 63 characters."""
    if len(kind) > _LABEL_MAX or _KIND.fullmatch(kind) is None:
        raise InvalidPathSegment(f"kind {kind!r} is not a valid kind name")
    return kind


def validate_object_name(name: str) -> str:
    """``ValidatePathSegmentName`` plus no whitespace or control characters."""
    if name in ("", ".", ".."):
        raise InvalidPathSegment(f"object name {name!r} may not be empty, '.' or '..'")
    if "/" in name or "%" in name:
        raise InvalidPathSegment(f"object name {name!r} may not contain '/' or '%'")
    if any(ch.isspace() or not ch.isprintable() for ch in name):
        raise InvalidPathSegment(f"object name {name!r} may not contain whitespace")
    return name


def split_api_version(api_version: str) -> tuple[str, str]:
    """``schema.ParseGroupVersion`` of an object's ``apiVersion``, validated.

    ``v1`` → ``("", "v1")``; ``apps/v1`` → ``("apps", "v1")``. More than one ``/``, an empty
    part or a part that breaks its rule raises :class:`InvalidPathSegment`.
    """
    if api_version.count("/") > 1:
        raise InvalidPathSegment(f"apiVersion {api_version!r} has more than one '/'")
    group, sep, version = api_version.rpartition("/")
    if sep and not group:
        raise InvalidPathSegment(f"apiVersion {api_version!r} has an empty group")
    return validate_group(group), validate_version(version)


def _validated(rule: str, text: str, *, valid: bool) -> str:
    if not valid:
        raise InvalidPathSegment(f"{rule} {text!r} is not a DNS-1035 label")
    return text


def api_path(
    *,
    group: str,
    version: str,
    plural: str = "",
    namespace: str | None = None,
    name: str = "",
    subresource: str = "",
) -> ApiPath:
    """``/api/<version>`` or ``/apis/<group>/<version>``, then ``/namespaces/<namespace>``
    (when given), ``/<plural>``, ``/<name>`` and ``/<subresource>``, each validated.

    Without ``plural`` it is the group version's discovery document (``namespace``, ``name`` and
    ``subresource`` must then be empty); a ``name`` needs a ``plural`` and a ``subresource`` a
    ``name``. The object name is percent-escaped (every reserved character).
    """
    segments = ["apis", validate_group(group)] if group else ["api"]
    segments.append(validate_version(version))
    if not plural:
        if namespace is not None or name or subresource:
            raise InvalidPathSegment("a namespace, name or subresource needs a resource")
        return ApiPath("/" + "/".join(segments))
    if namespace is not None:
        if not is_dns1123_label(namespace):
            raise InvalidPathSegment(f"namespace {namespace!r} is not a DNS-1123 label")
        segments += ["namespaces", namespace]
    segments.append(_validated("resource", plural, valid=is_dns1035_label(plural)))
    if name:
        segments.append(quote(validate_object_name(name), safe=""))
    if subresource:
        if not name:
            raise InvalidPathSegment(f"subresource {subresource!r} needs an object name")
        segments.append(_validated("subresource", subresource, valid=is_dns1035_label(subresource)))
    return ApiPath("/" + "/".join(segments))


def metrics_api_path(
    *, group: str, version: str, namespace: str, segments: Sequence[str]
) -> ApiPath:
    """A path under an aggregated metrics API (``metrics.k8s.io``, ``custom.metrics.k8s.io``,
    ``external.metrics.k8s.io``): ``/apis/<group>/<version>/namespaces/<namespace>/`` and then
    segments that are not REST names — a resource (``pods``, ``deployments.apps``), an object
    name or ``*`` (every object), a metric name (Prometheus names hold ``_`` and ``:``).

    Their pieces come from HPA specs, so each segment must be a valid path segment
    (``ValidatePathSegmentName``, as an object name) and is percent-escaped; ``*`` alone stays
    literal, as upstream's custom metrics client sends it.
    """
    path = api_path(group=group, version=version)
    if not is_dns1123_label(namespace):
        raise InvalidPathSegment(f"namespace {namespace!r} is not a DNS-1123 label")
    parts = [path, "namespaces", namespace]
    for segment in segments:
        parts.append("*" if segment == "*" else quote(validate_object_name(segment), safe=""))
    return ApiPath("/".join(parts))
