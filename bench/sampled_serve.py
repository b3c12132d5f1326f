"""``kubescale serve`` with a stack sampler, for profiling a steady minute (issue 29).

``scale_cluster.py --profile`` starts serve through this file. ``SIGUSR1`` starts sampling the
stack of every thread (worker threads prefixed by name) every ``KUBESCALE_SAMPLE_SECONDS``
(default 5 ms, from ``sys._current_frames()``, like py-spy without attaching); ``SIGUSR2``
stops and writes, to the file named by ``KUBESCALE_PROFILE_OUT``, the functions most often on
top of the stack (self samples) and on the stack at all (cumulative samples). Only for
profiling runs: the sampler's own CPU is counted in the process's.
"""

from __future__ import annotations

import collections
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kubescale.cli.main import main as kubescale_main

INTERVAL = float(os.environ.get("KUBESCALE_SAMPLE_SECONDS", "0.005"))
TOP = int(os.environ.get("KUBESCALE_PROFILE_TOP", "40"))
"""How many functions each list shows (the cumulative list twice as many)."""
COMPONENTS = (
    ("/controllers/autoscaler/", "cluster-autoscaler"),
    ("/controllers/hpa/", "hpa-controller"),
    ("/controllers/descheduler/", "descheduler"),
    ("/controllers/vpa/recommender/", "vpa-recommender"),
    ("/controllers/vpa/updater/", "vpa-updater"),
    ("/controllers/vpa/", "vpa-other"),
    ("/webhook/", "webhook"),
    ("/extender/", "scheduler-extender"),
    ("/kube/informer.py", "informers"),
    ("/kube/leader_election.py", "leases"),
)
"""A sample's component: the outermost frame of its stack in one of these paths."""
OUT = Path(os.environ.get("KUBESCALE_PROFILE_OUT", "serve-profile.txt"))


class Sampler:
    def __init__(self, thread_id: int) -> None:
        self.thread_id = thread_id
        self.own: collections.Counter[str] = collections.Counter()
        self.cumulative: collections.Counter[str] = collections.Counter()
        self.components: collections.Counter[str] = collections.Counter()
        """Busy samples by component (module constant ``COMPONENTS``; worker threads by
        their name, ``decide-<component>``); idle samples are not counted."""
        self.samples = 0
        self.running = threading.Event()
        self.started = 0.0
        self.thread_cpu: dict[int, float] = {}
        """CPU-s of each thread (by native id) when sampling started (``/proc``)."""

    @staticmethod
    def _where(frame: FrameType) -> str:
        code = frame.f_code
        name = code.co_filename
        for marker in ("/kubescale/", "/site-packages/", "/lib/python"):
            if marker in name:
                name = name[name.index(marker) + 1 :]
                break
        return f"{name}:{code.co_firstlineno} {code.co_name}"

    def _loop(self) -> None:
        me = threading.get_ident()
        while self.running.is_set():
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                # the main thread as is; worker threads (off-loop work) prefixed by name
                prefix = "" if ident == self.thread_id else f"[{names.get(ident, ident)}] "
                if ident == self.thread_id:
                    self.samples += 1
                self.own[prefix + self._where(frame)] += 1
                seen: set[str] = set()
                walk: FrameType | None = frame
                component = ""
                while walk is not None:
                    where = prefix + self._where(walk)
                    if where not in seen:
                        seen.add(where)
                        self.cumulative[where] += 1
                    for marker, name in COMPONENTS:
                        if marker in walk.f_code.co_filename:
                            component = name  # the outermost one wins
                            break
                    walk = walk.f_back
                if not _idle(frame):
                    thread = names.get(ident, "") if ident != self.thread_id else ""
                    self.components[thread or component or "other (I/O, event loop)"] += 1
            time.sleep(INTERVAL)

    def start(self, *_: object) -> None:
        if not self.running.is_set():
            self.started = time.monotonic()
            self.thread_cpu = _thread_cpu()
            self.running.set()
            threading.Thread(target=self._loop, daemon=True).start()

    def stop(self, *_: object) -> None:
        self.running.clear()
        cpu = _thread_cpu()
        names = {t.native_id: t.name for t in threading.enumerate()}
        spent = {
            names.get(tid, f"thread {tid}"): seconds - self.thread_cpu.get(tid, 0.0)
            for tid, seconds in cpu.items()
        }
        lines = [
            f"samples: {self.samples} over {time.monotonic() - self.started:.1f} s "
            f"every {INTERVAL * 1000:.0f} ms (every thread; the main thread idles in select,"
            " workers [name] in queue waits)",
            "",
        ]
        lines += ["CPU-s by thread while sampling (/proc/self/task/*/stat, utime + stime):"]
        lines += [f"{v:7.2f} {k}" for k, v in sorted(spent.items(), key=lambda kv: -kv[1])]
        lines += [""]
        lines += ["busy samples by component (outermost kubescale frame; workers by thread):"]
        lines += [f"{n:7d} {where}" for where, n in self.components.most_common()]
        lines += ["", "self samples:"]
        lines += [f"{n:7d} {where}" for where, n in self.own.most_common(TOP)]
        lines += ["", "cumulative samples:"]
        lines += [f"{n:7d} {where}" for where, n in self.cumulative.most_common(2 * TOP)]
        OUT.write_text("\n".join(lines) + "\n")


def _thread_cpu() -> dict[int, float]:
    """CPU-s (user + system) of each thread of this process, by native id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended meanwhile
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _idle(frame: FrameType) -> bool:
    """The thread waits: the event loop in its select, a worker on its queue."""
    code = frame.f_code
    return (
        (code.co_name == "run" and code.co_filename.endswith("asyncio/runners.py"))
        or (code.co_name == "_work" and code.co_filename.endswith("runtime/off_loop.py"))
        or code.co_name in ("select", "poll", "wait")
    )


def main() -> int:
    sampler = Sampler(threading.get_ident())
    signal.signal(signal.SIGUSR1, sampler.start)
    signal.signal(signal.SIGUSR2, sampler.stop)
    return kubescale_main(sys.argv[1:])


if __name__ == "__main__":
    raise SystemExit(main())
