"""Two real ``kubescale serve`` replicas; the leader is frozen past its lease, resumed, repeatedly.

The defect this guards (issue "split brain after a freeze"): a replica paused past its renew
deadline logged "leadership lost" but its loops kept running and writing while the other replica
held the Lease, and its elector never campaigned again. Here each replica runs the VPA
recommender (a leader-only loop that writes a checkpoint every iteration) with its own bearer
token, so the in-process API server can tell whose write it is. At every write of a leader-only
resource the test looks at the Lease: the writer must be its holder. The leader is frozen with
SIGSTOP for twice the lease duration and resumed with SIGCONT, three times; each time the other
replica must take over, and a replica frozen before must be able to lead again.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

from kubescale.kube.resources import LEASES
from kubescale.sim.apiserver.request_log import RequestRecord
from kubescale.sim.apiserver.server import ApiServer
from tests.controllers.vpa.recommender.test_recommender_loop_serve import _objects

from ..conftest import only_components

LEASE_NAME = "kubescale"
LEASE_DURATION = 4.5
"""With the 1.5 s renew deadline: a 3 s fence (production: 15 s - 10 s = 5 s) for a gated write to
reach the API server, which runs in this test's own process and is slow under load."""
GATED = {"verticalpodautoscalercheckpoints", "verticalpodautoscalers"}
GUARD = 300.0
"""Seconds a wait for progress (a replica up, a takeover, a first write) lasts at most: a hang
guard, not a bound on how fast — the property is that no replica but the holder writes; at load
~18 a takeover took longer than the 4 x lease bound it had (issue 32.7)."""
WRITES = {"create", "update", "patch", "delete"}


@dataclass
class Replica:
    token: str
    process: subprocess.Popen[str]
    identity: str = ""
    log: list[str] = field(default_factory=list)


def _start(cert_dir: Path, kubeconfig: Path, token: str, stderr: IO[str]) -> Replica:
    argv = [
        sys.executable, "-m", "kubescale", "serve",
        "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
        "--tls-cert-file", str(cert_dir / "serverCert.pem"),
        "--tls-private-key", str(cert_dir / "serverKey.pem"),
        "--client-ca-file", str(cert_dir / "caCert.pem"),
        "--kubeconfig", str(kubeconfig), *only_components("vpa-recommender"),
        "--leader-elect-lease-duration", f"{LEASE_DURATION}s",
        "--leader-elect-renew-deadline", "1500ms", "--leader-elect-retry-period", "300ms",
        "--recommender-interval", "200ms", "--log-format", "json",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=stderr, text=True)
    return Replica(token=token, process=process)


def _identities(path: Path) -> Iterator[str]:
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "attempting to acquire leader lease" and entry.get("id"):
            yield str(entry["id"])


async def _until(predicate: object, within: float) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs SIGSTOP/SIGCONT")
async def test_a_frozen_leader_never_writes_after_losing_the_lease(
    cert_dir: Path, tmp_path: Path
) -> None:
    async with ApiServer() as api:
        _objects(api)

        def holder() -> str:
            lease = api.store.peek(LEASES, LEASE_NAME, "kube-system")
            return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

        replicas: list[Replica] = []
        writes: dict[str, int] = {}
        violations: list[str] = []

        def watch(record: RequestRecord) -> None:
            if record.verb not in WRITES or record.resource not in GATED:
                return
            writer = next((r for r in replicas if r.token == record.user), None)
            assert writer is not None, record
            writes[writer.token] = writes.get(writer.token, 0) + 1
            if not writer.identity:  # identities are read from the logs as they come
                return
            if holder() != writer.identity:
                violations.append(f"{record} by {writer.identity} while {holder()!r} led")

        api.context.observers.append(watch)
        logs = [tmp_path / f"replica-{i}.log" for i in range(2)]
        for i, log in enumerate(logs):
            kubeconfig = tmp_path / f"kubeconfig-{i}"
            api.write_kubeconfig(kubeconfig, token=f"replica-{i}")
            replicas.append(_start(cert_dir, kubeconfig, f"replica-{i}", log.open("w")))
        try:

            def known() -> bool:
                for replica, log in zip(replicas, logs, strict=True):
                    replica.identity = replica.identity or next(_identities(log), "")
                return all(r.identity for r in replicas)

            await _until(known, GUARD)
            await _until(lambda: holder() in {r.identity for r in replicas}, GUARD)
            led_by = {holder()}
            for _ in range(3):
                leader = next(r for r in replicas if r.identity == holder())
                other = next(r for r in replicas if r is not leader)
                before = writes.get(other.token, 0)
                os.kill(leader.process.pid, signal.SIGSTOP)
                try:
                    # the other replica takes over once the frozen one's lease has expired
                    await _until(lambda other=other: holder() == other.identity, GUARD)
                    await _until(
                        lambda other=other, before=before: writes.get(other.token, 0) > before,
                        GUARD,
                    )
                    await asyncio.sleep(LEASE_DURATION)  # frozen well past its lease
                finally:
                    os.kill(leader.process.pid, signal.SIGCONT)
                led_by.add(holder())
                await asyncio.sleep(LEASE_DURATION)  # the resumed replica sees it lost
                assert leader.process.poll() is None  # alive, a standby again
            assert led_by == {r.identity for r in replicas}  # a frozen replica led again
            assert all(writes.get(r.token, 0) > 0 for r in replicas)
            assert violations == []
        finally:
            for replica in replicas:
                if replica.process.poll() is None:
                    replica.process.send_signal(signal.SIGCONT)
                    replica.process.terminate()
            for replica in replicas:
                try:
                    replica.process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    replica.process.kill()
