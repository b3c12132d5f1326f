"""Aggregated usage per container kind, and the per-container sample rules (``pkg/recommender/
model/aggregate_container_state.go``, ``container.go``, ``aggregations_config.go``).

* :class:`AggregateContainerState`: a CPU histogram of usage samples and a memory histogram of
  peaks, first/last CPU sample start and CPU sample count (the confidence inputs), creation time
  (for garbage collection) and what the controlling VPA says (update mode, scaling mode,
  controlled resources). A CPU sample adds ``usage / 1000`` cores with the constant weight
  ``minSampleWeight = 0.1`` (VPA >= 1.4; request weighting was removed upstream); a memory
  peak adds its bytes with weight 1.0. Checkpoints save/load as ``v3``.
* :class:`ContainerState`: one running container. CPU samples must start strictly after the
  previous one (else dropped). Memory keeps one peak per aggregation interval: the first sample
  opens a window ending ``interval`` later; inside the window a higher usage replaces the peak
  (subtract old, add new, both stamped at the window end) unless the current peak is 0; a
  sample at or after the window end moves it by ``trunc(ts - end, interval) + interval`` and
  adds a fresh peak. ``record_oom``: discarded when older than the last memory sample minus one
  interval (the reference's fix for kubernetes/autoscaler#8548), else
  ``max(max(request, peak) + minBumpUp, max(request, peak) * ratio)`` goes in as a memory sample
  that is always processed and recorded as the OOM peak.
* kubescale's addition, read only by the ``adaptive`` recommendation policy: an accepted OOM is
  also noted in the aggregate's :class:`~kubescale.controllers.vpa.model.policy.oom_log.OomLog`
  (``oom_log``, None until the first OOM; merged with the histograms), and from then on every
  accepted memory usage sample in its
  :class:`~kubescale.controllers.vpa.model.policy.recent_peaks.RecentPeaks` (``recent_peaks``,
  hourly maxima for the policy's burst release). No upstream arithmetic reads either.

Times are integer microseconds since Go's zero time (0 = ``time.Time{}``), resource amounts
upstream's int64 ResourceAmount (CPU millicores, memory bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, cast

from kubescale.controllers.vpa.model.checkpoint_format import (
    SUPPORTED_CHECKPOINT_VERSION,
    CheckpointFormatError,
    format_time,
    parse_time,
)
from kubescale.controllers.vpa.model.go_math import from_go_micros, go_float_to_int64, go_micros
from kubescale.controllers.vpa.model.histogram import (
    CPU_HISTOGRAM_OPTIONS,
    MEMORY_HISTOGRAM_OPTIONS,
    MIN_SAMPLE_WEIGHT,
    DecayingHistogram,
    HistogramStore,
)
from kubescale.controllers.vpa.model.model_config import CPU, MEMORY, AggregationsConfig
from kubescale.controllers.vpa.model.policy.oom_log import OomLog
from kubescale.controllers.vpa.model.policy.recent_peaks import RecentPeaks
from kubescale.objects.views import mapping
from kubescale.objects.vpa import ContainerResourcePolicy
from kubescale.objects.vpa_checkpoint import (
    HistogramCheckpoint,
    VerticalPodAutoscalerCheckpointStatus,
)

__all__ = [
    "DEFAULT_CONTROLLED_RESOURCES",
    "MAX_RESOURCE_AMOUNT",
    "AggregateContainerState",
    "ContainerState",
    "ContainerUsageSample",
    "HistogramStores",
    "controlled_resources",
    "resource_amount_from_float",
    "scale_resource",
]

DEFAULT_CONTROLLED_RESOURCES = (CPU, MEMORY)
MAX_RESOURCE_AMOUNT = 100_000_000_000_000
"""model.MaxResourceAmount = 1e14."""
_HOUR_NS = 3600 * 10**9
SCALING_MODE_AUTO = "Auto"
SCALING_MODE_OFF = "Off"


def resource_amount_from_float(amount: float) -> int:
    """resourceAmountFromFloat: clamp to [0, 1e14], truncate (NaN -> int64 indefinite)."""
    if amount > float(MAX_RESOURCE_AMOUNT):
        return MAX_RESOURCE_AMOUNT
    if amount < 0:
        amount = 0.0
    return go_float_to_int64(amount)


def scale_resource(amount: int, factor: float) -> int:
    """ScaleResource: ``resourceAmountFromFloat(float64(amount) * factor)``."""
    return resource_amount_from_float(float(amount) * factor)


MEMORY_WINDOW_BUCKETS = 16
"""Buckets a memory histogram row keeps until a peak lands outside them (then it goes dense):
16 buckets of ratio 1.05 span a factor 2.2 in peak memory; a day of peaks uses one or two."""


class HistogramStores:
    """The CPU and memory :class:`HistogramStore` aggregates of one model share."""

    __slots__ = ("config", "cpu", "memory")

    def __init__(self, config: AggregationsConfig, *, capacity: int = 64) -> None:
        self.config = config
        self.cpu = HistogramStore(
            CPU_HISTOGRAM_OPTIONS, config.cpu_histogram_decay_half_life_ns, capacity=capacity
        )
        self.memory = HistogramStore(
            MEMORY_HISTOGRAM_OPTIONS,
            config.memory_histogram_decay_half_life_ns,
            capacity=capacity,
            window=MEMORY_WINDOW_BUCKETS,
        )


@dataclass(frozen=True)
class ContainerUsageSample:
    """model.ContainerUsageSample: usage (millicores or bytes) measured from ``measure_start``."""

    measure_start: datetime
    usage: int
    resource: str


class AggregateContainerState:
    """model.AggregateContainerState on two rows of shared :class:`HistogramStores`."""

    __slots__ = (
        "_cpu_row",
        "_memory_row",
        "controlled_resources",
        "creation_time_us",
        "first_sample_start_us",
        "is_under_vpa",
        "last_sample_start_us",
        "oom_log",
        "recent_peaks",
        "released",
        "scaling_mode",
        "stores",
        "total_samples_count",
        "update_mode",
    )

    def __init__(self, stores: HistogramStores, *, creation_time_us: int = 0) -> None:
        self.stores = stores
        self._cpu_row = stores.cpu.allocate()
        memory_row = stores.memory.allocate()
        # The stores allocate in step, so the rows are usually equal: one int object, not two.
        self._memory_row = self._cpu_row if memory_row == self._cpu_row else memory_row
        self.first_sample_start_us = 0
        self.last_sample_start_us = 0
        self.total_samples_count = 0
        self.creation_time_us = creation_time_us
        self.is_under_vpa = False
        self.update_mode: str | None = None
        self.scaling_mode: str | None = None
        self.controlled_resources: tuple[str, ...] | None = None
        self.oom_log: OomLog | None = None
        self.recent_peaks: RecentPeaks | None = None
        self.released = False

    @classmethod
    def standalone(cls, config: AggregationsConfig | None = None) -> AggregateContainerState:
        """An aggregate with stores of its own (tests, one-off use)."""
        return cls(HistogramStores(config or AggregationsConfig(), capacity=1))

    # -- histograms -------------------------------------------------------------------------

    @property
    def cpu_row(self) -> int:
        return self._cpu_row

    @property
    def memory_row(self) -> int:
        return self._memory_row

    @property
    def cpu(self) -> DecayingHistogram:
        """AggregateCPUUsage."""
        return DecayingHistogram.on_row(self.stores.cpu, self._cpu_row)

    @property
    def memory(self) -> DecayingHistogram:
        """AggregateMemoryPeaks."""
        return DecayingHistogram.on_row(self.stores.memory, self._memory_row)

    def release(self) -> None:
        """Return the rows to the stores (the aggregate is dropped)."""
        if not self.released:
            self.stores.cpu.release(self._cpu_row)
            self.stores.memory.release(self._memory_row)
            self.released = True

    # -- samples ------------------------------------------------------------------------------

    def add_cpu_sample(self, usage_millicores: int, time_us: int) -> None:
        """addCPUSample: ``usage / 1000`` cores with weight minSampleWeight."""
        self.stores.cpu.add_sample(
            self._cpu_row, float(usage_millicores) / 1000.0, MIN_SAMPLE_WEIGHT, time_us
        )
        self.count_cpu_sample(time_us)

    def count_cpu_sample(self, time_us: int) -> None:
        """addCPUSample's bookkeeping: first/last sample start and the sample count (the
        histogram part done separately, e.g. vectorised)."""
        self.last_sample_start_us = max(self.last_sample_start_us, time_us)
        if self.first_sample_start_us == 0 or time_us < self.first_sample_start_us:
            self.first_sample_start_us = time_us
        self.total_samples_count += 1

    def add_memory_peak(self, usage_bytes: int, time_us: int) -> None:
        self.stores.memory.add_sample(self._memory_row, float(usage_bytes), 1.0, time_us)

    def subtract_memory_peak(self, usage_bytes: int, time_us: int) -> None:
        self.stores.memory.subtract_sample(self._memory_row, float(usage_bytes), 1.0, time_us)

    def note_oom(self, time_us: int, memory_bytes: int) -> None:
        """Keep an accepted OOM in the OOM log (not upstream; see module docstring)."""
        if self.oom_log is None:
            self.oom_log = OomLog()
        self.oom_log.add(time_us, memory_bytes)
        if self.recent_peaks is None:
            self.recent_peaks = RecentPeaks(time_us)

    def note_memory_usage(self, usage_bytes: int, time_us: int) -> None:
        """An accepted memory usage sample, kept once the aggregate has been OOM-killed (not
        upstream; see module docstring)."""
        if self.recent_peaks is not None:
            self.recent_peaks.add(usage_bytes, time_us)

    def add_sample(self, sample: ContainerUsageSample) -> None:
        """AddSample (CPU or memory)."""
        time_us = go_micros(sample.measure_start)
        if sample.resource == CPU:
            self.add_cpu_sample(sample.usage, time_us)
        elif sample.resource == MEMORY:
            self.add_memory_peak(sample.usage, time_us)
        else:
            raise ValueError(f"AddSample doesn't support resource '{sample.resource}'")

    def subtract_sample(self, sample: ContainerUsageSample) -> None:
        """SubtractSample (memory only, as upstream)."""
        if sample.resource != MEMORY:
            raise ValueError(f"SubtractSample doesn't support resource '{sample.resource}'")
        self.subtract_memory_peak(sample.usage, go_micros(sample.measure_start))

    def aggregate(self) -> AggregateContainerState:
        """As a container's aggregator: itself."""
        return self

    # -- merging, policy ----------------------------------------------------------------------

    def merge(self, other: AggregateContainerState) -> None:
        """MergeContainerState."""
        self.stores.cpu.merge(self._cpu_row, other.stores.cpu, other._cpu_row)
        self.stores.memory.merge(self._memory_row, other.stores.memory, other._memory_row)
        if self.first_sample_start_us == 0 or (
            other.first_sample_start_us != 0
            and other.first_sample_start_us < self.first_sample_start_us
        ):
            self.first_sample_start_us = other.first_sample_start_us
        self.last_sample_start_us = max(self.last_sample_start_us, other.last_sample_start_us)
        self.total_samples_count += other.total_samples_count
        if other.oom_log is not None:
            if self.oom_log is None:
                self.oom_log = OomLog()
            self.oom_log.merge(other.oom_log)
        if other.recent_peaks is not None:
            if self.recent_peaks is None:
                self.recent_peaks = other.recent_peaks.copy()
            else:
                self.recent_peaks.merge(other.recent_peaks)

    def get_controlled_resources(self) -> tuple[str, ...]:
        if self.controlled_resources is not None:
            return self.controlled_resources
        return DEFAULT_CONTROLLED_RESOURCES

    def update_from_policy(self, policy: ContainerResourcePolicy | None) -> None:
        """UpdateFromPolicy: scaling mode (Auto unless set) and controlled resources."""
        mode: object = policy.get("mode") if policy is not None else None
        self.scaling_mode = mode if isinstance(mode, str) else SCALING_MODE_AUTO
        self.controlled_resources = controlled_resources(policy)

    def mark_not_autoscaled(self) -> None:
        self.is_under_vpa = False
        self.update_mode = None
        self.scaling_mode = None
        self.controlled_resources = None

    def under_vpa(self) -> bool:
        """IsUnderVPA."""
        return self.is_under_vpa

    def needs_recommendation(self) -> bool:
        return (
            self.is_under_vpa
            and self.scaling_mode is not None
            and self.scaling_mode != SCALING_MODE_OFF
        )

    # -- expiry -------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """isEmpty: no CPU sample counted."""
        return self.total_samples_count == 0

    def is_expired(self, now_us: int) -> bool:
        """isExpired: 8 days (the aggregation window) after the last sample, or after creation
        for an empty aggregate."""
        window_us = self.stores.config.memory_aggregation_window_ns // 1000
        if self.is_empty():
            return now_us - self.creation_time_us >= window_us
        return now_us - self.last_sample_start_us >= window_us

    # -- checkpoints --------------------------------------------------------------------------

    def save_to_checkpoint(self) -> VerticalPodAutoscalerCheckpointStatus:
        """SaveToCheckpoint: the checkpoint ``status`` (without ``lastUpdateTime``)."""
        status: VerticalPodAutoscalerCheckpointStatus = {
            "version": SUPPORTED_CHECKPOINT_VERSION,
            "cpuHistogram": self.cpu.save_to_checkpoint(),
            "memoryHistogram": self.memory.save_to_checkpoint(),
            "firstSampleStart": format_time(self.first_sample_start_us),
            "lastSampleStart": format_time(self.last_sample_start_us),
        }
        if self.total_samples_count:
            status["totalSamplesCount"] = self.total_samples_count
        return status

    def load_from_checkpoint(self, status: VerticalPodAutoscalerCheckpointStatus) -> None:
        """LoadFromCheckpoint: version must be ``v3``; counts and times replaced, histograms
        added to."""
        # Read as sent (a stored object, not validated): each field is checked here.
        version: object = status.get("version")
        if version != SUPPORTED_CHECKPOINT_VERSION:
            raise CheckpointFormatError(f"unsuported checkpoint version {version}")
        count: object = status.get("totalSamplesCount", 0)
        if isinstance(count, bool) or not isinstance(count, int):
            raise CheckpointFormatError(f"totalSamplesCount {count!r} is not an integer")
        self.total_samples_count = count
        self.first_sample_start_us = parse_time(status.get("firstSampleStart"))
        self.last_sample_start_us = parse_time(status.get("lastSampleStart"))
        # A histogram that is not an object reads empty (parse_histogram checks its fields).
        self.memory.load_from_checkpoint(
            cast(HistogramCheckpoint, mapping(status.get("memoryHistogram")))
        )
        self.cpu.load_from_checkpoint(
            cast(HistogramCheckpoint, mapping(status.get("cpuHistogram")))
        )

    # -- datetimes for callers ----------------------------------------------------------------

    @property
    def first_sample_start(self) -> datetime | None:
        return from_go_micros(self.first_sample_start_us) if self.first_sample_start_us else None

    @property
    def last_sample_start(self) -> datetime | None:
        return from_go_micros(self.last_sample_start_us) if self.last_sample_start_us else None


def controlled_resources(policy: ContainerResourcePolicy | None) -> tuple[str, ...]:
    """A container policy's ``controlledResources`` as the model reads them
    (``ResourceNamesApiToModel``: only cpu and memory survive); cpu and memory when unset."""
    resources: object = policy.get("controlledResources") if policy is not None else None
    if isinstance(resources, list):
        return tuple(r for r in resources if r in (CPU, MEMORY))
    return DEFAULT_CONTROLLED_RESOURCES


class ContainerAggregator(Protocol):
    """ContainerStateAggregator: resolves to the aggregate a container's samples go to."""

    def aggregate(self) -> AggregateContainerState: ...


class ContainerState:
    """model.ContainerState: one container's sample ordering, memory peak window and OOMs."""

    __slots__ = (
        "aggregator",
        "last_cpu_sample_start_us",
        "last_memory_sample_start_us",
        "memory_peak",
        "oom_peak",
        "request_cpu",
        "request_memory",
        "window_end_us",
    )

    def __init__(
        self, *, request_cpu: int, request_memory: int, aggregator: ContainerAggregator
    ) -> None:
        self.request_cpu = request_cpu
        self.request_memory = request_memory
        self.aggregator = aggregator
        self.last_cpu_sample_start_us = 0
        self.memory_peak = 0
        self.oom_peak = 0
        self.window_end_us = 0
        self.last_memory_sample_start_us = 0

    def max_memory_peak(self) -> int:
        """GetMaxMemoryPeak."""
        return max(self.memory_peak, self.oom_peak)

    def add_cpu_sample(self, usage: int, time_us: int) -> bool:
        """addCPUSample: only valid samples strictly after the last one."""
        if usage < 0 or time_us <= self.last_cpu_sample_start_us:
            return False
        self.aggregator.aggregate().add_cpu_sample(usage, time_us)
        self.last_cpu_sample_start_us = time_us
        return True

    def add_memory_sample(self, usage: int, time_us: int, *, is_oom: bool = False) -> bool:
        """addMemorySample."""
        if usage < 0 or (not is_oom and time_us < self.last_memory_sample_start_us):
            return False
        self.last_memory_sample_start_us = time_us
        if not is_oom:
            self.aggregator.aggregate().note_memory_usage(usage, time_us)
        if self.window_end_us == 0:
            self.window_end_us = time_us
        add_new_peak = False
        if time_us < self.window_end_us:
            old_max = self.max_memory_peak()
            if old_max != 0 and usage > old_max:
                self.aggregator.aggregate().subtract_memory_peak(old_max, self.window_end_us)
                add_new_peak = True
        else:
            interval_us = self.aggregator.aggregate().stores.config.memory_aggregation_interval_ns
            interval_us //= 1000
            elapsed = time_us - self.window_end_us
            self.window_end_us += elapsed - elapsed % interval_us + interval_us
            self.memory_peak = 0
            self.oom_peak = 0
            add_new_peak = True
        if add_new_peak:
            self.aggregator.aggregate().add_memory_peak(usage, self.window_end_us)
            if is_oom:
                self.oom_peak = usage
            else:
                self.memory_peak = usage
        return True

    def add_sample(self, sample: ContainerUsageSample) -> bool:
        """AddSample: True if aggregated, False if discarded."""
        time_us = go_micros(sample.measure_start)
        if sample.resource == CPU:
            return self.add_cpu_sample(sample.usage, time_us)
        if sample.resource == MEMORY:
            return self.add_memory_sample(sample.usage, time_us)
        return False

    def record_oom(self, time_us: int, requested_memory: int) -> bool:
        """RecordOOM: False when the OOM is too old or the sample is refused."""
        config = self.aggregator.aggregate().stores.config
        interval_us = config.memory_aggregation_interval_ns // 1000
        if time_us < self.last_memory_sample_start_us - interval_us:
            return False
        memory_used = max(requested_memory, self.memory_peak)
        memory_needed = max(
            memory_used + resource_amount_from_float(config.oom_min_bump_up_bytes),
            scale_resource(memory_used, config.oom_bump_up_ratio),
        )
        accepted = self.add_memory_sample(memory_needed, time_us, is_oom=True)
        if accepted:
            self.aggregator.aggregate().note_oom(time_us, memory_used)
        return accepted
