"""The admission path's one memo: a pod's answer by the decision's complete inputs.

:func:`~kubescale.controllers.vpa.api.pod_admission.admit_pod` is pure — same inputs, same
answer — and the pods of one ReplicaSet ask it the same question (a scale-out of a thousand
pods asks it a thousand times). :class:`AdmissionMemo` remembers each answer, with the review
bytes it goes out in, under everything the answer depends on (:func:`decision_inputs`):

- the pod, as :func:`decision_pod` projects it: the parts ``admit_pod`` reads — containers and
  init containers (names, resources, order, an init container's ``restartPolicy``), the
  ``containerStatuses``' resources, ``spec.overhead``, whether the pod has an annotations map,
  its namespace. Not its name, labels or the rest of the spec: a StatefulSet's or indexed Job's
  per-pod labels would otherwise make every pod a miss. The decision is computed *from the
  projection*, so a hit and a miss can never differ (a property test compares with
  ``admit_pod`` on the full pod);
- the matched VPA's uid and resourceVersion (its spec, status and name are all it
  contributes; any change is a new resourceVersion);
- the namespace's LimitRanges (name, uid, resourceVersion each, in the order ``admit_pod``
  gets them): adding, changing or deleting one changes the inputs;
- with ``--avoid-hpa-conflict``, the HPAs scaling the VPA's target (name, uid,
  resourceVersion); with ``--cap-to-largest-node``, the largest Ready node's allocatable
  (exact values and formats);
- the flags that change the answer (``--avoid-hpa-conflict``, ``--cap-to-largest-node``, the
  ``CPUStartupBoost`` gate's settings).

Which VPA a pod gets (the top-most controller, then the VPA among those targeting it) is an
input too. kube-apiserver sends every pod of a ReplicaSet as the same AdmissionReview bytes but
``request.uid``, so the memo also answers a *question* — the body without its uid — without
reading it: such an entry (:class:`Answered`) keeps the match it was made with (every
controller object read, the VPAs indexed under the controller) and the decision's inputs, and
is served only while the match's objects are still the informers' objects (an informer
replaces an object on every change; a controller that changed only in what no match reads —
the status the ReplicaSet controller writes during a scale-out — keeps it: :func:`match_fields`)
and the inputs read anew from the informers equal the remembered ones — the VPA is one of the
match's objects, so only the LimitRanges (and, behind their flags, the HPAs and the largest
node) are read again
(:meth:`~kubescale.controllers.vpa.admission.cached_pod_admission.CachedPodAdmission.current`).
Both kinds of entry are versions checked on use: the first request after an informer applies a
change is answered anew, whatever the order of events.

Deleted and changed objects release their entries: the informers' event handlers
(:meth:`~kubescale.controllers.vpa.admission.admission_caches.AdmissionCaches.on_input_change`)
drop what was made with a VPA that changed or went away (:meth:`AdmissionMemo.forget_vpa`), in
a namespace whose LimitRanges or HPAs changed or that was deleted
(:meth:`AdmissionMemo.forget_namespace`), and everything when the nodes change
(:meth:`AdmissionMemo.clear`).

One store, bounded as every webhook cache is: by count, by bytes (the keys and values come from
request bodies, and one entry can be a thousand times another: issue 27, item 14 — each entry
is stored with an estimate of the bytes it holds, the least recently used go first, and an
entry costing more than the whole budget is not stored) and by age (an entry older than
``max_age`` is computed again).
"""

from __future__ import annotations

import base64
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, cast

import orjson

from kubescale.controllers.vpa.api.controller_refs import ControllerRef
from kubescale.controllers.vpa.api.limit_range_fit import LimitRangeConflict
from kubescale.controllers.vpa.api.pod_admission import admit_pod
from kubescale.controllers.vpa.api.startup_boost import StartupBoostSettings
from kubescale.kube.resources import CRON_JOBS
from kubescale.objects.admission_review import JsonPatchOperation
from kubescale.objects.hpa import HorizontalPodAutoscaler
from kubescale.objects.limit_range import LimitRange
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity
from kubescale.objects.views import Meta, raw_metadata, raw_spec, raw_status
from kubescale.objects.vpa import VerticalPodAutoscaler

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_ENTRIES",
    "MAX_QUESTION_BYTES",
    "AdmissionMemo",
    "Answered",
    "Decided",
    "Match",
    "OwnerRead",
    "admit_cached",
    "allocatable_key",
    "decision_inputs",
    "decision_pod",
    "encode_patch",
    "match_fields",
    "match_unchanged",
    "object_version",
    "object_versions",
]

DEFAULT_MAX_ENTRIES: Final = 8192
"""Entries: a decision per pod shape and VPA version, an answer per question (one per
ReplicaSet, StatefulSet, Job ... that creates pods). The three caches this memo replaced held
4,096 decisions, 4,096 matches and 1,024 answers."""
DEFAULT_MAX_BYTES: Final = 24 * 1024 * 1024
"""The entries' summed cost. A decision counts its pod's text, its patch twice and its answer's
bytes; an answer its question only (its decision's bytes are counted once, with the decision).
The three caches it replaced had 8 + 4 + 8 MiB, but an answer there held its patch uncounted: a
thousand ReplicaSets of 10-container pods (``bench/webhook_latency.py``) need about 22 MB
counted here (19.4 KB a decision: 1,024 + 1,178 of pod text + 3 × 5.7 KB of patch; 3 KB an
answer), and an answer whose decision is evicted goes with it."""
DEFAULT_MAX_AGE: Final = 3600.0
"""Seconds after which an entry is computed again even though nothing it depends on changed."""
MAX_QUESTION_BYTES: Final = 32 * 1024
"""Larger bodies are not remembered as questions (their decision still is)."""
ENTRY_OVERHEAD: Final = 1024
"""Bytes counted per entry for its fixed objects (key tuple, versions, the decision, indexes)."""

_CONTAINER_FIELDS: Final = ("name", "resources")
_INIT_CONTAINER_FIELDS: Final = ("name", "resources", "restartPolicy")
_STATUS_FIELDS: Final = ("name", "resources")

OwnerRead = tuple[str, str, str, str, Mapping[str, object]]
"""``(apiVersion, kind, namespace, name, object)``: one informer read of a match (a controller
of any kind)."""
Lookup = Callable[[str, str, str, str], Mapping[str, object] | None]
AnswerTemplate = Callable[[str], tuple[bytes, bytes]]
"""The review answering a pod with an encoded patch, as its bytes before and after the uid's
JSON string (the webhook's; the autoscaler needs none)."""


# -- the inputs -----------------------------------------------------------------------------


def _project_list(value: object, fields: Sequence[str]) -> object:
    """A list of objects reduced to ``fields``; anything else (a wrong type) kept as it is."""
    if not isinstance(value, list):
        return value
    return [
        {name: item[name] for name in fields if name in item} if isinstance(item, dict) else item
        for item in value
    ]


def decision_pod(pod: Pod) -> Pod:
    """The parts of ``pod`` :func:`admit_pod` reads, as a pod (see the module docstring).

    Present keys stay present and absent ones absent (``null`` and absent read alike today, but
    the projection does not rely on it); a field of the wrong type is kept as it is, so the
    decision sees the same malformation. Annotations are reduced to "there is a map" because
    only that is read (whether the patch must create ``/metadata/annotations``).
    """
    # Built from the fields as sent (kept malformed), so typed as a Pod once, at the return.
    projected: dict[str, object] = {}
    metadata = raw_metadata(pod)
    if isinstance(metadata, dict):
        meta: dict[str, object] = {}
        if "namespace" in metadata:
            meta["namespace"] = metadata["namespace"]
        if "annotations" in metadata:
            annotations = metadata["annotations"]
            meta["annotations"] = {} if isinstance(annotations, dict) else annotations
        projected["metadata"] = meta
    elif "metadata" in pod:
        projected["metadata"] = metadata
    spec = raw_spec(pod)
    if isinstance(spec, dict):
        spec_out: dict[str, object] = {}
        if "containers" in spec:
            spec_out["containers"] = _project_list(spec["containers"], _CONTAINER_FIELDS)
        if "initContainers" in spec:
            spec_out["initContainers"] = _project_list(
                spec["initContainers"], _INIT_CONTAINER_FIELDS
            )
        if "overhead" in spec:
            spec_out["overhead"] = spec["overhead"]
        projected["spec"] = spec_out
    elif "spec" in pod:
        projected["spec"] = spec
    status = raw_status(pod)
    if isinstance(status, dict):
        status_out: dict[str, object] = {}
        for name in ("containerStatuses", "initContainerStatuses"):
            if name in status:
                status_out[name] = _project_list(status[name], _STATUS_FIELDS)
        projected["status"] = status_out
    elif "status" in pod:
        projected["status"] = status
    return cast(Pod, projected)


def pod_text(projected: Pod) -> bytes | str:
    """The projection as JSON text: an exact, hashable key (key order included, so two pods
    that differ only in key order are two entries, never one wrong one)."""
    try:
        return orjson.dumps(projected)
    except TypeError:  # an integer beyond 64 bits: the standard library writes any int
        return repr(projected)


def object_version(obj: Mapping[str, object]) -> tuple[str, str, str] | None:
    """``(name, uid, resourceVersion)`` of an informer object; ``None`` without a
    resourceVersion (such an object cannot be keyed: its decision is not remembered)."""
    view = Meta(obj)
    version = view.resource_version
    if not version:
        return None
    return (view.name, view.uid, version)


def object_versions(
    objects: Sequence[Mapping[str, object]],
) -> tuple[tuple[str, str, str], ...] | None:
    """:func:`object_version` of each object; ``None`` when one has none."""
    versions = []
    for obj in objects:
        version = object_version(obj)
        if version is None:
            return None
        versions.append(version)
    return tuple(versions)


def allocatable_key(
    allocatable: Mapping[str, Quantity] | None,
) -> tuple[tuple[str, int, str], ...] | None:
    if allocatable is None:
        return None
    return tuple(sorted((name, q.nanos, q.format) for name, q in allocatable.items()))


def decision_inputs(
    *,
    pod: bytes | str,
    namespace: str,
    vpa: VerticalPodAutoscaler,
    limit_ranges: Sequence[LimitRange],
    hpas: Sequence[HorizontalPodAutoscaler],
    avoid_hpa_conflict: bool,
    largest_node_allocatable: Mapping[str, Quantity] | None,
    cap_to_largest_node: bool,
    startup_boost: StartupBoostSettings | None = None,
) -> tuple[Hashable, ...] | None:
    """Everything ``admit_pod``'s answer depends on (module docstring), as a key; ``None`` when
    an input carries no resourceVersion (then the decision is computed every time).

    ``pod`` is the projection's text (:func:`pod_text` of :func:`decision_pod`); ``namespace``
    the one whose LimitRanges were read. The HPAs count only with ``avoid_hpa_conflict`` and
    the node only with ``cap_to_largest_node``, as ``admit_pod`` reads them.
    """
    vpa_version = object_version(vpa)
    limit_range_versions = object_versions(limit_ranges)
    hpa_versions = object_versions(hpas) if avoid_hpa_conflict else ()
    if vpa_version is None or limit_range_versions is None or hpa_versions is None:
        return None
    return (
        pod,
        namespace,
        vpa_version,
        limit_range_versions,
        hpa_versions,
        allocatable_key(largest_node_allocatable) if cap_to_largest_node else None,
        avoid_hpa_conflict,
        cap_to_largest_node,
        startup_boost,
    )


def match_fields(kind: str, obj: Mapping[str, object]) -> tuple[object, ...]:
    """What a match reads of a controller object of ``kind``: its uid, its owner references
    (the walk up) and where its selector comes from (``spec.selector``; a CronJob's job
    template labels — read of a CronJob only, as ``well_known_selector`` does: other kinds
    have no such field, and their projected caches do not keep one)."""
    metadata = raw_metadata(obj)
    spec = raw_spec(obj)
    meta = metadata if isinstance(metadata, Mapping) else {}
    body = spec if isinstance(spec, Mapping) else {}
    return (
        metadata if not isinstance(metadata, Mapping) else None,
        spec if not isinstance(spec, Mapping) else None,
        meta.get("uid"),
        meta.get("ownerReferences"),
        body.get("selector"),
        body.get("jobTemplate") if kind == CRON_JOBS.kind else None,
    )


# -- the entries ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decided:
    """``admit_pod``'s answer for one set of inputs, shared by every request that gets it."""

    patches: tuple[JsonPatchOperation, ...]
    """The JSON patch operations (raw JSON; callers must not modify them)."""
    encoded_patch: str
    """The patch as the review carries it (base64 of the compact JSON); ``""`` without one."""
    skipped_resources: frozenset[str]
    limit_range_conflicts: tuple[LimitRangeConflict, ...]
    head: bytes
    """The answer's bytes up to its uid's JSON string (``b""`` without a template)."""
    tail: bytes
    """The answer's bytes after its uid's JSON string."""


@dataclass(frozen=True, slots=True)
class Match:
    """Which VPA a pod gets, and what that was read from."""

    controller: ControllerRef | None
    vpa: VerticalPodAutoscaler | None
    reads: tuple[OwnerRead, ...]
    """Every controller object read, in order."""
    vpas: tuple[VerticalPodAutoscaler, ...]
    """The VPAs indexed under ``controller`` when the match was made."""


@dataclass(frozen=True, slots=True)
class Answered:
    """A question's answer: the decision, its inputs and the match they were found with."""

    decided: Decided
    inputs: tuple[Hashable, ...] | None
    """The decision's inputs (:func:`decision_inputs`); ``None`` when no VPA matched."""
    match: Match
    limit_ranges: Sequence[LimitRange] = ()
    """The LimitRanges as read for the decision (the list the admission caches gave: while
    they give the same list, its versions are the same)."""
    target: ControllerRef | None = None
    """The VPA's ``targetRef`` as read for the decision: the HPAs on it are looked up by it.
    While the match holds, the VPA is the informers' same object, so its target is this one
    (kept here so that an answered pod does not parse the VPA's spec again)."""

    def body(self, uid: bytes) -> bytes:
        """The answer to a request whose uid is ``uid`` (plain printable ASCII, as sent)."""
        return self.decided.head + b'"' + uid + b'"' + self.decided.tail


def match_unchanged(
    match: Match,
    *,
    lookup: Lookup,
    vpas_for: Callable[[ControllerRef], Sequence[VerticalPodAutoscaler]],
) -> bool:
    """Whether every object ``match`` read is still what the informers hold (``lookup`` reads
    the controllers' informers, ``vpas_for`` the VPA index): the same object, or one that
    differs from it only in what no match reads; and the same VPAs, in the same order."""
    for api_version, kind, namespace, name, obj in match.reads:
        found = lookup(api_version, kind, namespace, name)
        if found is obj:
            continue
        if found is None or match_fields(kind, found) != match_fields(kind, obj):
            return False
    if match.controller is None:
        return True
    current = vpas_for(match.controller)
    if len(current) != len(match.vpas):
        return False
    return all(a is b for a, b in zip(current, match.vpas, strict=True))


def encode_patch(patches: Sequence[Mapping[str, object]]) -> str:
    """The review's ``patch``: base64 of the compact JSON (``""`` for no patch)."""
    if not patches:
        return ""
    encoded = json.dumps(list(patches), separators=(",", ":")).encode()
    return base64.b64encode(encoded).decode("ascii")


def _no_template(_encoded_patch: str) -> tuple[bytes, bytes]:
    return b"", b""


# -- the memo -------------------------------------------------------------------------------


class AdmissionMemo:
    """Decisions by their complete inputs and answers by their question, in one store bounded
    by count, bytes and age (module docstring); an input listener of the admission caches."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_age: float = DEFAULT_MAX_AGE,
        now: Callable[[], float] = time.monotonic,
        answer_template: AnswerTemplate = _no_template,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_age = max_age
        self._now = now
        self.answer_template = answer_template
        self.no_patch = self.decided(())
        """The decision of a pod no VPA controls."""
        self._entries: OrderedDict[Hashable, tuple[Decided | Answered, float, int]]
        self._entries = OrderedDict()
        self._made_with: dict[Hashable, tuple[str, str]] = {}
        """``(vpa_uid, namespace)`` of each entry."""
        self._answers_of: dict[Hashable, set[Hashable]] = {}
        """The questions answered with each decision (by its inputs)."""
        self._by_vpa: dict[str, set[Hashable]] = {}
        self._by_namespace: dict[str, set[Hashable]] = {}
        self.bytes = 0
        """The summed cost of the entries held."""
        self.hits = 0
        """Decisions found by their inputs."""
        self.misses = 0
        self.answer_hits = 0
        """Answers found by their question."""
        self.answer_misses = 0
        self.dropped = 0
        """Decisions dropped because an input changed or went away (not the LRU or age)."""
        self.answers_dropped = 0
        """Answers dropped so."""

    def __len__(self) -> int:
        return len(self._entries)

    def namespaces(self) -> set[str]:
        """The namespaces entries here were made in."""
        return set(self._by_namespace)

    def answers(self) -> int:
        """How many answers are held (the other entries are decisions)."""
        return sum(isinstance(value, Answered) for value, _, _ in self._entries.values())

    def decided(
        self,
        patches: tuple[JsonPatchOperation, ...],
        *,
        skipped_resources: frozenset[str] = frozenset(),
        limit_range_conflicts: tuple[LimitRangeConflict, ...] = (),
    ) -> Decided:
        """A decision with its answer's bytes."""
        encoded = encode_patch(patches)
        head, tail = self.answer_template(encoded)
        return Decided(
            patches=patches,
            encoded_patch=encoded,
            skipped_resources=skipped_resources,
            limit_range_conflicts=limit_range_conflicts,
            head=head,
            tail=tail,
        )

    # -- decisions by inputs, answers by question -------------------------------------------

    def decision(self, inputs: Hashable) -> Decided | None:
        """The decision made with ``inputs``, if remembered."""
        found = self._get(inputs)
        if isinstance(found, Decided):
            self.hits += 1
            return found
        self.misses += 1
        return None

    def remember_decision(
        self, inputs: tuple[Hashable, ...], decided: Decided, *, vpa_uid: str, namespace: str
    ) -> None:
        text = inputs[0] if inputs else b""
        size = len(text) if isinstance(text, bytes | str) else 0
        # the pod's text in the key, the patch twice (encoded, and the objects it was encoded
        # from) and the answer's bytes (the encoded patch once more)
        cost = ENTRY_OVERHEAD + size + 2 * len(decided.encoded_patch)
        cost += len(decided.head) + len(decided.tail)
        self._store(inputs, decided, cost, vpa_uid=vpa_uid, namespace=namespace)

    def answer(self, question: bytes, current: Callable[[Answered], bool]) -> Answered | None:
        """The answer to ``question`` (a body without its uid), if remembered and
        ``current`` (its match and inputs are still the informers')."""
        found = self._get(question)
        if isinstance(found, Answered):
            # its decision is used too (kept, and too old: both go)
            if (found.inputs is None or self._get(found.inputs) is not None) and current(found):
                self.answer_hits += 1
                return found
            self._remove(question)
        self.answer_misses += 1
        return None

    def remember_answer(self, question: bytes, answered: Answered, *, namespace: str) -> None:
        """Keep ``answered`` under ``question``, on its decision: the answer costs its question,
        the decision's bytes are counted once, with the decision, and an answer goes with its
        decision (an answer whose decision is not kept is not kept either)."""
        inputs = answered.inputs
        if len(question) > MAX_QUESTION_BYTES or (
            inputs is not None and inputs not in self._entries
        ):
            return
        vpa = answered.match.vpa
        uid = Meta(vpa).uid if vpa is not None else None
        cost = ENTRY_OVERHEAD + len(question)
        if not self._store(question, answered, cost, vpa_uid=str(uid or ""), namespace=namespace):
            return
        if inputs is None:
            return
        if inputs in self._entries:
            self._answers_of.setdefault(inputs, set()).add(question)
        else:  # the decision went to make room for it
            self._remove(question)

    # -- invalidation, from the informers' event handlers -----------------------------------

    def forget_vpa(self, uid: str) -> None:
        """A VPA changed or went away: drop every entry made with it."""
        for key in list(self._by_vpa.get(uid, ())):
            self._drop(key)

    def forget_namespace(self, namespace: str) -> None:
        """A LimitRange or HPA of ``namespace`` changed, or the namespace was deleted."""
        for key in list(self._by_namespace.get(namespace, ())):
            self._drop(key)

    def clear(self) -> None:
        """Something every entry may depend on changed (the largest node)."""
        for key in list(self._entries):
            self._drop(key)
        self._entries.clear()
        self._answers_of.clear()
        self._made_with.clear()
        self._by_vpa.clear()
        self._by_namespace.clear()
        self.bytes = 0

    def _drop(self, key: Hashable) -> None:
        self._remove(key, dropped=True)

    # -- the store --------------------------------------------------------------------------

    def _get(self, key: Hashable) -> Decided | Answered | None:
        stored = self._entries.get(key)
        if stored is None:
            return None
        value, stored_at, _ = stored
        if self._now() - stored_at >= self.max_age:
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return value

    def _store(
        self, key: Hashable, value: Decided | Answered, cost: int, *, vpa_uid: str, namespace: str
    ) -> bool:
        """Keep ``value``, costing ``cost`` bytes, under ``key`` (the least recently used go
        past ``max_entries`` or ``max_bytes``); whether it is kept."""
        if key in self._entries:
            self._remove(key)
        if self.max_entries <= 0 or cost > self.max_bytes:
            return False
        self._entries[key] = (value, self._now(), cost)
        self.bytes += cost
        self._made_with[key] = (vpa_uid, namespace)
        self._by_vpa.setdefault(vpa_uid, set()).add(key)
        self._by_namespace.setdefault(namespace, set()).add(key)
        while len(self._entries) > self.max_entries or self.bytes > self.max_bytes:
            self._remove(next(iter(self._entries)))
        return True

    def _remove(self, key: Hashable, *, dropped: bool = False) -> None:
        """Remove the entry under ``key`` and, for a decision, the answers on it (``dropped``:
        because an input changed or went away)."""
        stored = self._entries.pop(key, None)
        if stored is None:
            return
        value = stored[0]
        self.bytes -= stored[2]
        if isinstance(value, Answered):
            self.answers_dropped += dropped
            if value.inputs is not None:
                on_decision = self._answers_of.get(value.inputs)
                if on_decision is not None:
                    on_decision.discard(key)
                    if not on_decision:
                        del self._answers_of[value.inputs]
        else:
            self.dropped += dropped
            for question in self._answers_of.pop(key, ()):
                self._remove(question, dropped=dropped)
        made_with = self._made_with.pop(key, None)
        if made_with is None:
            return
        for index, name in zip((self._by_vpa, self._by_namespace), made_with, strict=True):
            keys = index.get(name)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[name]


def admit_cached(
    memo: AdmissionMemo,
    *,
    pod: Pod,
    namespace: str,
    vpa: VerticalPodAutoscaler,
    limit_ranges: Sequence[LimitRange],
    hpas: Sequence[HorizontalPodAutoscaler],
    avoid_hpa_conflict: bool,
    largest_node_allocatable: Mapping[str, Quantity] | None,
    cap_to_largest_node: bool,
    startup_boost: StartupBoostSettings | None = None,
) -> tuple[Decided, tuple[Hashable, ...] | None]:
    """``admit_pod``'s answer for ``pod`` (its namespace set) from ``memo``, computed and
    remembered on a miss, and the inputs it is remembered under (``None``: not remembered);
    raises ``PodAdmissionError`` as ``admit_pod`` does (an invalid pod is never remembered:
    computing it again is what the path without a memo does).

    ``largest_node_allocatable`` is read only with ``cap_to_largest_node`` and ``hpas`` only
    with ``avoid_hpa_conflict``, as ``admit_pod`` does.
    """
    projected = decision_pod(pod)
    largest = largest_node_allocatable if cap_to_largest_node else None
    inputs = decision_inputs(
        pod=pod_text(projected),
        namespace=namespace,
        vpa=vpa,
        limit_ranges=limit_ranges,
        hpas=hpas,
        avoid_hpa_conflict=avoid_hpa_conflict,
        largest_node_allocatable=largest,
        cap_to_largest_node=cap_to_largest_node,
        startup_boost=startup_boost,
    )
    if inputs is not None:
        known = memo.decision(inputs)
        if known is not None:
            return known, inputs
    result = admit_pod(
        pod=projected,
        vpa=vpa,
        limit_ranges=limit_ranges,
        hpas=hpas,
        avoid_hpa_conflict=avoid_hpa_conflict,
        largest_node_allocatable=largest,
        startup_boost=startup_boost,
    )
    decided = memo.decided(
        tuple(result.patches),
        skipped_resources=result.skipped_resources,
        limit_range_conflicts=result.limit_range_conflicts,
    )
    if inputs is not None:
        uid = Meta(vpa).uid
        memo.remember_decision(inputs, decided, vpa_uid=str(uid or ""), namespace=namespace)
    return decided, inputs
