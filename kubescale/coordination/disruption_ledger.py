"""Disruptions this process made that the cluster has not shown yet: evictions and in-place
resizes, remembered per pod uid until the pod's informer shows their effect.

Why. A write whose outcome is unknown — no answer (a timeout, a broken connection), or a 5xx —
may have happened: kube-apiserver answers ``504 Timeout`` when its request deadline passes after
etcd has committed the write, and a ``500`` can come after the commit too. A controller that
budgets disruptions (the VPA updater's eviction tolerance; the descheduler's and the cluster
autoscaler's limits, which also evict) and believed such an eviction failed would evict again
what is already going: with every eviction answered ``500`` after the commit, the updater took 6
of 6 pods against a budget of 3. And a write that did succeed is not in the informer's cache
until its watch event arrives, so the next loop may see the pod as it was.

The rule — Kubernetes' own for its controllers ("expectations", ``pkg/controller/
controller_utils.go``: a controller expects the pods it deleted to disappear and counts them as
gone until its informer observes it, for at most ``ExpectationsTimeout`` = 5 minutes):

* :func:`evict_pod` and :func:`resize_pod` make the write through the access layer and
  :meth:`DisruptionLedger.record` it when it was done (a success) or may have been (outcome
  unknown, :func:`write_outcome`); a refusal (4xx: nothing happened) is not recorded. A
  :class:`WriteResult` tells the caller which, and whether its budget must count the write
  (:attr:`WriteResult.counts`).
* :meth:`DisruptionLedger.pending` answers, for a pod as the caller's informer shows it, the
  disruption recorded for that pod's **uid** whose effect the pod does not show yet — an
  eviction until the pod is being deleted (``deletionTimestamp``) or gone, a resize until the
  pod's spec carries the requested resources. A pod recreated under the same name (a
  StatefulSet's) has a new uid and is a new pod. The budget counts a pending disruption as done.
* Bounded by age and size: an entry older than ``max_age`` (5 minutes, as the expectations) is
  dropped — the write did not happen after all, and the pod counts as live again; at most
  ``max_entries`` are kept, the oldest dropped first. :meth:`DisruptionLedger.attach` drops an
  entry as soon as a pod informer delivers the pod's deletion or an update showing the effect.
* :meth:`DisruptionLedger.recent` remembers longer what was done, shown or not: every
  disruption recorded within ``history_age`` (1 hour), with the node the pod ran on and its
  controller — so that one system can tell a move another just made (``--coordination
  one-brain``: the cluster autoscaler does not remove, in the next loops, a node that just
  received pods the descheduler moved). Bounded by ``history_age`` and ``max_entries`` too.

One ledger per process (:attr:`kubescale.coordination.brain.Brain.ledger`), so a
disruption one system made is counted by every other that budgets the same pods.
"""

from __future__ import annotations

import copy
import enum
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final, Literal

from kubescale.base.logs import component_logger
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.informer import EventHandlers, Informer
from kubescale.kube.resources import PODS
from kubescale.objects.pod import Pod
from kubescale.objects.quantities import Quantity, QuantityError
from kubescale.objects.views import mapping, meta, raw_spec, spec_of

__all__ = [
    "HISTORY_MAX_AGE",
    "MAX_AGE",
    "MAX_ENTRIES",
    "ContainerResources",
    "Disruption",
    "DisruptionKind",
    "DisruptionLedger",
    "WriteOutcome",
    "WriteResult",
    "evict_pod",
    "resize_applied",
    "resize_pod",
    "resize_targets",
    "write_outcome",
]

log = component_logger("kube.disruptions")

MAX_AGE: Final = timedelta(minutes=5)
"""How long an unobserved disruption is believed (``controller.ExpectationsTimeout``)."""
MAX_ENTRIES: Final = 10_000
HISTORY_MAX_AGE: Final = timedelta(hours=1)
"""How long :meth:`DisruptionLedger.recent` remembers a disruption, shown or not."""

ContainerResources = Mapping[str, Mapping[str, Mapping[str, str]]]
"""Container name → ``{"requests": {resource: quantity}, "limits": {...}}``."""

_RESOURCE_KINDS: Final[tuple[Literal["requests"], Literal["limits"]]] = ("requests", "limits")


class DisruptionKind(enum.Enum):
    EVICTION = "eviction"
    RESIZE = "resize"


class WriteOutcome(enum.Enum):
    """What the answer to a write says happened."""

    DONE = "done"
    """The API server answered success."""
    UNKNOWN = "unknown"
    """No answer, or a 5xx: the write may have been committed."""
    GONE = "gone"
    """404, or a uid precondition that failed (409): the pod is not there (any more)."""
    REFUSED = "refused"
    """Any other 4xx (a PodDisruptionBudget's 429, 403, 422 ...): nothing happened."""


def write_outcome(error: KubeError) -> WriteOutcome:
    """How a failed write counts: 5xx and no answer at all are :attr:`WriteOutcome.UNKNOWN`,
    404 is :attr:`WriteOutcome.GONE`, any other answer a refusal.

    A refusal that answers a write the transport sent again after an attempt that got no
    answer or a 5xx (:attr:`KubeError.unanswered_attempts`) is :attr:`WriteOutcome.UNKNOWN`:
    the answer is the retry's, and the first attempt may have committed — an eviction's retry
    meets ``429`` when the first spent the PodDisruptionBudget's allowance, which a caller must
    not take for "nothing happened". A ``404`` stays :attr:`WriteOutcome.GONE` (the pod is
    not there, whoever removed it); :attr:`WriteResult.maybe_ours` tells whether it may have
    been this write."""
    if not isinstance(error, KubeApiError):
        return WriteOutcome.UNKNOWN  # KubeTransportError: the request may have been served
    if error.code >= 500:
        return WriteOutcome.UNKNOWN
    if error.not_found:
        return WriteOutcome.GONE
    if error.unanswered_attempts:
        return WriteOutcome.UNKNOWN
    return WriteOutcome.REFUSED


@dataclass(frozen=True)
class WriteResult:
    """The outcome of :func:`evict_pod` / :func:`resize_pod` and the error, if any."""

    outcome: WriteOutcome
    error: KubeError | None = None

    @property
    def maybe_ours(self) -> bool:
        """Whether the write may have been done by this call: it was (``DONE``), or its outcome
        is unknown, or the pod is ``GONE`` after an attempt of this call that got no answer or
        a 5xx (the retry's 404 then likely answers the first attempt's own eviction). A limit
        on writes made counts these; a ``GONE`` the first attempt met is someone else's."""
        if self.outcome in (WriteOutcome.DONE, WriteOutcome.UNKNOWN):
            return True
        return (
            self.outcome is WriteOutcome.GONE
            and self.error is not None
            and self.error.unanswered_attempts > 0
        )

    @property
    def counts(self) -> bool:
        """Whether a disruption budget must count the write as done: it was, it may have
        been, or the pod is not there any more — everything but a refusal."""
        return self.outcome is not WriteOutcome.REFUSED


@dataclass(frozen=True, kw_only=True)
class Disruption:
    """One eviction or resize of one pod (by uid), recorded at ``recorded_at``."""

    kind: DisruptionKind
    uid: str
    namespace: str
    name: str
    recorded_at: datetime
    confirmed: bool
    """The API server answered success (else the outcome is unknown)."""
    resources: ContainerResources = field(default_factory=dict)
    """For a resize: what it asked of each container (:func:`resize_targets`)."""
    actor: str = ""
    """The system that made it (``vpa-updater``, ``cluster-autoscaler``, ``descheduler``)."""
    node: str = ""
    """The node the pod was bound to (``spec.nodeName``) when it was disrupted."""
    owner_kind: str = ""
    owner_name: str = ""
    """The pod's controller (ownerReference with ``controller: true``), if any: its
    replacement is the controller's next pod."""

    def shown_by(self, pod: Pod) -> bool:
        """Whether ``pod`` (the same uid, as an informer shows it) shows the effect."""
        if meta(pod).deleting:
            return True  # evicted, or going anyway: a resize no longer matters
        if self.kind is DisruptionKind.EVICTION:
            return False
        return resize_applied(pod, self.resources)


class DisruptionLedger:
    """Disruptions not yet shown by the cluster, per pod uid (see the module docstring)."""

    def __init__(
        self,
        *,
        max_age: timedelta = MAX_AGE,
        max_entries: int = MAX_ENTRIES,
        shared: bool = True,
        history_age: timedelta = HISTORY_MAX_AGE,
    ) -> None:
        if max_entries < 1 or max_age <= timedelta(0) or history_age <= timedelta(0):
            raise ValueError("max_entries, max_age and history_age must be positive")
        self.shared = shared
        """``--coordination one-brain``: every system counts every system's disruptions; else
        (``separate``, upstream's separate programs) a system asking with its ``actor`` name
        sees only its own."""
        self.max_age = max_age
        self.max_entries = max_entries
        self._entries: dict[str, Disruption] = {}
        """By uid, oldest first."""
        self._attached: set[int] = set()
        self.history_age = history_age
        self._history: deque[Disruption] = deque(maxlen=max_entries)
        """Every disruption recorded, oldest first, within ``history_age``."""

    def __len__(self) -> int:
        return len(self._entries)

    def detached(self) -> DisruptionLedger:
        """A detached copy (attached to no informer) of the entries and history now: what a
        decision on a worker thread reads — and tidies, since reads expire entries — while the
        loop's thread goes on writing this one (:mod:`kubescale.runtime.off_loop`)."""
        twin = DisruptionLedger(
            max_age=self.max_age,
            max_entries=self.max_entries,
            shared=self.shared,
            history_age=self.history_age,
        )
        twin._entries = dict(self._entries)
        twin._history = deque(self._history, maxlen=self.max_entries)
        return twin

    def record(self, disruption: Disruption) -> None:
        """Remember ``disruption`` (replacing an older one of the same pod)."""
        if not disruption.uid:
            return  # a pod without a uid cannot be matched again; nothing to remember
        self._entries.pop(disruption.uid, None)
        self._entries[disruption.uid] = disruption
        self._history.append(disruption)
        self._expire(disruption.recorded_at)
        while len(self._entries) > self.max_entries:
            dropped = self._entries.pop(next(iter(self._entries)))
            log.warning(
                "disruption ledger full: forgetting the oldest entry",
                extra={"fields": {"pod": f"{dropped.namespace}/{dropped.name}"}},
            )

    def pending(self, pod: Pod, *, now: datetime, actor: str | None = None) -> Disruption | None:
        """The disruption of this pod (by uid) that ``pod`` does not show yet, if any; asked
        by ``actor`` in a ledger that is not :attr:`shared`, only that actor's own."""
        uid = meta(pod).uid
        entry = self._entries.get(uid) if uid else None
        if entry is None:
            return None
        if now - entry.recorded_at >= self.max_age or entry.shown_by(pod):
            del self._entries[uid]
            return None
        if not self.visible_to(entry, actor):
            return None
        return entry

    def visible_to(self, entry: Disruption, actor: str | None) -> bool:
        """Whether ``actor`` counts ``entry``: always in a shared ledger, else its own only."""
        return self.shared or actor is None or entry.actor == actor

    def in_flight(self, *, now: datetime, actor: str | None = None) -> list[Disruption]:
        """Every disruption not yet shown (and not expired) that ``actor`` counts."""
        self._expire(now)
        return [entry for entry in self._entries.values() if self.visible_to(entry, actor)]

    def recent(
        self, *, now: datetime, within: timedelta, actor: str | None = None
    ) -> list[Disruption]:
        """The disruptions recorded in the last ``within`` (at most ``history_age``), shown by
        the cluster or not, oldest first; only ``actor``'s if given. Unlike :meth:`in_flight`
        this does not depend on :attr:`shared`: it tells what a named system did."""
        self._expire(now)
        horizon = now - min(within, self.history_age)
        return [
            entry
            for entry in self._history
            if entry.recorded_at > horizon and (actor is None or entry.actor == actor)
        ]

    def forget(self, uid: str) -> None:
        self._entries.pop(uid, None)

    def attach(self, informer: Informer[Pod]) -> None:
        """Drop entries as ``informer`` (of pods) delivers their deletion or their effect."""
        if id(informer) in self._attached:
            return
        self._attached.add(id(informer))
        informer.add_handlers(EventHandlers(on_update=self._on_update, on_delete=self._on_delete))

    def _on_update(self, _old: Pod, new: Pod) -> None:
        uid = meta(new).uid
        entry = self._entries.get(uid) if uid else None
        if entry is not None and entry.shown_by(new):
            del self._entries[uid]

    def _on_delete(self, pod: Pod) -> None:
        self.forget(meta(pod).uid)

    def _expire(self, now: datetime) -> None:
        while self._history and now - self._history[0].recorded_at >= self.history_age:
            self._history.popleft()
        while self._entries:
            uid, oldest = next(iter(self._entries.items()))
            if now - oldest.recorded_at < self.max_age:
                return
            del self._entries[uid]


# -- the writes ------------------------------------------------------------------------------


async def evict_pod(
    client: KubeClient,
    ledger: DisruptionLedger,
    pod: Pod,
    *,
    now: datetime,
    grace_period_seconds: int | None = None,
    actor: str = "",
    annotations: Mapping[str, str] | None = None,
) -> WriteResult:
    """POST the pod's eviction (with its uid as precondition, ``grace_period_seconds`` in
    its delete options and ``annotations`` on the Eviction if given) and record it unless
    refused.

    A 409 answers the uid precondition: the pod under that name is another one, this one is
    gone (:attr:`WriteOutcome.GONE`)."""
    view = meta(pod)
    try:
        await client.evict(
            view.name,
            namespace=view.namespace,
            uid=view.uid or None,
            grace_period_seconds=grace_period_seconds,
            annotations=annotations,
        )
    except KubeError as err:
        outcome = write_outcome(err)
        if isinstance(err, KubeApiError) and err.code == 409 and view.uid:
            outcome = WriteOutcome.GONE
        result = WriteResult(outcome, err)
        if result.maybe_ours:  # unknown, or gone after an attempt that may have evicted it
            ledger.record(
                _disruption(DisruptionKind.EVICTION, pod, now=now, confirmed=False, actor=actor)
            )
        return result
    ledger.record(_disruption(DisruptionKind.EVICTION, pod, now=now, confirmed=True, actor=actor))
    return WriteResult(WriteOutcome.DONE)


async def resize_pod(
    client: KubeClient,
    ledger: DisruptionLedger,
    pod: Pod,
    patches: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    actor: str = "",
) -> WriteResult:
    """JSON-patch ``pods/<name>/resize`` with ``patches`` and record it unless refused."""
    view = meta(pod)
    targets = resize_targets(pod, patches)
    try:
        await client.patch(
            PODS,
            view.name,
            [dict(op) for op in patches],
            namespace=view.namespace,
            patch_type="json",
            subresource="resize",
        )
    except KubeError as err:
        outcome = write_outcome(err)
        if outcome is WriteOutcome.UNKNOWN:
            ledger.record(
                _disruption(
                    DisruptionKind.RESIZE,
                    pod,
                    now=now,
                    confirmed=False,
                    resources=targets,
                    actor=actor,
                )
            )
        return WriteResult(outcome, err)
    ledger.record(
        _disruption(
            DisruptionKind.RESIZE, pod, now=now, confirmed=True, resources=targets, actor=actor
        )
    )
    return WriteResult(WriteOutcome.DONE)


def _disruption(
    kind: DisruptionKind,
    pod: Pod,
    *,
    now: datetime,
    confirmed: bool,
    resources: ContainerResources | None = None,
    actor: str = "",
) -> Disruption:
    view = meta(pod)
    controller = view.controller
    return Disruption(
        kind=kind,
        uid=view.uid,
        namespace=view.namespace,
        name=view.name,
        recorded_at=now,
        confirmed=confirmed,
        resources=resources or {},
        actor=actor,
        node=spec_of(pod).get("nodeName") or "",
        owner_kind=controller.kind if controller is not None else "",
        owner_name=controller.name if controller is not None else "",
    )


# -- what a resize asks, and whether a pod shows it ------------------------------------------


def resize_targets(
    pod: Pod, patches: Sequence[Mapping[str, Any]]
) -> dict[str, dict[str, dict[str, str]]]:
    """The requests and limits each container touched by ``patches`` (JSON patch operations
    on ``/spec/containers/<i>/resources[/<requests|limits>[/<resource>]]``) has once they are
    applied to ``pod``. Operations on other paths are ignored."""
    raw = mapping(raw_spec(pod)).get("containers")  # entries may be malformed
    containers = [c for c in raw or () if isinstance(c, dict)]
    resources: list[dict[str, Any]] = [
        copy.deepcopy(dict(c.get("resources") or {})) for c in containers
    ]
    touched: list[int] = []
    for op in patches:
        parts = [
            part.replace("~1", "/").replace("~0", "~")
            for part in str(op.get("path", "")).split("/")[1:]
        ]
        if len(parts) < 4 or parts[:2] != ["spec", "containers"] or parts[3] != "resources":
            continue
        try:
            index = int(parts[2])
        except ValueError:
            continue
        if not 0 <= index < len(resources):
            continue
        if index not in touched:
            touched.append(index)
        _apply(resources, index, parts[4:], op)
    return {
        str(containers[index].get("name") or ""): {
            kind: {str(k): str(v) for k, v in (resources[index].get(kind) or {}).items()}
            for kind in _RESOURCE_KINDS
        }
        for index in touched
    }


def _apply(
    resources: list[dict[str, Any]], index: int, rest: list[str], op: Mapping[str, Any]
) -> None:
    """One operation on container ``index``'s resources, ``rest`` the path below them."""
    value = copy.deepcopy(op.get("value"))
    removing = op.get("op") == "remove"
    if not rest:
        resources[index] = {} if removing or not isinstance(value, dict) else value
        return
    holder: dict[str, Any] = resources[index]
    if len(rest) == 2:
        inner = holder.get(rest[0])
        if not isinstance(inner, dict):
            inner = holder[rest[0]] = {}
        holder, rest = inner, rest[1:]
    if removing:
        holder.pop(rest[0], None)
    else:
        holder[rest[0]] = value


def resize_applied(pod: Pod, targets: ContainerResources) -> bool:
    """Whether every container of ``targets`` has, in ``pod``'s spec, the requests and limits
    asked (compared as quantities: ``"0.5"`` is ``"500m"``)."""
    raw = mapping(raw_spec(pod)).get("containers")  # entries may be malformed
    by_name = {str(c.get("name") or ""): c for c in raw or () if isinstance(c, Mapping)}
    for name, wanted in targets.items():
        container = by_name.get(name)
        if container is None:
            return True  # not that pod any more: nothing left to wait for
        have = container.get("resources") or {}
        for kind in _RESOURCE_KINDS:
            current = have.get(kind) or {}
            for resource, quantity in (wanted.get(kind) or {}).items():
                if not _same_quantity(current.get(resource), quantity):
                    return False
    return True


def _same_quantity(have: object, want: str) -> bool:
    if have is None:
        return False
    try:
        return Quantity.from_json(have) == Quantity.parse(want)
    except QuantityError:
        return str(have) == want
