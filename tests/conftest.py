"""Fixtures shared by every topic's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kubescale.cli.main import main
from kubescale.components import REGISTRY
from tests.rendering.chromium import CHROMIUM, SKIP_REASON, Chromium, session_browser

# Hypothesis profiles (issue 32.7: the suite within ~10 minutes on a loaded 2-core machine).
# ``ci``, the default, runs each property with at most CI_MAX_EXAMPLES examples (Hypothesis's
# own default count; a property that asks for fewer keeps its count); ``thorough`` runs each
# with the count its @settings names (200-500 for the input-space-heavy ones). Pick one with
# Hypothesis's option: ``pytest --hypothesis-profile thorough``. Both run without deadlines
# and without the too_slow health check: a loaded machine is slow, not wrong (the guide: no
# wall-clock bounds in tests). Each property's examples still come from Hypothesis's database
# first, so a failure found once is replayed on every later run.
CI_MAX_EXAMPLES = 100
_LOAD_PROOF = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", _LOAD_PROOF, max_examples=CI_MAX_EXAMPLES)
settings.register_profile("thorough", _LOAD_PROOF)
settings.load_profile("ci")


def ci_examples(asked: int, profile: str) -> int:
    """How many examples a property that asks for ``asked`` runs under ``profile``."""
    return min(asked, CI_MAX_EXAMPLES) if profile == "ci" else asked


FULL_EXAMPLES = "full_examples"
"""A property marked ``@pytest.mark.full_examples`` keeps its own count under ``ci`` too: one
whose planted bug was shown to slip through at the capped count (issue 32.7's check)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{FULL_EXAMPLES}: the property runs its own max_examples under every profile"
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under the ``ci`` profile, cap each property's ``@settings(max_examples=…)`` (an
    explicit count outranks any profile in Hypothesis, so the cap is applied here)."""
    profile = settings.get_current_profile_name()
    for item in items:
        test = getattr(item, "function", None)
        if test is None or not hasattr(test, "hypothesis"):
            continue
        if item.get_closest_marker(FULL_EXAMPLES) is not None:
            continue
        # where @given keeps the test's settings (read when the test runs): fail loudly, not
        # silently run uncapped, if a Hypothesis release moves it
        own: settings = test._hypothesis_internal_use_settings
        capped = ci_examples(own.max_examples, profile)
        if capped != own.max_examples:
            test._hypothesis_internal_use_settings = settings(own, max_examples=capped)


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving certificate for ``kubescale.kube-system`` (``kubescale certs``)."""
    out = tmp_path_factory.mktemp("certs")
    argv = ["certs", "--service", "kubescale", "--namespace", "kube-system", "--out", str(out)]
    assert main([*argv, "--key-type", "ecdsa"]) == 0
    return out


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chromium]:
    """One headless Chromium for the session (tests/rendering/chromium.py); each test opens its
    page in a context of its own. A test using it skips where Chromium is not installed."""
    if CHROMIUM is None:
        pytest.skip(SKIP_REASON)
    yield from session_browser(tmp_path_factory.mktemp("chromium"))


def only_components(*names: str) -> list[str]:
    """``serve`` flags that turn every registered component off except ``names`` (tests that
    run one system; new systems need no edit here)."""
    flags: list[str] = []
    for spec in REGISTRY:
        flags += [f"--{spec.mode_flag}", "true" if spec.name in names else "false"]
    return flags


def component_names() -> list[str]:
    """Every registered component's name, in registry order."""
    return [spec.name for spec in REGISTRY]
