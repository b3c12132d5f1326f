"""Observers are told in issue order (issue 30): :class:`IssueOrder`, the executor's reorder
buffer. Whatever order the answers of intents in flight come in, each is told once every intent
issued before it has been; one given back with nothing to tell (cancelled, failed) holds back
nothing; at most the intents in flight are held."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kubescale.kube.resources import PODS
from kubescale.plans.executor import IssueOrder
from kubescale.plans.intents import DeleteObject, Intent, ObjectRef


def _intent(index: int) -> Intent:
    return DeleteObject(actor="test", target=ObjectRef(PODS, "default", f"p{index}"))


@given(
    answers=st.integers(1, 12).flatmap(lambda n: st.permutations(range(n))),
    silent=st.sets(st.integers(0, 11)),
)
def test_told_in_issue_order_whatever_the_answer_order(
    answers: list[int], silent: set[int]
) -> None:
    told: list[tuple[Intent, str]] = []
    order = IssueOrder(lambda intent, outcome: told.append((intent, outcome)))
    turns = [order.issue() for _ in answers]
    assert turns == list(range(len(answers)))
    for count, turn in enumerate(answers, start=1):
        order.answered(turn, None if turn in silent else (_intent(turn), f"o{turn}"))
        # Told: exactly the longest prefix of turns all answered so far.
        back = set(answers[:count])
        prefix = next((t for t in range(len(answers)) if t not in back), len(answers))
        assert told == [(_intent(t), f"o{t}") for t in range(prefix) if t not in silent]
        assert order.in_flight == len(answers) - prefix
    assert order.in_flight == 0
