"""The VPA's TypedDicts follow upstream's ``types.go`` (the projection and ``mypy --strict``
rely on the field names being where the API puts them)."""

from __future__ import annotations

from typing import get_type_hints

from kubescale.objects.vpa import StartupBoost, StartupBoostCPU


def test_startup_boost_fields_are_upstreams_generic_startup_boost() -> None:
    # StartupBoost{CPU *GenericStartupBoost}; GenericStartupBoost{Type, Factor *int32,
    # Quantity *resource.Quantity, DurationSeconds *int32}: the duration is per resource, under
    # spec.startupBoost.cpu (and containerPolicies[].startupBoost.cpu), where the webhook's
    # decoder and the updater's unboost read it.
    assert get_type_hints(StartupBoost) == {"cpu": StartupBoostCPU}
    assert get_type_hints(StartupBoostCPU) == {
        "type": str,
        "factor": int,
        "quantity": str,
        "durationSeconds": int,
    }
