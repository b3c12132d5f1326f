"""The updater flags: upstream's names and defaults (reference §3.1), and their validation."""

from __future__ import annotations

import argparse
from datetime import timedelta

import pytest

from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.controllers.vpa.updater.update_priority import UpdateSettings
from kubescale.controllers.vpa.updater.updater_config import (
    UpdaterConfigError,
    UpdaterSettings,
    add_updater_arguments,
    updater_settings_from_args,
)


def parse(*argv: str, environ: dict[str, str] | None = None) -> UpdaterSettings:
    parser = argparse.ArgumentParser()
    add_updater_arguments(parser)
    return updater_settings_from_args(parser.parse_args(list(argv)), environ=environ or {})


def test_defaults_are_upstreams() -> None:
    settings = parse()
    assert settings == UpdaterSettings()
    assert settings.interval == 60.0
    assert settings.min_replicas == 2
    assert settings.eviction_tolerance == 0.5
    assert settings.eviction_rate_limit == -1.0
    assert settings.eviction_rate_burst == 1
    assert settings.use_admission_controller_status is True
    assert settings.status_lease_name == "vpa-admission-controller"
    assert settings.status_lease_namespace == "kube-system"
    assert settings.status_lease_timeout == timedelta(minutes=1)
    assert settings.in_place_skip_disruption_budget is False
    assert settings.priority == UpdateSettings(
        pod_update_threshold=0.1,
        lifetime_threshold=timedelta(hours=12),
        evict_after_oom_threshold=timedelta(minutes=10),
    )
    assert settings.mode == "auto"


def test_every_flag_is_read() -> None:
    settings = parse(
        "--vpa-updater=true",
        "--updater-interval=30s",
        "--min-replicas=1",
        "--eviction-tolerance=0.25",
        "--eviction-rate-limit=2",
        "--eviction-rate-burst=3",
        "--use-admission-controller-status=false",
        "--admission-controller-status-lease-name=status",
        "--admission-controller-status-lease-namespace=vpa",
        "--admission-controller-status-lease-timeout=2m",
        "--pod-update-threshold=0.2",
        "--in-recommendation-bounds-eviction-lifetime-threshold=1h",
        "--evict-after-oom-threshold=5m",
        "--in-place-skip-disruption-budget",
    )
    assert settings == UpdaterSettings(
        mode="true",
        interval=30.0,
        min_replicas=1,
        eviction_tolerance=0.25,
        eviction_rate_limit=2.0,
        eviction_rate_burst=3,
        use_admission_controller_status=False,
        status_lease_name="status",
        status_lease_namespace="vpa",
        status_lease_timeout=timedelta(minutes=2),
        in_place_skip_disruption_budget=True,
        priority=UpdateSettings(
            pod_update_threshold=0.2,
            lifetime_threshold=timedelta(hours=1),
            evict_after_oom_threshold=timedelta(minutes=5),
        ),
    )


def test_the_lease_namespace_falls_back_to_the_namespace_variable() -> None:
    assert parse(environ={"NAMESPACE": "autoscaling"}).status_lease_namespace == "autoscaling"


@pytest.mark.parametrize(
    "argv",
    [("--min-replicas=0",), ("--eviction-tolerance=1.5",), ("--pod-update-threshold=-1",)],
)
def test_nonsense_values_are_refused(argv: tuple[str, ...]) -> None:
    with pytest.raises(UpdaterConfigError):
        parse(*argv)


def test_the_in_place_gate_comes_from_serves_feature_gates() -> None:
    gated = serve_config_from_args(
        build_parser().parse_args(["serve", "--feature-gates", "InPlace=true"])
    )
    assert gated.components["vpa-updater"].priority.in_place_gate is True
    default = serve_config_from_args(build_parser().parse_args(["serve"]))
    assert default.components["vpa-updater"].priority.in_place_gate is False
