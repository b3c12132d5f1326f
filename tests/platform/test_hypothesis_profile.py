"""The Hypothesis profiles of ``tests/conftest.py`` (issue 32.7): under ``ci``, the default, a
property runs at most ``CI_MAX_EXAMPLES`` examples even where its ``@settings`` asks for more;
under ``thorough`` it runs the count it asks for; one marked ``full_examples`` always runs
its own count. Checked by running a small test module in a
pytest run of its own (``pytester``), with this suite's collection hook, and counting calls."""

from __future__ import annotations

import re

import pytest
from hypothesis import settings

from tests.conftest import CI_MAX_EXAMPLES, ci_examples

pytest_plugins = ["pytester"]

_CONFTEST = (
    "from tests.conftest import pytest_collection_modifyitems, pytest_configure  # noqa: F401\n"
)

_COUNTING = """
from hypothesis import given, settings, strategies as st

import pytest

CALLS = {"many": 0, "few": 0, "marked": 0}

@settings(max_examples=300, database=None)
@given(st.integers())
def test_many(x):
    CALLS["many"] += 1

@settings(max_examples=12, database=None)
@given(st.integers())
def test_few(x):
    CALLS["few"] += 1

@pytest.mark.full_examples
@settings(max_examples=150, database=None)
@given(st.integers())
def test_marked(x):
    CALLS["marked"] += 1

def test_zz_counts():
    print("COUNTS", CALLS["many"], CALLS["few"], CALLS["marked"])
"""


@pytest.mark.parametrize(
    ("asked", "profile", "runs"),
    [
        (300, "ci", CI_MAX_EXAMPLES),  # capped: min(300, 100)
        (100, "ci", 100),  # Hypothesis's default count, unchanged
        (12, "ci", 12),  # a property asking for fewer keeps its count
        (300, "thorough", 300),  # every property its own count
    ],
)
def test_ci_examples(asked: int, profile: str, runs: int) -> None:
    assert ci_examples(asked, profile) == runs


def _counts(pytester: pytest.Pytester, *args: str) -> tuple[int, int, int]:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(_CONFTEST)
    pytester.makepyfile(test_counting=_COUNTING)
    profile = settings.get_current_profile_name()
    try:
        result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-s", *args)
    finally:
        settings.load_profile(profile)  # the run loads its own; the profile is process-wide
    result.assert_outcomes(passed=4)
    (counts,) = [
        m for line in result.outlines if (m := re.search(r"COUNTS (\d+) (\d+) (\d+)", line))
    ]
    return int(counts[1]), int(counts[2]), int(counts[3])


def test_the_ci_profile_caps_a_property_that_asks_for_more(pytester: pytest.Pytester) -> None:
    # the full_examples property keeps its 150
    assert _counts(pytester, "--hypothesis-profile", "ci") == (CI_MAX_EXAMPLES, 12, 150)


def test_the_thorough_profile_runs_the_count_asked_for(pytester: pytest.Pytester) -> None:
    assert _counts(pytester, "--hypothesis-profile", "thorough") == (300, 12, 150)
