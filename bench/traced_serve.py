"""``kubescale serve`` under ``tracemalloc``, for finding where memory is held (issue 29).

``bench/issue29_memory.py`` starts serve through this file. Allocations are traced from the start
(one frame each); each ``SIGUSR1`` takes a snapshot and writes, to ``KUBESCALE_TRACE_OUT`` with
the snapshot's number appended (``.0``, ``.1``, …), the traced total, the files and the lines
holding the most memory, and the lines that grew most since the previous snapshot. Only for
measuring: tracing slows serve down and its own bookkeeping is not counted in the figures.
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.cli.main import main as kubescale_main

OUT = Path(os.environ.get("KUBESCALE_TRACE_OUT", "serve-trace.txt"))


def _short(name: str) -> str:
    for marker in ("/kubescale/", "/site-packages/", "/lib/python"):
        if marker in name:
            return name[name.index(marker) + 1 :]
    return name


class Tracer:
    def __init__(self) -> None:
        self.count = 0
        self.previous: tracemalloc.Snapshot | None = None

    def snapshot(self, *_: object) -> None:
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        current, _peak = tracemalloc.get_traced_memory()
        lines = [f"traced MiB: {current / 2**20:.1f}", "", "by file (MiB, blocks):"]
        for stat in snapshot.statistics("filename")[:40]:
            where = _short(stat.traceback[0].filename)
            lines.append(f"{stat.size / 2**20:9.2f} {stat.count:9d} {where}")
        lines += ["", "by line (MiB, blocks):"]
        for stat in snapshot.statistics("lineno")[:60]:
            frame = stat.traceback[0]
            lines.append(
                f"{stat.size / 2**20:9.2f} {stat.count:9d} {_short(frame.filename)}:{frame.lineno}"
            )
        if self.previous is not None:
            lines += ["", "grown since the previous snapshot, by line (KiB, blocks):"]
            for diff in snapshot.compare_to(self.previous, "lineno")[:40]:
                frame = diff.traceback[0]
                lines.append(
                    f"{diff.size_diff / 1024:9.1f} {diff.count_diff:9d} "
                    f"{_short(frame.filename)}:{frame.lineno}"
                )
        Path(f"{OUT}.{self.count}").write_text("\n".join(lines) + "\n")
        self.count += 1
        self.previous = snapshot


def main() -> int:
    tracemalloc.start(1)
    tracer = Tracer()
    signal.signal(signal.SIGUSR1, tracer.snapshot)
    return kubescale_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
