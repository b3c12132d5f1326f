"""Descheduler and extender flags, the eviction memory, the metrics collector's smoothing."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path

import pytest

from kubescale.controllers.descheduler.descheduler_config import (
    DeschedulerConfigError,
    add_descheduler_arguments,
    descheduler_settings_from_args,
)
from kubescale.controllers.descheduler.usage_sources import smooth
from kubescale.coordination.eviction_memory import EvictionMemory
from kubescale.extender.extender_config import (
    ExtenderConfigError,
    add_extender_arguments,
    extender_settings_from_args,
)
from tests.scheduling.policy.test_policy_loading import REFERENCE_EXAMPLE

from .builders import NOW, cycle_pod, owner


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_descheduler_arguments(parser)
    add_extender_arguments(parser)
    return parser.parse_args(argv)


def test_upstream_defaults() -> None:
    settings = descheduler_settings_from_args(parse([]))
    assert (settings.requested, settings.policy, settings.interval, settings.dry_run) == (
        "auto",
        None,
        0.0,
        False,
    )
    # auto without a policy: off, so `serve` in a cluster does not run it
    assert settings.mode == "false"
    assert not settings.enabled
    assert settings.run_once
    extender = extender_settings_from_args(parse([]))
    assert extender.url_prefix == "/scheduler"
    assert extender.route("filter") == "/scheduler/filter"
    assert extender.eviction_memory == timedelta(minutes=10)
    assert extender.mode == "false"


def test_both_read_the_one_policy_flag(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(REFERENCE_EXAMPLE)
    args = parse(["--policy-config-file", str(path)])
    descheduler, extender = descheduler_settings_from_args(args), extender_settings_from_args(args)
    assert (descheduler.mode, extender.mode) == ("auto", "auto")
    assert descheduler.policy == extender.policy is not None
    inline = parse(["--descheduler-policy", REFERENCE_EXAMPLE])
    assert descheduler_settings_from_args(inline).policy == descheduler.policy
    assert extender_settings_from_args(inline).policy_origin == "--descheduler-policy"


def test_policy_interval_dry_run(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(REFERENCE_EXAMPLE)
    settings = descheduler_settings_from_args(
        parse(["--policy-config-file", str(path), "--descheduling-interval", "5m", "--dry-run"])
    )
    assert settings.enabled
    assert settings.policy is not None
    assert settings.interval == 300.0
    assert settings.dry_run
    # upstream: leader election only when looping and never in dry-run
    assert not settings.leader_elect
    looping = descheduler_settings_from_args(
        parse(["--policy-config-file", str(path), "--descheduling-interval", "5m"])
    )
    assert looping.leader_elect


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--descheduling-interval", "soon"], "--descheduling-interval: invalid duration"),
        (["--descheduling-interval=-1m"], "--descheduling-interval must not be negative"),
        (["--descheduler", "true"], "--descheduler true needs --policy-config-file"),
        (
            ["--descheduler-policy", "apiVersion: descheduler/v1alpha2\nkind: Nope\n"],
            "--descheduler-policy: kind: ",
        ),
        (
            ["--descheduler-policy", "x: [", "--policy-config-file", "p.yaml"],
            "--policy-config-file and --descheduler-policy are mutually exclusive",
        ),
        (
            ["--policy-config-file", "/nonexistent/policy.yaml"],
            "--policy-config-file: failed to read policy config file",
        ),
    ],
)
def test_descheduler_flag_errors(argv: list[str], message: str) -> None:
    with pytest.raises(DeschedulerConfigError, match=message):
        descheduler_settings_from_args(parse(argv))


def test_a_bad_policy_names_the_flag_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(REFERENCE_EXAMPLE.replace("cpu: 20,", "cpu: 200,"))
    with pytest.raises(DeschedulerConfigError) as caught:
        descheduler_settings_from_args(parse(["--policy-config-file", str(path)]))
    assert str(caught.value) == (
        f"--policy-config-file: {path}: profiles[default].pluginConfig[LowNodeUtilization]."
        "args.thresholds.cpu: 200 is not in [0, 100]"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--extender-url-prefix", "scheduler"], "--extender-url-prefix must be a path"),
        (["--extender-eviction-memory", "forever"], "--extender-eviction-memory: invalid"),
        (["--extender-eviction-memory-entries", "0"], "--extender-eviction-memory-entries must"),
        (["--scheduler-extender", "true"], "--scheduler-extender true needs --policy-config-file"),
    ],
)
def test_extender_flag_errors(argv: list[str], message: str) -> None:
    with pytest.raises(ExtenderConfigError, match=message):
        extender_settings_from_args(parse(argv))


def test_eviction_memory_per_owner_and_node_bounded_by_age_and_size() -> None:
    memory = EvictionMemory(duration=timedelta(minutes=5), max_entries=3)
    web, api = cycle_pod("web-1", "n1"), cycle_pod("api-1", "n1", owners=[owner(name="api")])
    memory.record(web, "n1", NOW)
    memory.record(web, "n2", NOW + timedelta(minutes=1))
    memory.record(api, "n1", NOW + timedelta(minutes=2))
    replacement = cycle_pod("web-2", None)
    assert set(memory.refused_nodes(replacement, NOW + timedelta(minutes=3))) == {"n1", "n2"}
    # 5 minutes after the first eviction, n1 is open again for web (age is exclusive)
    assert set(memory.refused_nodes(replacement, NOW + timedelta(minutes=5))) == {"n2"}
    # size: a fourth entry pushes out the oldest
    memory.record(web, "n3", NOW + timedelta(minutes=5, seconds=1))
    memory.record(web, "n4", NOW + timedelta(minutes=5, seconds=2))
    assert len(memory) == 3
    assert set(memory.refused_nodes(replacement, NOW + timedelta(minutes=5, seconds=3))) == {
        "n3",
        "n4",
    }
    # bare pods cannot be tied to a replacement
    memory.record(cycle_pod("bare", "n1", owners=[]), "n1", NOW)
    assert memory.refused_nodes(cycle_pod("bare", None, owners=[]), NOW) == {}


@pytest.mark.parametrize(
    ("previous", "reading", "expected"),
    [
        (None, 1234, 1234),  # first reading as it is
        (3600, 1600, 3400),  # 0.9×3600 + 0.1×1600 = 3240 + 160 = 3400
        # 900 + 100.5 = 1000.5 exactly: Go's math.Round takes halves away from zero (Python's
        # round() would give the even 1000)
        (1000, 1005, 1001),
        (0, 25, 3),  # 0 + 2.5 → 3
    ],
)
def test_smoothing(previous: int | None, reading: int, expected: int) -> None:
    assert smooth(previous, reading) == expected
