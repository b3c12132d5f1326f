"""Argument pieces several plugins share: ``namespaces`` and ``labelSelector``.

``namespaces`` is ``{include: [...], exclude: [...]}`` (``api.Namespaces``); setting both is
invalid. A pod passes when the include list is empty or names its namespace, and the exclude
list does not (``podutil.WithNamespaces``/``WithoutNamespaces``). An absent ``labelSelector``
filters nothing; ``{}`` selects everything.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubescale.objects.pod import Pod
from kubescale.objects.selectors import LabelSelector
from kubescale.objects.views import Meta

from .fields import Fields, fail

__all__ = ["Namespaces", "labels_match", "read_namespaces"]


@dataclass(frozen=True)
class Namespaces:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def allows(self, namespace: str) -> bool:
        if self.include and namespace not in self.include:
            return False
        return namespace not in self.exclude


ALL_NAMESPACES = Namespaces()


def read_namespaces(
    fields: Fields, key: str = "namespaces", *, exclude_only: bool = False
) -> Namespaces:
    """The ``namespaces``-style field; ``exclude_only`` for LNU/HNU's ``evictableNamespaces``."""
    obj = fields.object(key, ("include", "exclude"))
    if obj is None:
        return ALL_NAMESPACES
    include = obj.strings("include") or ()
    exclude = obj.strings("exclude") or ()
    if exclude_only and include:
        fail(obj.at("include"), "only exclude namespaces can be set, inclusion is not supported")
    if include and exclude:
        fail(fields.at(key), "only one of include and exclude can be set")
    return Namespaces(include=include, exclude=exclude)


def labels_match(selector: LabelSelector | None, pod: Pod) -> bool:
    """``podutil.WithLabelSelector``: no selector filters nothing."""
    if selector is None:
        return True
    return selector.matches(Meta(pod).raw.get("labels") or {})
