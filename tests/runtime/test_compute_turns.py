"""Turns for CPU-bound handlers (:mod:`kubescale.runtime.compute_turns`): one computes at a
time, in arrival order, the loop gets a pass between two computations, and requests beyond the
queue are refused at once."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubescale.runtime.compute_turns import ComputeTurns


async def _compute(
    turns: ComputeTurns, name: str, trace: list[str], *, other: bool = False
) -> bool:
    async with turns.turn() as admitted:
        if not admitted:
            trace.append(f"refused {name}")
            return False
        trace.append(f"start {name}")
        if other:
            # Something becomes ready while this computes (as a socket read of a webhook
            # request would): it must run before the next computation, not after all of them.
            asyncio.get_running_loop().call_soon(trace.append, "other")
        trace.append(f"end {name}")
        return True


async def test_the_loop_gets_a_pass_between_two_computations() -> None:
    # Three handlers ready in the same loop iteration, as 3 filter bodies read at once.
    # Without turns they run back to back and "other" comes after all three:
    #   start a, end a, start b, end b, start c, end c, other
    # With turns, b's turn resumes in the next iteration, after "other".
    turns = ComputeTurns(max_waiting=8)
    trace: list[str] = []
    results = await asyncio.gather(
        _compute(turns, "a", trace, other=True),
        _compute(turns, "b", trace),
        _compute(turns, "c", trace),
    )
    assert list(results) == [True, True, True]
    assert trace == ["start a", "end a", "other", "start b", "end b", "start c", "end c"]
    assert (turns.running, turns.waiting) == (0, 0)


async def test_beyond_max_waiting_is_refused_at_once() -> None:
    # 1 computing + max_waiting 2 waiting: the 4th and 5th are refused without waiting.
    turns = ComputeTurns(max_waiting=2)
    trace: list[str] = []
    results = await asyncio.gather(*(_compute(turns, n, trace) for n in "abcde"))
    assert results == [True, True, True, False, False]
    # a holds the turn from the first pass, b and c queue, d and e are refused in that pass.
    assert trace == [
        "refused d", "refused e", "start a", "end a", "start b", "end b", "start c", "end c",
    ]  # fmt: skip
    assert turns.refused == 2


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    turns = ComputeTurns(max_waiting=1)
    async with turns.turn() as first:
        assert first
        waiter = asyncio.create_task(_compute(turns, "b", []))
        await asyncio.sleep(0)
        assert turns.waiting == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert turns.waiting == 0
        # the place is free again: one more may wait
        later = asyncio.create_task(_compute(turns, "c", []))
        await asyncio.sleep(0)
        assert turns.waiting == 1
    assert await later is True
    assert (turns.running, turns.waiting) == (0, 0)


async def test_a_waiter_cancelled_as_its_turn_came_passes_it_on() -> None:
    turns = ComputeTurns(max_waiting=2)
    trace: list[str] = []
    holder = turns.turn()
    assert await holder.__aenter__() is True
    b = asyncio.create_task(_compute(turns, "b", trace))
    c = asyncio.create_task(_compute(turns, "c", trace))
    await asyncio.sleep(0)
    assert turns.waiting == 2
    await holder.__aexit__(None, None, None)  # b's turn: handed over, not yet resumed
    b.cancel()  # cancelled in the same iteration
    with pytest.raises(asyncio.CancelledError):
        await b
    assert await c is True
    assert trace == ["start c", "end c"]
    assert (turns.running, turns.waiting) == (0, 0)


@settings(max_examples=60, deadline=None)
@given(
    max_waiting=st.integers(0, 4),
    plan=st.lists(st.tuples(st.integers(0, 3), st.booleans()), min_size=1, max_size=12),
)
def test_never_more_than_one_computes_and_nothing_is_lost(
    max_waiting: int, plan: list[tuple[int, bool]]
) -> None:
    """Requests arriving after ``delay`` loop passes, some cancelled while waiting: at most one
    computes at once, at most ``max_waiting`` wait, every admitted one finishes or was
    cancelled, and the turns are all given back."""

    async def scenario() -> None:
        turns = ComputeTurns(max_waiting=max_waiting)
        peak = {"running": 0, "waiting": 0}

        async def request(delay: int, cancel_me: bool) -> str:
            for _ in range(delay):
                await asyncio.sleep(0)
            async with turns.turn() as admitted:
                if not admitted:
                    return "refused"
                peak["running"] = max(peak["running"], turns.running)
                for _ in range(2):  # a computation that yields (as an await inside would)
                    await asyncio.sleep(0)
                return "done"

        def watch() -> None:
            peak["waiting"] = max(peak["waiting"], turns.waiting)

        tasks = [asyncio.create_task(request(d, c)) for d, c in plan]
        for task, (_, cancel_me) in zip(tasks, plan, strict=True):
            watch()
            await asyncio.sleep(0)
            if cancel_me:
                task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        assert peak["running"] <= 1
        assert peak["waiting"] <= max_waiting
        for outcome in outcomes:
            assert outcome in ("done", "refused") or isinstance(outcome, asyncio.CancelledError)
        assert (turns.running, turns.waiting) == (0, 0)

    asyncio.run(scenario())
