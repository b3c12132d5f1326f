"""The ``adaptive`` recommendation policy: upstream's histograms, read with the OOM history.

Upstream's estimator (:func:`kubescale.controllers.vpa.model.estimators.estimate`) gives every
container the same percentile and margin and answers an OOM with one bumped sample (x1.2) that
ages like any other peak. This policy, per container (``P(q)`` a histogram percentile, bucket
end; ``margin(x, m) = x + int(x * m)``; every amount at least the pod minimum split over the
containers, as upstream):

* **OOM pressure** — the aggregate's :class:`~kubescale.controllers.vpa.model.policy.oom_log.OomLog`
  grouped into *episodes* (an OOM at least ``episode_gap`` after the previous one starts one);
  ``rung`` = episodes started within ``episode_window`` before now, at most the last rung.
* **memory target** = ``margin(P_mem(p_rung), m_rung)`` from ``memory_rungs``: a container that
  keeps being OOM-killed moves to higher percentiles of its daily peaks (longer memory: with
  a 24 h half-life ``P(0.99)`` reaches back about a week, ``P(1.0)`` to the oldest peak still
  held) and back down as its episodes age out of the window;
* **after an OOM** (within ``oom_hold`` of the last one) memory is at least
  ``max(int(used * bump), margin(P_mem(oom_peak_percentile), oom_peak_margin))``,
  ``used`` being the memory in use at that OOM: a burst is met at once at its known height
  (multiplying while it keeps OOMing) instead of x1.2 per OOM. ``bump`` is
  ``young_oom_bump_ratio`` for a young aggregate (hours of history say little of its range:
  from the pod minimum, x8 reaches gibibytes in two OOMs where x2 takes five),
  ``known_peak_bump_ratio`` when the remembered peak + margin (burst release, below) is above
  ``used`` (that peak is in the floor already), ``oom_bump_ratio`` otherwise;
* **young aggregates** (less than ``young`` of history, first to last sample): memory at least
  ``margin(P_mem(1.0), young_memory_margin)``: upstream applies its P90 target after hours of
  history, and a young container's first burst above it is where most first OOMs come from;
* **burst release** (``release_quiet`` > 0) — for an aggregate OOM-killed before, with
  ``cap = int(target * release_ratio)`` (``target`` the rung's amount or the OOM floor): when
  its last OOM is at least ``release_quiet`` ago, its
  :class:`~kubescale.controllers.vpa.model.policy.recent_peaks.RecentPeaks` start before
  ``now - release_quiet`` and every clock hour from then to now peaked at most ``cap``, the
  target becomes ``level = margin(highest hour <= cap of the last release_history,
  release_margin)`` if that is at least ``release_min_bytes`` lower. A burst that is over stops
  holding its height for days (the OOM floor and the high rungs keep it otherwise); idle
  spikes seen in the last ``release_history`` stay covered; the next OOM's floor — with the
  release on also at least ``margin(remembered peak, oom_peak_margin)`` — jumps straight back
  to the burst's height: one OOM sample and two updates per burst;
* **CPU target** = the candidate ``L_p = margin(int(P_cpu(p) * 1000), cpu_margin)`` (millicores)
  for ``p`` in ``cpu_percentiles`` minimising ``L_p + 1000 * throttle_cost_cores * (1 - p)``
  (the first on a tie): steady containers get a high percentile for little, bursty ones a lower
  one — a throttled sample costs the same wherever it happens, a core of slack too;
* **bounds** — lowerBound ``min(upstream's, target)``; CPU upperBound ``max(upstream's, the
  highest candidate)``, memory upperBound upstream's; once the aggregate has ``settle`` of
  history (first to last sample) the upper bounds are at most ``target * cpu_upper_ratio`` /
  ``target * memory_upper_ratio`` (never below the target): a hand-set request far above the
  need is corrected after hours, not after upstream's confidence reaches it.

No look-ahead: OOMs, usage hours and a remembered peak after ``now`` are ignored. Pure: state,
config and ``now`` in, amounts out. :func:`estimate_adaptive` is the scalar chain,
:func:`estimate_adaptive_states` the vectorised one for a whole cluster (bit for bit the same,
like the upstream pair).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kubescale.controllers.vpa.model.aggregate_state import (
    MAX_RESOURCE_AMOUNT,
    AggregateContainerState,
    resource_amount_from_float,
    scale_resource,
)
from kubescale.controllers.vpa.model.estimators import (
    ContainerEstimate,
    estimate,
    estimate_arrays,
    pod_minimums,
)
from kubescale.controllers.vpa.model.go_math import FloatArray, IntArray
from kubescale.controllers.vpa.model.model_config import RecommenderConfig
from kubescale.controllers.vpa.model.policy.adaptive_config import (
    DEFAULT_ADAPTIVE_POLICY,
    AdaptivePolicyConfig,
)
from kubescale.controllers.vpa.model.policy.oom_log import OomEvent, OomLog

__all__ = ["OomPressure", "estimate_adaptive", "estimate_adaptive_states", "oom_pressure"]

_INT64_MIN = -(2**63)


@dataclass(frozen=True)
class OomPressure:
    """What the OOM log says at ``now``: recent episodes and the last OOM (None if none)."""

    episodes: int
    last: OomEvent | None


_NO_PRESSURE = OomPressure(0, None)


def oom_pressure(log: OomLog | None, now_us: int, policy: AdaptivePolicyConfig) -> OomPressure:
    """Episodes started within the window before ``now_us`` and the last OOM at or before it."""
    if log is None:
        return _NO_PRESSURE
    gap_us = policy.episode_gap_ns // 1000
    window_us = policy.episode_window_ns // 1000
    episodes = 0
    previous: OomEvent | None = None
    for event in log.events:
        if event.time_us > now_us:
            break
        if (previous is None or event.time_us - previous.time_us >= gap_us) and (
            now_us - event.time_us < window_us
        ):
            episodes += 1
        previous = event
    return OomPressure(episodes, previous)


def _margin(base: int, fraction: float) -> int:
    return base + scale_resource(base, fraction)


def _rung(pressure: OomPressure, policy: AdaptivePolicyConfig) -> int:
    return min(pressure.episodes, len(policy.memory_rungs) - 1)


def _holding(pressure: OomPressure, now_us: int, policy: AdaptivePolicyConfig) -> bool:
    last = pressure.last
    return last is not None and now_us - last.time_us < policy.oom_hold_ns // 1000


def _settled(state: AggregateContainerState, policy: AdaptivePolicyConfig) -> bool:
    return state.last_sample_start_us - state.first_sample_start_us >= policy.settle_ns // 1000


def _young(state: AggregateContainerState, policy: AdaptivePolicyConfig) -> bool:
    return state.last_sample_start_us - state.first_sample_start_us < policy.young_ns // 1000


def _release_level(
    state: AggregateContainerState,
    pressure: OomPressure,
    now_us: int,
    policy: AdaptivePolicyConfig,
    target: int,
) -> int | None:
    """The burst release's memory target, or None when it does not apply (module docstring)."""
    recent = state.recent_peaks
    last = pressure.last
    if policy.release_quiet_ns == 0 or recent is None or last is None:
        return None
    since_us = now_us - policy.release_quiet_ns // 1000
    if last.time_us > since_us or recent.started_us > since_us:
        return None
    cap = scale_resource(target, policy.release_ratio)
    if recent.max_between(since_us, now_us) > cap:
        return None
    quiet = recent.max_between(now_us - policy.release_history_ns // 1000, now_us, at_most=cap)
    if quiet <= 0:
        return None
    level = _margin(quiet, policy.release_margin)
    return level if target - level >= max(policy.release_min_bytes, 1) else None


def _remembered_peak(
    state: AggregateContainerState, now_us: int, policy: AdaptivePolicyConfig
) -> int:
    """The OOM floor's extra part with the burst release on: the remembered peak + margin."""
    recent = state.recent_peaks
    if policy.release_quiet_ns == 0 or recent is None or recent.peak_us > now_us:
        return 0
    return _margin(recent.peak_bytes, policy.oom_peak_margin)


def _bump_ratio(
    *, young: bool, remembered: int, used_bytes: int, policy: AdaptivePolicyConfig
) -> float:
    """The OOM floor's multiple of the memory in use at the last OOM (module docstring);
    ``remembered`` is :func:`_remembered_peak`'s amount."""
    if young:
        return policy.young_oom_bump_ratio
    if remembered > used_bytes:
        return policy.known_peak_bump_ratio
    return policy.oom_bump_ratio


def estimate_adaptive(
    state: AggregateContainerState,
    config: RecommenderConfig,
    *,
    now_us: int,
    containers: int,
    policy: AdaptivePolicyConfig = DEFAULT_ADAPTIVE_POLICY,
) -> ContainerEstimate:
    """The adaptive policy for one (merged) aggregate (module docstring)."""
    upstream = estimate(state, config, containers=containers)
    min_cpu, min_memory = pod_minimums(config, containers)
    pressure = oom_pressure(state.oom_log, now_us, policy)

    percentile, margin = policy.memory_rungs[_rung(pressure, policy)]
    memory = state.memory
    target_memory = _margin(resource_amount_from_float(memory.percentile(percentile)), margin)
    if _holding(pressure, now_us, policy):
        assert pressure.last is not None
        used = pressure.last.memory_bytes
        remembered = _remembered_peak(state, now_us, policy)
        bump = _bump_ratio(
            young=_young(state, policy), remembered=remembered, used_bytes=used, policy=policy
        )
        floor = max(
            scale_resource(used, bump),
            _margin(
                resource_amount_from_float(memory.percentile(policy.oom_peak_percentile)),
                policy.oom_peak_margin,
            ),
            remembered,
        )
        target_memory = max(target_memory, floor)
    release = _release_level(state, pressure, now_us, policy, target_memory)
    if release is not None:
        target_memory = release
    if _young(state, policy):
        young_floor = _margin(
            resource_amount_from_float(memory.percentile(1.0)), policy.young_memory_margin
        )
        target_memory = max(target_memory, young_floor)

    cpu = state.cpu
    throttle_cost = policy.throttle_cost_cores * 1000.0
    levels = [
        _margin(resource_amount_from_float(cpu.percentile(p) * 1000.0), policy.cpu_margin)
        for p in policy.cpu_percentiles
    ]
    costs = [
        float(level) + throttle_cost * (1.0 - p)
        for level, p in zip(levels, policy.cpu_percentiles, strict=True)
    ]
    target_cpu = levels[costs.index(min(costs))]
    upper_cpu = max(upstream.upper_cpu, *levels)
    upper_memory = upstream.upper_memory
    if _settled(state, policy):
        upper_cpu = min(upper_cpu, scale_resource(target_cpu, policy.cpu_upper_ratio))
        upper_memory = min(upper_memory, scale_resource(target_memory, policy.memory_upper_ratio))

    target_cpu = max(target_cpu, min_cpu)
    target_memory = max(target_memory, min_memory)
    return ContainerEstimate(
        target_cpu=target_cpu,
        target_memory=target_memory,
        lower_cpu=min(upstream.lower_cpu, target_cpu),
        lower_memory=min(upstream.lower_memory, target_memory),
        upper_cpu=max(upper_cpu, target_cpu),
        upper_memory=max(upper_memory, target_memory),
    )


# -- vectorised --------------------------------------------------------------------------------


def _amounts(values: FloatArray) -> IntArray:
    """resourceAmountFromFloat element-wise (clamp to [0, 1e14], NaN -> int64 min)."""
    clamped = np.where(values > float(MAX_RESOURCE_AMOUNT), float(MAX_RESOURCE_AMOUNT), values)
    clamped = np.where(clamped < 0, 0.0, clamped)
    nan = np.isnan(clamped)
    result: IntArray = np.where(nan, _INT64_MIN, np.where(nan, 0.0, clamped).astype(np.int64))
    return result


def _margin_array(base: IntArray, fraction: float | FloatArray) -> IntArray:
    result: IntArray = base + _amounts(base.astype(np.float64) * fraction)
    return result


def _column_index(percentiles: list[float], wanted: float) -> int:
    return percentiles.index(wanted)


def estimate_adaptive_states(
    states: Sequence[AggregateContainerState],
    containers: Sequence[int],
    config: RecommenderConfig,
    *,
    now_us: int,
    policy: AdaptivePolicyConfig = DEFAULT_ADAPTIVE_POLICY,
) -> list[ContainerEstimate]:
    """:func:`estimate_adaptive` for each state (all in the same stores), vectorised;
    ``containers[i]`` is the number of containers the pod minimum is split over."""
    if not states:
        return []
    stores = states[0].stores
    upstream_cpu = (
        config.target_cpu_percentile,
        config.recommendation_lower_bound_cpu_percentile,
        config.recommendation_upper_bound_cpu_percentile,
    )
    upstream_memory = (
        config.target_memory_percentile,
        config.recommendation_lower_bound_memory_percentile,
        config.recommendation_upper_bound_memory_percentile,
    )
    cpu_columns = sorted({*upstream_cpu, *policy.cpu_percentiles})
    memory_columns = sorted(
        {
            *upstream_memory,
            *(p for p, _ in policy.memory_rungs),
            policy.oom_peak_percentile,
            1.0,
        }
    )
    cpu = stores.cpu.percentiles_rows(
        np.array([state.cpu_row for state in states], dtype=np.int64), cpu_columns
    )
    memory = stores.memory.percentiles_rows(
        np.array([state.memory_row for state in states], dtype=np.int64), memory_columns
    )
    first_us = np.array([s.first_sample_start_us for s in states], dtype=np.int64)
    last_us = np.array([s.last_sample_start_us for s in states], dtype=np.int64)
    counts = np.array(containers, dtype=np.int64)
    upstream = estimate_arrays(
        cpu_percentiles=cpu[:, [_column_index(cpu_columns, p) for p in upstream_cpu]],
        memory_percentiles=memory[:, [_column_index(memory_columns, p) for p in upstream_memory]],
        first_us=first_us,
        last_us=last_us,
        samples=np.array([s.total_samples_count for s in states], dtype=np.int64),
        containers=counts,
        config=config,
    )
    minimums = {count: pod_minimums(config, count) for count in set(containers)}
    min_cpu = np.array([minimums[c][0] for c in containers], dtype=np.int64)
    min_memory = np.array([minimums[c][1] for c in containers], dtype=np.int64)

    # Memory: the rung's percentile and margin, then the OOM floor while holding.
    pressures = [oom_pressure(state.oom_log, now_us, policy) for state in states]
    rungs = np.array([_rung(p, policy) for p in pressures], dtype=np.int64)
    by_rung = np.stack(
        [
            _margin_array(_amounts(memory[:, _column_index(memory_columns, p)]), m)
            for p, m in policy.memory_rungs
        ],
        axis=1,
    )
    target_memory: IntArray = by_rung[np.arange(len(states)), rungs]
    young = last_us - first_us < policy.young_ns // 1000
    holding = [index for index, p in enumerate(pressures) if _holding(p, now_us, policy)]
    if holding:
        rows = np.array(holding, dtype=np.int64)
        used = np.array(
            [pressures[i].last.memory_bytes for i in holding],  # type: ignore[union-attr]
            dtype=np.int64,
        )
        peak = _margin_array(
            _amounts(memory[rows, _column_index(memory_columns, policy.oom_peak_percentile)]),
            policy.oom_peak_margin,
        )
        remembered = np.array(
            [_remembered_peak(states[i], now_us, policy) for i in holding], dtype=np.int64
        )
        ratios = np.array(
            [
                _bump_ratio(young=bool(y), remembered=int(r), used_bytes=int(u), policy=policy)
                for y, r, u in zip(young[rows], remembered, used, strict=True)
            ],
            dtype=np.float64,
        )
        floor = np.maximum(_amounts(used.astype(np.float64) * ratios), peak)
        target_memory[rows] = np.maximum(target_memory[rows], np.maximum(floor, remembered))
    if policy.release_quiet_ns:
        for index, state in enumerate(states):
            if state.recent_peaks is not None:
                release = _release_level(
                    state, pressures[index], now_us, policy, int(target_memory[index])
                )
                if release is not None:
                    target_memory[index] = release
    if young.any():
        young_floor = _margin_array(
            _amounts(memory[:, _column_index(memory_columns, 1.0)]), policy.young_memory_margin
        )
        target_memory = np.where(young, np.maximum(target_memory, young_floor), target_memory)

    # CPU: the cheapest candidate.
    levels = np.stack(
        [
            _margin_array(
                _amounts(cpu[:, _column_index(cpu_columns, p)] * 1000.0), policy.cpu_margin
            )
            for p in policy.cpu_percentiles
        ],
        axis=1,
    )
    throttle_cost = policy.throttle_cost_cores * 1000.0
    costs = levels.astype(np.float64) + np.array(
        [throttle_cost * (1.0 - p) for p in policy.cpu_percentiles]
    )
    target_cpu: IntArray = levels[np.arange(len(states)), np.argmin(costs, axis=1)]
    upper_cpu = np.maximum(upstream["upper_cpu"], levels.max(axis=1))
    upper_memory = upstream["upper_memory"]
    settled = last_us - first_us >= policy.settle_ns // 1000
    upper_cpu = np.where(
        settled,
        np.minimum(upper_cpu, _amounts(target_cpu.astype(np.float64) * policy.cpu_upper_ratio)),
        upper_cpu,
    )
    upper_memory = np.where(
        settled,
        np.minimum(
            upper_memory, _amounts(target_memory.astype(np.float64) * policy.memory_upper_ratio)
        ),
        upper_memory,
    )

    target_cpu = np.maximum(target_cpu, min_cpu)
    target_memory = np.maximum(target_memory, min_memory)
    columns = [
        target_cpu.tolist(),
        target_memory.tolist(),
        np.minimum(upstream["lower_cpu"], target_cpu).tolist(),
        np.minimum(upstream["lower_memory"], target_memory).tolist(),
        np.maximum(upper_cpu, target_cpu).tolist(),
        np.maximum(upper_memory, target_memory).tolist(),
    ]
    return [ContainerEstimate(*values) for values in zip(*columns, strict=True)]
