"""LowNodeUtilization's classification over many nodes at once, and "would this pod make the
node over-utilized" for every candidate node in one pass — for the scheduler extender, which
must answer for 5,000 nodes in a few milliseconds.

The arithmetic is :mod:`kubescale.scheduling.utilization_math`'s, element by element on float64
arrays (the same IEEE operations as Python floats, so the results are bit-for-bit those of
:func:`..strategies.node_utilization.lnu_classification`; a property test holds the two
together):

* ``percent = used / capacity × 100`` where the capacity is positive, else 0 (a resource the
  node does not offer has capacity 0 here);
* static thresholds as given; deviation thresholds from ``math.fsum`` of each column / N;
* under = not cordoned ∧ every threshold resource <= low; over = not under ∧ some resource > high.

"Over after placement" (:func:`lnu_over_after`) adds the pod's requests (and one pod) to each
candidate's usage. With deviation thresholds the average moves with the pod; it is updated
incrementally and, for a candidate whose verdict lies within rounding of a threshold, recomputed
exactly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubescale.objects.node import Node, Taint
from kubescale.objects.views import Meta, spec_of

from .policy.utilization_args import HighNodeUtilizationArgs, LowNodeUtilizationArgs

__all__ = ["LnuVector", "UtilizationArrays", "hnu_under", "lnu_over_after", "lnu_vector"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
_NEAR = 1e-9


@dataclass
class UtilizationArrays:
    """Usage and capacity of the descheduler's nodes for a list of resources."""

    names: list[str]
    resources: list[str]
    used: IntArray
    """``[node, resource]``: cpu in millicores, the rest in whole units."""
    capacity: IntArray
    """``[node, resource]``; 0 where the node does not offer the resource."""
    unschedulable: BoolArray
    taints: list[Sequence[Taint]]

    def __post_init__(self) -> None:
        self.index = {name: i for i, name in enumerate(self.names)}
        self.column = {name: j for j, name in enumerate(self.resources)}

    @classmethod
    def from_usage(
        cls,
        *,
        nodes: Sequence[Node],
        usage: Mapping[str, Mapping[str, int]],
        capacity: Mapping[str, Mapping[str, int]],
        resources: Sequence[str],
    ) -> UtilizationArrays:
        names = [str(Meta(n).raw["name"]) for n in nodes]
        return cls(
            names=names,
            resources=list(resources),
            used=np.array(
                [[int(usage[n].get(r, 0)) for r in resources] for n in names], dtype=np.int64
            ).reshape(len(names), len(resources)),
            capacity=np.array(
                [[int(capacity[n].get(r, 0)) for r in resources] for n in names], dtype=np.int64
            ).reshape(len(names), len(resources)),
            unschedulable=np.array(
                [bool(spec_of(n).get("unschedulable")) for n in nodes], dtype=np.bool_
            ),
            taints=[list(spec_of(n).get("taints") or ()) for n in nodes],
        )


def _percent(used: npt.NDArray[Any], capacity: IntArray) -> FloatArray:
    cap = capacity.astype(np.float64)
    out = np.zeros(used.shape, dtype=np.float64)
    np.divide(used.astype(np.float64), cap, out=out, where=capacity > 0)
    result: FloatArray = out * 100
    return np.where(capacity > 0, result, 0.0)


@dataclass(frozen=True)
class LnuVector:
    """One LowNodeUtilization plugin's view of the nodes."""

    columns: list[int]
    """The threshold resources' columns in the arrays."""
    percent: FloatArray
    low: FloatArray
    high: FloatArray
    under: BoolArray
    over: BoolArray
    sums: FloatArray
    """``math.fsum`` of each percent column (deviation thresholds)."""

    @property
    def under_count(self) -> int:
        return int(self.under.sum())


def _thresholds(
    args: LowNodeUtilizationArgs, names: Sequence[str], sums: FloatArray, count: int
) -> tuple[FloatArray, FloatArray]:
    low = np.array([args.thresholds[r] for r in names], dtype=np.float64)
    high = np.array([args.target_thresholds[r] for r in names], dtype=np.float64)
    if not args.use_deviation_thresholds:
        return low, high
    average = sums / count if count else np.zeros(len(names))
    return np.clip(average - low, 0.0, 100.0), np.clip(average + high, 0.0, 100.0)


def lnu_vector(arrays: UtilizationArrays, args: LowNodeUtilizationArgs) -> LnuVector:
    """Classify every node (module docstring)."""
    names = list(args.thresholds)
    columns = [arrays.column[r] for r in names]
    percent = _percent(arrays.used[:, columns], arrays.capacity[:, columns])
    sums = np.array([math.fsum(percent[:, k].tolist()) for k in range(len(names))])
    low, high = _thresholds(args, names, sums, len(arrays.names))
    under = ~arrays.unschedulable & np.all(percent <= low, axis=1)
    over = ~under & np.any(percent > high, axis=1)
    return LnuVector(
        columns=columns, percent=percent, low=low, high=high, under=under, over=over, sums=sums
    )


def lnu_over_after(
    arrays: UtilizationArrays,
    vector: LnuVector,
    args: LowNodeUtilizationArgs,
    *,
    candidates: Sequence[int],
    added: Sequence[int],
) -> BoolArray:
    """For each candidate node index: over-utilized with ``added`` (the pod's usage per
    threshold resource) on it, and the plugin would act (at least one under node left, more
    than ``numberOfNodes``, not every node under). With deviation thresholds the plugin is
    assumed to act."""
    idx = np.asarray(candidates, dtype=np.int64)
    if idx.size == 0:
        return np.zeros(0, dtype=np.bool_)
    extra = np.asarray(added, dtype=np.int64)
    columns = np.asarray(vector.columns, dtype=np.int64)
    cap = arrays.capacity[np.ix_(idx, columns)]
    before = vector.percent[idx]
    after = _percent(arrays.used[np.ix_(idx, columns)] + extra, cap)
    count = len(arrays.names)
    if not args.use_deviation_thresholds:
        over = np.any(after > vector.high, axis=1)
        under_after = ~arrays.unschedulable[idx] & np.all(after <= vector.low, axis=1)
        remaining = vector.under_count - (vector.under[idx] & ~under_after).astype(np.int64)
        acts = (remaining > 0) & (remaining > args.number_of_nodes) & (remaining < count)
        result: BoolArray = over & acts
        return result
    targets = np.array([args.target_thresholds[r] for r in args.thresholds], dtype=np.float64)
    sums = vector.sums + (after - before)
    high = np.clip(sums / count + targets, 0.0, 100.0)
    moved: BoolArray = np.asarray(np.any(after > high, axis=1), dtype=np.bool_)
    near = np.any(np.abs(after - high) <= _NEAR * np.maximum(1.0, np.abs(high)), axis=1)
    for k in np.nonzero(near)[0].tolist():
        row = int(idx[k])
        exact = [
            math.fsum(
                [
                    *vector.percent[:row, j].tolist(),
                    float(after[k, j]),
                    *vector.percent[row + 1 :, j].tolist(),
                ]
            )
            for j in range(len(vector.columns))
        ]
        exact_high = np.clip(np.array(exact) / count + targets, 0.0, 100.0)
        moved[k] = bool(np.any(after[k] > exact_high))
    return moved


def hnu_under(arrays: UtilizationArrays, args: HighNodeUtilizationArgs) -> BoolArray:
    """HighNodeUtilization's under-utilized nodes (cordoned ones included)."""
    names = list(args.thresholds)
    columns = [arrays.column[r] for r in names]
    percent = _percent(arrays.used[:, columns], arrays.capacity[:, columns])
    low = np.array([args.thresholds[r] for r in names], dtype=np.float64)
    result: BoolArray = np.asarray(np.all(percent <= low, axis=1), dtype=np.bool_)
    return result
