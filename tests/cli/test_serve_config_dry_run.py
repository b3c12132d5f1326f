"""``serve --dry-run`` is one flag: every system that returns plans reads it (the VPA
recommender and updater, the HPA controller, the cluster autoscaler, the descheduler) and
prints its plans instead of writing them (``docs/plans.md``)."""

from __future__ import annotations

import pytest

from kubescale.cli.main import build_parser
from kubescale.cli.serve_config import serve_config_from_args

SYSTEMS = ("vpa-recommender", "vpa-updater", "hpa-controller", "cluster-autoscaler", "descheduler")


@pytest.mark.parametrize(("flags", "dry_run"), [([], False), (["--dry-run"], True)])
def test_one_dry_run_flag_reaches_every_system_that_plans(flags: list[str], dry_run: bool) -> None:
    config = serve_config_from_args(build_parser().parse_args(["serve", *flags]))
    assert {name: config.components[name].dry_run for name in SYSTEMS} == dict.fromkeys(
        SYSTEMS, dry_run
    )
