"""Bucket-weight storage for :class:`~kubescale.controllers.vpa.model.histogram.HistogramStore`
rows.

Why: a dense ``[rows, 176]`` float64 array costs 1,408 bytes per histogram, but a memory
histogram (one peak per aggregation interval) occupies one or two buckets over a day, and a CPU
histogram a few dozen. Contract: a row reads exactly as the dense upstream row would — every
bucket it never wrote is ``0.0`` — and every write lands on the same float64 element it would in
the dense array, so results stay bit-for-bit those of upstream's ``[]float64`` buckets.

Layout: a row has no storage until its first write; then it takes a slot in the *window* pool
(``window`` consecutive buckets starting at a per-row base bucket) when the written range fits,
else a slot in the *dense* pool (all buckets). A write outside a row's window first moves the row
to the dense pool (copying the window into place, zeros elsewhere), so a window row's buckets
outside its window were never written and really are zero. Pools grow by blocks of
``block_rows`` slots (no copying of existing blocks) and reuse released slots first.
"""

from __future__ import annotations

import numpy as np

from kubescale.controllers.vpa.model.go_math import FloatArray, IntArray

__all__ = ["BucketRows"]

_NO_STORAGE = -1
_DENSE = -2  # base value marking a dense-pool slot


def _by_block(slots: IntArray, block_rows: int) -> list[tuple[int, IntArray, IntArray]]:
    """``(block, positions in slots, offsets in the block)`` for each block ``slots`` touch:
    one sort instead of a mask per block, so small blocks stay cheap."""
    blocks, offsets = np.divmod(slots, block_rows)
    order = np.argsort(blocks, kind="stable")
    sorted_blocks = blocks[order]
    starts = np.flatnonzero(np.diff(sorted_blocks, prepend=-1))
    stops = np.append(starts[1:], order.size)
    return [
        (int(sorted_blocks[start]), order[start:stop], offsets[order[start:stop]])
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)
    ]


class _Pool:
    """Fixed-width float64 slots in blocks of ``block_rows``."""

    __slots__ = ("_blocks", "_free", "_next", "block_rows", "width")

    def __init__(self, width: int, block_rows: int) -> None:
        self.width = width
        self.block_rows = block_rows
        self._blocks: list[FloatArray] = []
        self._free: list[int] = []
        self._next = 0

    @property
    def nbytes(self) -> int:
        return sum(block.nbytes for block in self._blocks)

    def allocate(self) -> int:
        """A zeroed slot."""
        if self._free:
            slot = self._free.pop()
        else:
            slot = self._next
            self._next += 1
            if slot == len(self._blocks) * self.block_rows:
                self._blocks.append(np.zeros((self.block_rows, self.width), dtype=np.float64))
        self.view(slot).fill(0.0)
        return slot

    def release(self, slot: int) -> None:
        self._free.append(slot)

    def view(self, slot: int) -> FloatArray:
        view: FloatArray = self._blocks[slot // self.block_rows][slot % self.block_rows]
        return view

    def gather(self, slots: IntArray) -> FloatArray:
        """The weights of ``slots`` as a ``[len(slots), width]`` copy."""
        result = np.empty((slots.size, self.width), dtype=np.float64)
        for block, positions, offsets in _by_block(slots, self.block_rows):
            result[positions] = self._blocks[block][offsets]
        return result

    def add(self, slots: IntArray, columns: IntArray, values: FloatArray) -> FloatArray:
        """``slot[column] += value`` for distinct slots; the resulting weights."""
        result = np.empty(slots.size, dtype=np.float64)
        for block, positions, offsets in _by_block(slots, self.block_rows):
            weights = self._blocks[block]
            weights[offsets, columns[positions]] += values[positions]
            result[positions] = weights[offsets, columns[positions]]
        return result


class BucketRows:
    """Per-row bucket weights: window-pool or dense-pool slots (see the module docstring)."""

    __slots__ = ("_base", "_dense", "_slot", "_window", "buckets")

    def __init__(self, buckets: int, *, window: int, block_rows: int) -> None:
        self.buckets = buckets
        self._dense = _Pool(buckets, block_rows)
        self._window = _Pool(min(max(1, window), buckets), block_rows) if window else None
        self._slot = np.full(0, _NO_STORAGE, dtype=np.int32)
        self._base = np.full(0, _NO_STORAGE, dtype=np.int16)

    @property
    def nbytes(self) -> int:
        window = self._window.nbytes if self._window is not None else 0
        return self._dense.nbytes + window

    def ensure_rows(self, rows: int) -> None:
        """Room for row indices below ``rows``."""
        grow = rows - self._slot.size
        if grow > 0:
            self._slot = np.concatenate([self._slot, np.full(grow, _NO_STORAGE, np.int32)])
            self._base = np.concatenate([self._base, np.full(grow, _NO_STORAGE, np.int16)])

    def clear(self, row: int) -> None:
        """Drop the row's storage: all its buckets read 0.0 again."""
        slot, base = int(self._slot[row]), int(self._base[row])
        if slot == _NO_STORAGE:
            return
        if base == _DENSE:
            self._dense.release(slot)
        elif self._window is not None:
            self._window.release(slot)
        self._slot[row] = _NO_STORAGE
        self._base[row] = _NO_STORAGE

    def _stored(self, row: int) -> tuple[FloatArray | None, int]:
        """``(weights, first bucket)`` of the row's storage, ``(None, 0)`` without storage."""
        slot, base = int(self._slot[row]), int(self._base[row])
        if slot == _NO_STORAGE:
            return None, 0
        if base == _DENSE:
            return self._dense.view(slot), 0
        assert self._window is not None
        return self._window.view(slot), base

    def read(self, row: int, start: int, stop: int) -> FloatArray:
        """A copy of buckets ``[start, stop)`` (``0 <= start``, ``stop <= buckets``)."""
        result = np.zeros(max(0, stop - start), dtype=np.float64)
        weights, base = self._stored(row)
        if weights is None or stop <= start:
            return result
        low, high = max(start, base), min(stop, base + weights.size)
        if low < high:
            result[low - start : high - start] = weights[low - base : high - base]
        return result

    def weight(self, row: int, bucket: int) -> float:
        weights, base = self._stored(row)
        if weights is None or not base <= bucket < base + weights.size:
            return 0.0
        return float(weights[bucket - base])

    def writable(self, row: int, start: int, stop: int) -> tuple[FloatArray, int]:
        """``(weights, first bucket)`` of storage covering buckets ``[start, stop)``, made so
        (window slot or dense slot) first if needed."""
        weights, base = self._stored(row)
        if weights is not None and base <= start and stop <= base + weights.size:
            return weights, base
        pool = self._window
        if weights is None and pool is not None and stop - start <= pool.width:
            # Centre the written range in the window, kept inside [0, buckets).
            base = (start + stop - pool.width) // 2
            base = max(0, min(base, self.buckets - pool.width))
            self._slot[row] = pool.allocate()
            self._base[row] = base
            return pool.view(int(self._slot[row])), base
        slot = self._dense.allocate()
        dense = self._dense.view(slot)
        if weights is not None:
            dense[base : base + weights.size] = weights
            self.clear(row)
        self._slot[row] = slot
        self._base[row] = _DENSE
        return dense, 0

    def copy(self, source: int, target: int) -> None:
        self.clear(target)
        weights, base = self._stored(source)
        if weights is None:
            return
        copy, copy_base = self.writable(target, base, base + weights.size)
        assert copy_base == base
        copy[:] = weights

    def dense_rows(self, rows: IntArray) -> FloatArray:
        """The bucket weights of ``rows`` as a ``[len(rows), buckets]`` copy."""
        result = np.zeros((rows.size, self.buckets), dtype=np.float64)
        slots = self._slot[rows].astype(np.int64)
        bases = self._base[rows].astype(np.int64)
        dense = bases == _DENSE
        if dense.any():
            result[dense] = self._dense.gather(slots[dense])
        windowed = (bases >= 0) & (slots >= 0)
        if windowed.any() and self._window is not None:
            columns = bases[windowed][:, None] + np.arange(self._window.width)[None, :]
            where = np.flatnonzero(windowed)[:, None]
            result[where, columns] = self._window.gather(slots[windowed])
        return result

    def add_at(self, rows: IntArray, buckets: IntArray, values: FloatArray) -> FloatArray:
        """``weights[row][bucket] += value`` for distinct ``rows``; the resulting weights."""
        slots = self._slot[rows].astype(np.int64)
        bases = self._base[rows].astype(np.int64)
        width = self._window.width if self._window is not None else 0
        outside = (slots == _NO_STORAGE) | (
            (bases != _DENSE) & ((buckets < bases) | (buckets >= bases + width))
        )
        for index in np.flatnonzero(outside).tolist():
            bucket = int(buckets[index])
            self.writable(int(rows[index]), bucket, bucket + 1)
        result = np.empty(rows.size, dtype=np.float64)
        slots = self._slot[rows].astype(np.int64)
        bases = self._base[rows].astype(np.int64)
        dense = bases == _DENSE
        if dense.any():
            result[dense] = self._dense.add(slots[dense], buckets[dense], values[dense])
        windowed = ~dense
        if windowed.any() and self._window is not None:
            result[windowed] = self._window.add(
                slots[windowed], buckets[windowed] - bases[windowed], values[windowed]
            )
        return result
