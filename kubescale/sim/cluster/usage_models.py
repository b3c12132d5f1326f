"""What the containers of simulated workloads use: per-pod CPU and memory as functions of time.

The kubelet actor asks, every step and for every running container, how much CPU (cores) and
memory (bytes) it uses. The answer comes from a :class:`UsageModel` registered in the
:class:`UsageBook` for the container's workload (the pod's :data:`WORKLOAD_LABEL`) and container
name. A model is a pure function of its arguments — same arguments, same answer, in any order of
calls — so a run is reproducible from the scenario seed and a model can be evaluated at any ``t``:

* ``t``: seconds since the simulation started;
* ``pod_index``: the pod's :data:`POD_INDEX_ANNOTATION`, a small integer stable for the pod's
  life (per-pod randomness is keyed by it, so replica 3 always gets replica 3's series);
* ``replicas``: the Running pods of the workload (a *shared* model divides its total by it,
  counting at least 1);
* ``since_start``: seconds since the container last started (a leak starts over after an OOM
  kill or a restart).

Models: :class:`ConstantUsage`, :class:`DiurnalUsage` (sine), :class:`StepUsage`,
:class:`RandomWalkUsage`, :class:`BurstUsage`, :class:`LinearGrowthUsage`, and
``kubescale.sim.cluster.trace_replay.TraceReplay`` (a recorded trace). Every model has ``shared``:
when true, the model describes the workload's *total* load — a service whose requests are spread
over its replicas — and each pod gets ``total / replicas``; the random models then draw one series
for the whole workload instead of one per pod. No answer is ever negative.

Randomness: the book derives each model's seed from the scenario seed and the model's place
(``"<seed>/<workload>/<container>"``); per-pod streams add the pod index. Seeds are strings fed
to ``random.Random``/BLAKE2, never ``hash()``, which is salted per process.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Protocol, runtime_checkable

__all__ = [
    "POD_INDEX_ANNOTATION",
    "RUN_SECONDS_ANNOTATION",
    "WORKLOAD_LABEL",
    "BurstUsage",
    "ConstantUsage",
    "DiurnalUsage",
    "LinearGrowthUsage",
    "RandomWalkUsage",
    "SeedableUsageModel",
    "StepUsage",
    "Usage",
    "UsageBook",
    "UsageModel",
    "per_pod",
]

WORKLOAD_LABEL: Final = "sim.kubescale.dev/workload"
"""Stamped on every pod a simulated controller creates; the value is the workload's name."""
POD_INDEX_ANNOTATION: Final = "sim.kubescale.dev/pod-index"
"""A small integer, stable for the pod's life, unique among the workload's live pods (the
lowest free one is taken, so indexes of deleted pods are reused)."""
RUN_SECONDS_ANNOTATION: Final = "sim.kubescale.dev/run-seconds"
"""On a Job's pod (copied from the pod template or the Job): after this many seconds of running,
the kubelet actor lets the pod's containers exit 0 and the pod turns Succeeded."""


@dataclass(frozen=True)
class Usage:
    """What one container uses: CPU in cores, memory in bytes."""

    cpu_cores: float
    memory_bytes: float

    def __post_init__(self) -> None:
        for name in ("cpu_cores", "memory_bytes"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {value!r}")


_ZERO: Final = Usage(0.0, 0.0)


class UsageModel(Protocol):
    """A container's usage as a function of time (see the module docstring for the arguments)."""

    @property
    def shared(self) -> bool:
        """Whether the model is the workload's total, divided among its replicas."""
        ...

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        """Per-pod usage ``t`` seconds after the simulation started."""
        ...


@runtime_checkable
class SeedableUsageModel(Protocol):
    """A model with randomness: :meth:`UsageBook.set_model` hands it its seed."""

    def with_seed(self, seed: str) -> UsageModel:
        """The same model drawing from the streams of ``seed``."""
        ...


def per_pod(total_cpu: float, total_memory: float, *, shared: bool, replicas: int) -> Usage:
    """A usage clamped at zero; a shared total split evenly over ``replicas`` (at least 1)."""
    divisor = max(1, replicas) if shared else 1
    return Usage(max(0.0, total_cpu) / divisor, max(0.0, total_memory) / divisor)


def _unit_interval(key: str) -> float:
    """A uniform number in [0, 1) determined by ``key`` alone (BLAKE2b, not ``hash()``)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


@dataclass(frozen=True)
class ConstantUsage:
    """The same usage at every moment."""

    cpu_cores: float
    memory_bytes: float
    shared: bool = False

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        return per_pod(self.cpu_cores, self.memory_bytes, shared=self.shared, replicas=replicas)


@dataclass(frozen=True)
class DiurnalUsage:
    """``mean + amplitude · sin(2π (t − phase) / period)``, per resource, floored at zero.

    With the default day-long period, the value crosses the mean going up at ``t = phase``,
    peaks at ``phase + period/4`` and bottoms out at ``phase + 3·period/4``.
    """

    mean: Usage
    amplitude: Usage
    period: float = 86400.0
    phase: float = 0.0
    shared: bool = False

    def __post_init__(self) -> None:
        if self.period <= 0:
            raise ValueError("period must be > 0")

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        wave = math.sin(2.0 * math.pi * (t - self.phase) / self.period)
        return per_pod(
            self.mean.cpu_cores + self.amplitude.cpu_cores * wave,
            self.mean.memory_bytes + self.amplitude.memory_bytes * wave,
            shared=self.shared,
            replicas=replicas,
        )


@dataclass(frozen=True)
class StepUsage:
    """Piecewise constant: the usage of the last step whose time is ``<= t``.

    ``steps`` are ``(time, usage)`` pairs in any order (times distinct). Before the first step
    the first step's usage applies, so a model that starts at ``t = 0`` is simply
    ``[(0, base), (600, high), ...]``.
    """

    steps: Sequence[tuple[float, Usage]]
    shared: bool = False
    _times: tuple[float, ...] = field(init=False, repr=False, compare=False)
    _values: tuple[Usage, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError("a StepUsage needs at least one step")
        ordered = sorted(self.steps, key=lambda step: step[0])
        times = tuple(float(time) for time, _ in ordered)
        if len(set(times)) != len(times):
            raise ValueError("StepUsage step times must be distinct")
        object.__setattr__(self, "steps", tuple(ordered))  # hashable, in time order
        object.__setattr__(self, "_times", times)
        object.__setattr__(self, "_values", tuple(value for _, value in ordered))

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        position = max(0, bisect.bisect_right(self._times, t) - 1)
        value = self._values[position]
        return per_pod(value.cpu_cores, value.memory_bytes, shared=self.shared, replicas=replicas)


@dataclass(frozen=True)
class RandomWalkUsage:
    """A bounded Gaussian random walk, one independent walk per pod (one in all if shared).

    The walk starts at ``start`` at ``t = 0`` and takes one step every ``interval`` seconds:
    each resource moves by a normal draw with standard deviation ``volatility`` and is clamped
    into ``[minimum, maximum]`` (``maximum=None``: no upper bound; the floor is never below 0).
    The value at ``t`` is the walk after ``floor(t / interval)`` steps, so it is constant within
    an interval and the same whatever order ``t`` values are asked in. Walks are extended lazily
    and memoised per stream: asking for increasing ``t`` costs O(1) per step.
    """

    start: Usage
    volatility: Usage
    interval: float = 60.0
    minimum: Usage = _ZERO
    maximum: Usage | None = None
    seed: str = "0"
    shared: bool = False
    _walks: dict[int, tuple[list[float], list[float], random.Random]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.interval <= 0:
            raise ValueError("interval must be > 0")
        if self.maximum is not None and (
            self.maximum.cpu_cores < self.minimum.cpu_cores
            or self.maximum.memory_bytes < self.minimum.memory_bytes
        ):
            raise ValueError("maximum must not be below minimum")

    def with_seed(self, seed: str) -> RandomWalkUsage:
        return replace(self, seed=seed)

    def _clamp(self, cpu: float, memory: float) -> tuple[float, float]:
        cpu, memory = max(self.minimum.cpu_cores, cpu), max(self.minimum.memory_bytes, memory)
        if self.maximum is not None:
            cpu, memory = min(self.maximum.cpu_cores, cpu), min(self.maximum.memory_bytes, memory)
        return cpu, memory

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        stream = -1 if self.shared else pod_index
        walk = self._walks.get(stream)
        if walk is None:
            cpu0, memory0 = self._clamp(self.start.cpu_cores, self.start.memory_bytes)
            walk = ([cpu0], [memory0], random.Random(f"{self.seed}/walk/{stream}"))
            self._walks[stream] = walk
        cpus, memories, rng = walk
        steps = max(0, math.floor(t / self.interval))
        while len(cpus) <= steps:
            cpu, memory = self._clamp(
                cpus[-1] + rng.gauss(0.0, self.volatility.cpu_cores),
                memories[-1] + rng.gauss(0.0, self.volatility.memory_bytes),
            )
            cpus.append(cpu)
            memories.append(memory)
        return per_pod(cpus[steps], memories[steps], shared=self.shared, replicas=replicas)


@dataclass(frozen=True)
class BurstUsage:
    """``base`` usage with bursts to ``burst``: in each ``interval``-long window a burst starts
    with ``probability`` and lasts ``duration`` seconds (bursts may overlap; the level is the
    same). Whether window ``k`` starts a burst is a pure function of (seed, pod, k), so any
    ``t`` is answered in O(duration / interval) without state. A shared model bursts as a
    whole (all pods together); otherwise each pod has its own bursts.
    """

    base: Usage
    burst: Usage
    probability: float
    duration: float
    interval: float = 60.0
    seed: str = "0"
    shared: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError("probability must be within [0, 1]")
        if self.duration <= 0 or self.interval <= 0:
            raise ValueError("duration and interval must be > 0")

    def with_seed(self, seed: str) -> BurstUsage:
        return replace(self, seed=seed)

    def bursting(self, *, t: float, pod_index: int) -> bool:
        """Whether a burst is in progress at ``t`` for this pod (or the workload, if shared)."""
        stream = -1 if self.shared else pod_index
        current = math.floor(t / self.interval)
        earliest = math.floor((t - self.duration) / self.interval)
        for window in range(max(0, earliest), current + 1):
            started = window * self.interval
            if started <= t < started + self.duration and (
                _unit_interval(f"{self.seed}/burst/{stream}/{window}") < self.probability
            ):
                return True
        return False

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        level = self.burst if self.bursting(t=t, pod_index=pod_index) else self.base
        return per_pod(level.cpu_cores, level.memory_bytes, shared=self.shared, replicas=replicas)


@dataclass(frozen=True)
class LinearGrowthUsage:
    """``start + rate · elapsed`` per resource (a leak), capped at ``maximum`` if given.

    ``elapsed`` is ``since_start`` — the time since the container last started, so an OOM kill
    or restart starts the leak over — or ``t`` when ``reset_on_restart`` is false.
    """

    start: Usage
    rate: Usage
    """Growth per second (cores/s, bytes/s)."""
    reset_on_restart: bool = True
    maximum: Usage | None = None
    shared: bool = False

    def usage(self, *, t: float, pod_index: int, replicas: int, since_start: float) -> Usage:
        elapsed = max(0.0, since_start if self.reset_on_restart else t)
        cpu = self.start.cpu_cores + self.rate.cpu_cores * elapsed
        memory = self.start.memory_bytes + self.rate.memory_bytes * elapsed
        if self.maximum is not None:
            cpu = min(cpu, self.maximum.cpu_cores)
            memory = min(memory, self.maximum.memory_bytes)
        return per_pod(cpu, memory, shared=self.shared, replicas=replicas)


class UsageBook:
    """The usage model of every (workload, container) of a scenario.

    :meth:`set_model` is also how a timed "change a load" event takes effect: models are
    evaluated at absolute ``t``, so a model swapped in at ``t = 3600`` answers for ``t >= 3600``
    exactly as it would have all along.
    """

    def __init__(self, *, seed: int) -> None:
        self.seed = seed
        self._models: dict[tuple[str, str], UsageModel] = {}

    def set_model(self, *, workload: str, container: str, model: UsageModel) -> None:
        if isinstance(model, SeedableUsageModel):
            model = model.with_seed(f"{self.seed}/{workload}/{container}")
        self._models[(workload, container)] = model

    def model(self, *, workload: str, container: str) -> UsageModel | None:
        return self._models.get((workload, container))

    def keys(self) -> list[tuple[str, str]]:
        """The (workload, container) pairs that have a model, sorted."""
        return sorted(self._models)

    def usage(
        self,
        *,
        workload: str,
        container: str,
        pod_index: int,
        t: float,
        replicas: int,
        since_start: float,
    ) -> Usage | None:
        """The container's usage, or ``None`` when no model is set for it."""
        model = self._models.get((workload, container))
        if model is None:
            return None
        return model.usage(t=t, pod_index=pod_index, replicas=replicas, since_start=since_start)
