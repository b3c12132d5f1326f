"""Randomized fault runs: whatever interleaving of writes, dropped watches, compactions (410)
and 5xx storms, the informer ends as an exact mirror of the server, and its handlers saw every
change exactly once (no duplicate ADD, no no-op UPDATE, no unknown DELETE)."""

from __future__ import annotations

import asyncio
import random
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubescale.kube.informer import Informer
from kubescale.kube.resources import CONFIG_MAPS
from kubescale.sim.apiserver.server import ApiServer

from .conftest import FAST_INFORMER, new_client
from .informer_checks import HandlerLog, assert_mirrors
from .objects import config_map

_NAMES = ["a", "b", "c", "d"]

_op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(_NAMES)),
    st.tuples(st.just("write"), st.sampled_from(_NAMES)),
    st.tuples(st.just("delete"), st.sampled_from(_NAMES)),
    st.tuples(st.just("drop")),
    st.tuples(st.just("compact")),
    st.tuples(st.just("watch_5xx"), st.integers(1, 4)),
    st.tuples(st.just("list_5xx"), st.integers(1, 8)),
    st.tuples(st.just("pause"), st.sampled_from([0.0, 0.005, 0.02])),
)


def _apply(server: ApiServer, op: tuple[Any, ...]) -> None:
    kind = op[0]
    store, faults = server.store, server.faults
    if kind == "write":
        name = op[1]
        current = store.peek(CONFIG_MAPS, name, "default")
        if current is None:
            store.create(config_map(name, data={"v": "0"}))
        else:
            updated = dict(current)
            updated["data"] = {"v": str(int(current["data"]["v"]) + 1)}
            store.update(updated)
    elif kind == "delete":
        if store.peek(CONFIG_MAPS, op[1], "default") is not None:
            store.delete(CONFIG_MAPS, op[1], "default")
    elif kind == "drop":
        faults.drop_watches("configmaps")
    elif kind == "compact":
        faults.expire_history()
        faults.drop_watches("configmaps")
    elif kind == "watch_5xx":
        faults.add(verb="watch", resource="configmaps", status=500, count=op[1])
        faults.drop_watches("configmaps")
    elif kind == "list_5xx":
        faults.add(verb="list", resource="configmaps", status=503, count=op[1])


async def _fault_run(ops: list[tuple[Any, ...]], seed: int) -> None:
    rng = random.Random(seed)
    async with ApiServer(bookmark_interval=0.1) as server:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "kubeconfig"
            server.write_kubeconfig(path)
            client = await new_client(path, seed=seed)
            informer: Informer[Any] = Informer(
                client=client, resource=CONFIG_MAPS, settings=FAST_INFORMER, rng=rng
            )
            log = HandlerLog()
            informer.add_handlers(log.handlers())
            try:
                informer.start()
                await informer.wait_synced(within=5)
                for op in ops:
                    if op[0] == "pause":
                        await asyncio.sleep(op[1])
                    else:
                        _apply(server, op)
                        await asyncio.sleep(rng.choice([0, 0, 0.001, 0.003]))
                server.faults.clear()
                await assert_mirrors(client, informer, log=log)
            finally:
                await informer.stop()
                await client.close()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(_op, min_size=4, max_size=30), seed=st.integers(0, 2**16))
@example(
    ops=[
        ("write", "a"),
        ("write", "b"),
        ("compact",),
        ("write", "c"),
        ("watch_5xx", 3),
        ("write", "a"),
        ("delete", "b"),
        ("list_5xx", 6),
        ("compact",),
        ("write", "b"),
        ("drop",),
        ("delete", "a"),
    ],
    seed=1,
)
def test_random_faults_keep_an_exact_mirror(ops: list[tuple[Any, ...]], seed: int) -> None:
    asyncio.run(_fault_run(ops, seed))
