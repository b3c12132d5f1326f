"""Projected objects: per kind, only the fields kubescale reads (issue 29).

An informer keeps every object of its collection for the life of the process; at 150,000 pods
what it keeps *is* the process's memory. Most of an API object is never read here:
``metadata.managedFields`` (often half of the JSON), ``kubectl``'s last-applied annotation, the
container ``env``/``command``/probes, status fields no loop looks at. The TypedDicts of this
package name, kind by kind, exactly the fields kubescale's readers use (``mypy --strict`` holds
readers to them), so they *are* the projection: :func:`projection_of` derives one
:class:`Projection` from a kind's TypedDict, recursively (a nested TypedDict keeps its declared
fields, a ``list[T]`` projects each item, a ``dict[str, T]`` — labels, resource lists — keeps
every key and projects each value, any other type is kept as sent).

:data:`PROJECTIONS` declares, once, the kinds whose informer caches hold projected objects,
keyed by ``(group, kind)``. Only kinds that are never written back whole from the cache are
listed: the HPA controller PUTs its cached HPA with a new status and the VPA and Cluster API
objects are few, so those caches keep whole objects (a projected object written back with PUT
would erase the fields it dropped) — except where no component that writes them runs: the
webhook alone requests VPAs and HPAs with only the fields it reads
(``InformerSet.reading(ADMISSION_READS)``, ``controllers/vpa/admission/admission_caches.py``).

:func:`project` also shares repeated strings (``sys.intern``: namespaces, label keys and
values, node names, owner kinds, field names) so 150,000 pods do not each hold their own copy
of ``"default"`` or ``"app.kubernetes.io/name"``; interned strings are released when no object
holds them any more. Values unique to an object (uid, resourceVersion, timestamps, IPs) and
long values are not interned. Annotations are kept except those declared unread
(:data:`UNREAD_ANNOTATIONS`).

The admission webhook is unaffected: it mutates the pod the admission request carries, whole.
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union, get_args, get_origin, get_type_hints, is_typeddict

from kubescale.objects.daemon_set import DaemonSet
from kubescale.objects.deployment import Deployment
from kubescale.objects.event import Event
from kubescale.objects.job import Job
from kubescale.objects.namespace import Namespace
from kubescale.objects.node import Node
from kubescale.objects.pdb import PodDisruptionBudget
from kubescale.objects.pod import Pod
from kubescale.objects.replica_set import ReplicaSet
from kubescale.objects.replication_controller import ReplicationController
from kubescale.objects.stateful_set import StatefulSet

__all__ = [
    "KEEP",
    "PROJECTIONS",
    "UNREAD_ANNOTATIONS",
    "Projection",
    "covers",
    "project",
    "projection_for",
    "projection_of",
    "widest",
]

UNREAD_ANNOTATIONS: frozenset[str] = frozenset(
    {
        # kubectl apply's copy of the whole object: large, and read by nothing here
        "kubectl.kubernetes.io/last-applied-configuration",
    }
)
"""Annotation keys dropped from projected objects (no reader looks at them)."""

NOT_INTERNED: frozenset[str] = frozenset(
    {
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
        "startTime",
        "startedAt",
        "finishedAt",
        "lastTransitionTime",
        "lastProbeTime",
        "lastHeartbeatTime",
        "firstTimestamp",
        "lastTimestamp",
        "eventTime",
        "lastObservedTime",
        "podIP",
        "message",
    }
)
"""Fields whose values are unique to an object: interning them would only grow the table."""

INTERN_MAX_LENGTH = 64
"""Longer strings are not interned (label values are at most 63 characters)."""


@dataclass(frozen=True, eq=False)
class Projection:
    """What to keep of one value: ``fields`` (a TypedDict: each kept field's own projection),
    ``items`` (a list: each item's), ``values`` (a ``dict[str, T]``: each value's), or nothing
    set: the value is kept as sent."""

    fields: dict[str, Projection] | None = None
    items: Projection | None = None
    values: Projection | None = None
    name: str = ""
    annotations: bool = False
    """This map is ``metadata.annotations``: :data:`UNREAD_ANNOTATIONS` are dropped."""


KEEP = Projection()
"""Keep the value as sent."""


def _unwrap_optional(hint: Any) -> Any:
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def projection_of(typed_dict: type) -> Projection:
    """The projection a TypedDict declares (module docstring)."""
    return _derive(typed_dict, {})


def _derive(hint: Any, seen: dict[Any, Projection]) -> Projection:
    hint = _unwrap_optional(hint)
    if is_typeddict(hint):
        known = seen.get(hint)
        if known is not None:
            return known
        fields: dict[str, Projection] = {}
        made = Projection(fields=fields, name=hint.__name__)
        seen[hint] = made
        for name, sub in get_type_hints(hint).items():
            child = _derive(sub, seen)
            if name == "annotations" and child.values is not None:
                child = Projection(values=child.values, name="annotations", annotations=True)
            fields[name] = child
        return made
    origin = get_origin(hint)
    if origin is list:
        (item,) = get_args(hint)
        sub = _derive(item, seen)
        return KEEP if sub is KEEP else Projection(items=sub)
    if origin is dict:
        _, value = get_args(hint)
        sub = _derive(value, seen)
        return Projection(values=sub)
    return KEEP


def project(value: Any, projection: Projection, *, key: str = "") -> Any:
    """A new value holding only what ``projection`` keeps of ``value`` (strings interned).

    What is kept, by the projection's kind: a string is interned unless its ``key`` is in
    :data:`NOT_INTERNED` or it is longer than :data:`INTERN_MAX_LENGTH`; ``fields``: a mapping
    keeps the declared fields, each projected (a non-mapping is kept as sent); ``items``: a list
    projects each item; ``values``: a mapping keeps every key (but :data:`UNREAD_ANNOTATIONS` of
    annotations), projecting each value; :data:`KEEP`: lists and dicts are copied, their strings
    interned, anything else kept as sent.

    The projection runs as a tree of closures compiled once per :class:`Projection`
    (:func:`_compiled`): the informers project every listed object, and interpreting the
    projection per value (a dataclass walk and ``isinstance(…, Mapping)`` per field) was most
    of a 50,000-pod sync's CPU (``bench/informer_sync.py``).
    """
    return _compiled(projection)(value, key)


_Projector = Callable[[Any, str], Any]
_Field = tuple[str, _Projector, bool]
"""A declared field: its name (interned), its projector, whether its string values are interned."""
_COMPILED: weakref.WeakKeyDictionary[Projection, _Projector] = weakref.WeakKeyDictionary()


def _leaf(value: str, key: str) -> str:
    if key not in NOT_INTERNED and len(value) <= INTERN_MAX_LENGTH:
        return sys.intern(value)
    return value


def _compiled(projection: Projection) -> _Projector:
    found = _COMPILED.get(projection)
    if found is None:
        found = _compile(projection, {})
    return found


def _compile(projection: Projection, building: dict[int, _Projector]) -> _Projector:
    """The projector of ``projection``; ``building``: those being compiled (a TypedDict that
    contains itself compiles to a projector that calls itself)."""
    if projection is KEEP or (
        projection.fields is None and projection.items is None and projection.values is None
    ):
        return _keep
    known = building.get(id(projection)) or _COMPILED.get(projection)
    if known is not None:
        return known
    if projection.fields is not None:
        children: dict[str, _Field] = {}
        run = _fields_projector(children)
        building[id(projection)] = run
        for name, sub in projection.fields.items():
            children[name] = (sys.intern(name), _compile(sub, building), name not in NOT_INTERNED)
    elif projection.items is not None:
        slot: list[_Projector] = []
        run = _items_projector(slot)
        building[id(projection)] = run
        slot.append(_compile(projection.items, building))
    else:
        assert projection.values is not None
        slot = []
        drop = UNREAD_ANNOTATIONS if projection.annotations else frozenset()
        run = _values_projector(slot, drop)
        building[id(projection)] = run
        slot.append(_compile(projection.values, building))
    _COMPILED[projection] = run
    return run


def _keep(value: Any, key: str) -> Any:
    kind = type(value)
    if kind is str:
        return _leaf(value, key)
    if kind is dict or (kind is not list and isinstance(value, dict)):
        intern = sys.intern
        return {intern(k): _keep(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_keep(item, key) for item in value]
    if isinstance(value, str):
        return _leaf(value, key)
    return value


def _fields_projector(children: dict[str, _Field]) -> _Projector:
    get = children.get
    intern = sys.intern
    longest = INTERN_MAX_LENGTH

    def run(value: Any, key: str) -> Any:
        if type(value) is not dict:
            if isinstance(value, str):
                return _leaf(value, key)
            if not isinstance(value, Mapping):
                return value
        out: dict[str, Any] = {}
        for name, sub in value.items():
            field = get(name)
            if field is None:
                continue
            kept_name, child, internable = field
            kind = type(sub)
            if kind is str:
                out[kept_name] = intern(sub) if internable and len(sub) <= longest else sub
            elif child is _keep and (sub is None or kind is int or kind is bool or kind is float):
                out[kept_name] = sub
            else:
                out[kept_name] = child(sub, name)
        return out

    return run


def _items_projector(slot: list[_Projector]) -> _Projector:
    def run(value: Any, key: str) -> Any:
        if isinstance(value, str):
            return _leaf(value, key)
        if not isinstance(value, list):
            return value
        item = slot[0]
        return [item(each, key) for each in value]

    return run


def _values_projector(slot: list[_Projector], drop: frozenset[str]) -> _Projector:
    intern = sys.intern

    def run(value: Any, key: str) -> Any:
        if type(value) is not dict:
            if isinstance(value, str):
                return _leaf(value, key)
            if not isinstance(value, Mapping):
                return value
        sub = slot[0]
        return {intern(name): sub(each, name) for name, each in value.items() if name not in drop}

    return run


PROJECTIONS: Mapping[tuple[str, str], Projection] = {
    ("", "Pod"): projection_of(Pod),
    ("", "Node"): projection_of(Node),
    ("", "Namespace"): projection_of(Namespace),
    ("", "Event"): projection_of(Event),
    ("", "ReplicationController"): projection_of(ReplicationController),
    ("apps", "ReplicaSet"): projection_of(ReplicaSet),
    ("apps", "Deployment"): projection_of(Deployment),
    ("apps", "StatefulSet"): projection_of(StatefulSet),
    ("apps", "DaemonSet"): projection_of(DaemonSet),
    ("batch", "Job"): projection_of(Job),
    ("policy", "PodDisruptionBudget"): projection_of(PodDisruptionBudget),
}
"""The kinds whose caches hold projected objects, by ``(group, kind)`` (module docstring)."""


def widest(first: Projection, second: Projection) -> Projection:
    """A projection keeping everything either keeps (two readers' declared reads of one kind)."""
    if first is second:
        return first
    if first.fields is not None and second.fields is not None:
        fields = dict(first.fields)
        for name, sub in second.fields.items():
            fields[name] = widest(fields[name], sub) if name in fields else sub
        return Projection(fields=fields, name=first.name or second.name)
    if first.items is not None and second.items is not None:
        return Projection(items=widest(first.items, second.items))
    if first.values is not None and second.values is not None:
        return Projection(
            values=widest(first.values, second.values),
            name=first.name,
            annotations=first.annotations and second.annotations,
        )
    return KEEP  # kept as sent by one of them, or declared differently: keep it whole


def covers(have: Projection | None, want: Projection | None) -> bool:
    """Whether a cache projected by ``have`` keeps everything ``want`` keeps (``None``: whole
    objects)."""
    if have is None or _keeps_all(have):
        return True
    if want is None or _keeps_all(want):
        return False
    if want.fields is not None:
        return have.fields is not None and all(
            name in have.fields and covers(have.fields[name], sub)
            for name, sub in want.fields.items()
        )
    if want.items is not None:
        return have.items is not None and covers(have.items, want.items)
    assert want.values is not None
    return (
        have.values is not None
        and covers(have.values, want.values)
        and (want.annotations or not have.annotations)
    )


def _keeps_all(projection: Projection) -> bool:
    return projection.fields is None and projection.items is None and projection.values is None


def projection_for(group: str, kind: str) -> Projection | None:
    """The declared projection of a kind; ``None``: its caches keep whole objects."""
    return PROJECTIONS.get((group, kind))
