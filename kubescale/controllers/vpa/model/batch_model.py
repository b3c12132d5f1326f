"""Many containers at once: the same model steps as the scalar path, vectorised with numpy.

A recommender loop over thousands of containers spends its time in two places: adding the
minute's CPU samples to the histograms and computing six percentiles plus the estimator chain
per container. Both are done here for all rows of the shared
:class:`~kubescale.controllers.vpa.model.histogram.HistogramStore` in a few array operations, in
exactly the floating-point order of the scalar code (``HistogramStore.add_samples_rows`` /
``percentiles_rows``, :func:`kubescale.controllers.vpa.model.estimators.estimate_arrays`), so
results are bit for bit those of :meth:`ClusterState.add_sample` /
:meth:`ClusterState.recommendation`.

* :class:`CpuSampleBatch` collects CPU samples (distinct histogram rows) and applies them in one
  step; a second sample for a row already pending flushes the batch first, which keeps the
  per-row order of additions.
* :func:`estimate_states` estimates many (merged) aggregates at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kubescale.controllers.vpa.model.aggregate_state import AggregateContainerState
from kubescale.controllers.vpa.model.estimators import ContainerEstimate, estimate_arrays
from kubescale.controllers.vpa.model.histogram import MIN_SAMPLE_WEIGHT, HistogramStore
from kubescale.controllers.vpa.model.model_config import RecommenderConfig

__all__ = ["CpuSampleBatch", "estimate_states"]


class CpuSampleBatch:
    """Pending CPU histogram additions for distinct rows of one store."""

    __slots__ = ("_rows", "_seen", "_store", "_times", "_values")

    def __init__(self, store: HistogramStore) -> None:
        self._store = store
        self._rows: list[int] = []
        self._values: list[float] = []
        self._times: list[int] = []
        self._seen: set[int] = set()

    def add(self, row: int, usage_millicores: int, time_us: int) -> None:
        """Queue ``AddSample(usage / 1000, minSampleWeight, time)`` for ``row``."""
        if row in self._seen:
            self.flush()
        self._seen.add(row)
        self._rows.append(row)
        self._values.append(float(usage_millicores) / 1000.0)
        self._times.append(time_us)

    def flush(self) -> None:
        if not self._rows:
            return
        count = len(self._rows)
        self._store.add_samples_rows(
            np.array(self._rows, dtype=np.int64),
            np.array(self._values, dtype=np.float64),
            np.full(count, MIN_SAMPLE_WEIGHT),
            np.array(self._times, dtype=np.int64),
        )
        self._rows.clear()
        self._values.clear()
        self._times.clear()
        self._seen.clear()


def estimate_states(
    states: Sequence[AggregateContainerState],
    containers: Sequence[int],
    config: RecommenderConfig,
) -> list[ContainerEstimate]:
    """:func:`kubescale.controllers.vpa.model.estimators.estimate` for each state (all in the same
    stores),
    ``containers[i]`` being the number of containers the pod minimum is split over."""
    if not states:
        return []
    stores = states[0].stores
    cpu_rows = np.array([state.cpu_row for state in states], dtype=np.int64)
    memory_rows = np.array([state.memory_row for state in states], dtype=np.int64)
    cpu = stores.cpu.percentiles_rows(
        cpu_rows,
        (
            config.target_cpu_percentile,
            config.recommendation_lower_bound_cpu_percentile,
            config.recommendation_upper_bound_cpu_percentile,
        ),
    )
    memory = stores.memory.percentiles_rows(
        memory_rows,
        (
            config.target_memory_percentile,
            config.recommendation_lower_bound_memory_percentile,
            config.recommendation_upper_bound_memory_percentile,
        ),
    )
    arrays = estimate_arrays(
        cpu_percentiles=cpu,
        memory_percentiles=memory,
        first_us=np.array([s.first_sample_start_us for s in states], dtype=np.int64),
        last_us=np.array([s.last_sample_start_us for s in states], dtype=np.int64),
        samples=np.array([s.total_samples_count for s in states], dtype=np.int64),
        containers=np.array(containers, dtype=np.int64),
        config=config,
    )
    columns = [
        arrays[name].tolist()
        for name in (
            "target_cpu",
            "target_memory",
            "lower_cpu",
            "lower_memory",
            "upper_cpu",
            "upper_memory",
        )
    ]
    return [ContainerEstimate(*values) for values in zip(*columns, strict=True)]
