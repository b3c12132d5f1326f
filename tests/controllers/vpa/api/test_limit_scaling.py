"""Proportional limits and boundary requests, as upstream's ``limit_and_request_scaling.go``.

The first tables are upstream's TestGetProportionalResourceLimitCPU / ...Mem (with the exact
quantity strings added); the rest pin the rounding, the int64 cap, the formats and
GetBoundaryRequest with worked arithmetic. Hypothesis checks the ratio is kept to within one
unit of rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.controllers.vpa.api.limit_scaling import (
    MAX_INT64,
    boundary_request,
    proportional_limits,
    proportional_resource_limit,
    scale_cpu,
    scale_memory,
)
from kubescale.objects.quantities import BINARY_SI, DECIMAL_SI, Format, Quantity


def q(text: str) -> Quantity:
    return Quantity.parse(text)


def maybe(text: str | None) -> Quantity | None:
    return None if text is None else q(text)


NO_LIMIT = "limit NOT set since originalLimit is nil or 0"
NO_RECOMMENDATION = "limit NOT set since recommendedRequest is nil or 0"
CAPPED = "failed to keep limit to request ratio; capping limit to int64"


@dataclass(frozen=True)
class LimitCase:
    """One getProportionalResourceLimit case; the limit/annotation are the expected output."""

    name: str
    original_limit: str | None
    original_request: str | None
    recommendation: str
    default_limit: str | None
    limit: str | None
    annotation: str = ""


CPU_CASES = [
    LimitCase("scale proportionally", "2", "1", "10", None, "20"),
    LimitCase("scale proportionally with default", None, "1", "10", "2", "20"),
    LimitCase("no original limit", None, "1", "10", None, None, NO_LIMIT),
    LimitCase("no original request", "2", None, "10", None, "10"),
    LimitCase("no recommendation", None, "1", "0", "2", None, NO_RECOMMENDATION),
    LimitCase("limit equal to request", "1", "1", "10", None, "10"),
    # 2000m x 1000m / 1500m = 1333.33m -> 1333m (floor in milli-units).
    LimitCase("handle non-integer ratios", "2", "1.50", "1", None, "1333m"),
    # 10G = 1e13m; 1e13 x 1e13 / 1 = 1e26 milli > MaxInt64 -> MaxInt64 milli-units.
    LimitCase("go over milli cap", "10G", "1m", "10G", None, "9223372036854775807m", CAPPED),
    # Beyond upstream's table:
    LimitCase("zero limit falls back to the default", "0", "1", "3", "2", "6"),
    LimitCase("explicit zero request: limit = recommendation", "2", "0", "700m", None, "700m"),
    # 1000m x 1000m / 3000m = 333.33m -> 333m.
    LimitCase("rounds down", "1", "3", "1", None, "333m"),
    # 1000.5m reads as MilliValue 1001 (rounded up), equal to the 1001m limit.
    LimitCase("request equal to limit in milli-units", "1001m", "1000500u", "5", None, "5"),
    LimitCase("no original limit nor default", None, None, "1", None, None, NO_LIMIT),
]

MEMORY_CASES = [
    LimitCase("scale proportionally", "2", "1", "10", None, "20"),
    LimitCase("scale proportionally with default", None, "1", "10", "2", "20"),
    LimitCase("no original limit", None, "1", "10", None, None, NO_LIMIT),
    LimitCase("no original request", "2", None, "10", None, "10"),
    LimitCase("no recommendation", None, "1", "0", "2", None, NO_RECOMMENDATION),
    LimitCase("limit equal to request", "1", "1", "10", None, "10"),
    # 200 x 100 / 150 = 133.33 -> 133 (whole units, floor).
    LimitCase("handle non-integer ratios", "200", "150", "100", None, "133"),
    # Value(1m) = 1 (rounded up); 1e10 x 1e10 / 1 = 1e20 > MaxInt64.
    LimitCase("go over milli cap", "10G", "1m", "10G", None, "9223372036854775807", CAPPED),
    # 2Gi x 1536Mi / 1Gi = 3Gi; the limit's BinarySI format is kept.
    LimitCase("binary limit keeps its format", "2Gi", "1Gi", "1536Mi", None, "3Gi"),
    # 1e9 x 1e8 / 3e8 = 333333333.33 -> 333333333.
    LimitCase("decimal limit rounds down to a byte", "1000M", "300M", "100M", None, "333333333"),
    LimitCase("limit from the LimitRange default", None, "100Mi", "200Mi", "100Mi", "200Mi"),
]


def _check(resource: str, case: LimitCase) -> None:
    got, got_annotation = proportional_resource_limit(
        resource,
        original_limit=maybe(case.original_limit),
        original_request=maybe(case.original_request),
        recommended_request=q(case.recommendation),
        default_limit=maybe(case.default_limit),
    )
    assert (None if got is None else str(got)) == case.limit
    assert got_annotation == (f"{resource}: {case.annotation}" if case.annotation else "")


@pytest.mark.parametrize("case", CPU_CASES, ids=[case.name for case in CPU_CASES])
def test_proportional_cpu_limit(case: LimitCase) -> None:
    _check("cpu", case)


@pytest.mark.parametrize("case", MEMORY_CASES, ids=[case.name for case in MEMORY_CASES])
def test_proportional_memory_limit(case: LimitCase) -> None:
    _check("memory", case)


def test_missing_recommendation_reads_as_zero() -> None:
    limit, annotation = proportional_resource_limit(
        "memory",
        original_limit=q("1Gi"),
        original_request=q("512Mi"),
        recommended_request=None,
        default_limit=None,
    )
    assert limit is None
    assert annotation == f"memory: {NO_RECOMMENDATION}"


def test_proportional_limits_for_both_resources() -> None:
    # CPU 10 x 2 / 1 = 20; memory 10M x 2M / 1M = 20M (GetContainersResources table).
    limits, annotations = proportional_limits(
        original_limits={"cpu": q("10"), "memory": q("10M")},
        original_requests={"cpu": q("1"), "memory": q("1M")},
        recommendation={"cpu": q("2"), "memory": q("2M")},
        default_limits=None,
    )
    assert limits is not None
    assert {name: str(value) for name, value in limits.items()} == {"cpu": "20", "memory": "20M"}
    assert annotations == []


def test_proportional_limits_for_a_cpu_only_recommendation() -> None:
    # "CPU only recommendation, request and limits set": memory gets no limit (and says so).
    limits, annotations = proportional_limits(
        original_limits={"cpu": q("10"), "memory": q("10M")},
        original_requests={"cpu": q("1"), "memory": q("1M")},
        recommendation={"cpu": q("2")},
        default_limits={},
    )
    assert limits is not None
    assert {name: str(value) for name, value in limits.items()} == {"cpu": "20"}
    assert annotations == [f"memory: {NO_RECOMMENDATION}"]


def test_no_limit_at_all_drops_the_annotations() -> None:
    # GetProportionalLimit returns (nil, []) when neither resource gets a limit.
    assert proportional_limits(
        original_limits=None,
        original_requests={"cpu": q("1")},
        recommendation={"cpu": q("2"), "memory": q("1Gi")},
        default_limits=None,
    ) == (None, [])


def test_only_the_limited_resource_gets_a_limit_and_the_other_is_annotated() -> None:
    limits, annotations = proportional_limits(
        original_limits={"cpu": q("2")},
        original_requests={"cpu": q("1"), "memory": q("1Gi")},
        recommendation={"cpu": q("500m"), "memory": q("2Gi")},
        default_limits=None,
    )
    assert limits is not None
    assert {name: str(value) for name, value in limits.items()} == {"cpu": "1"}
    assert annotations == [f"memory: {NO_LIMIT}"]


@dataclass(frozen=True)
class BoundaryCase:
    name: str
    resource: str
    original_request: str | None
    original_limit: str | None
    boundary: str | None
    default_limit: str | None
    expected: str


BOUNDARY_CASES = [
    BoundaryCase("no limit: no boundary", "cpu", "1", None, "4", None, "0"),
    # Limit from the default 2: 1000m x 4000m / 2000m = 2000m.
    BoundaryCase("default limit gives the ratio", "cpu", "1", None, "4", "2", "2"),
    BoundaryCase("no request: the boundary itself", "cpu", None, "2", "4", None, "4"),
    BoundaryCase("zero request: the boundary itself", "memory", "0", "2Gi", "1Gi", None, "1Gi"),
    # 100m x 1000m / 300m = 333.33m -> 333m.
    BoundaryCase("cpu rounds down", "cpu", "100m", "300m", "1", None, "333m"),
    # 50e6 x 500e6 / 600e6 = 41666666.67 -> 41666666 (TestApplyLimitRangeMinToRequest).
    BoundaryCase("memory rounds down", "memory", "50M", "600M", "500M", None, "41666666"),
    BoundaryCase("zero boundary", "memory", "1G", "1G", "0", None, "0"),
    BoundaryCase("missing boundary", "memory", "1G", "1G", None, None, "0"),
    BoundaryCase("request equal to limit", "cpu", "1", "1", "1", None, "1"),
]


@pytest.mark.parametrize("case", BOUNDARY_CASES, ids=[case.name for case in BOUNDARY_CASES])
def test_boundary_request(case: BoundaryCase) -> None:
    got = boundary_request(
        case.resource,
        original_request=maybe(case.original_request),
        original_limit=maybe(case.original_limit),
        boundary_limit=maybe(case.boundary),
        default_limit=maybe(case.default_limit),
    )
    assert str(got) == case.expected


def test_scale_cpu_rounding() -> None:
    # 100m x 1000m / 300m = 333.33m: floor 333m, ceiling 334m.
    assert scale_cpu(q("100m"), q("300m"), q("1")) == (q("333m"), False)
    assert scale_cpu(q("100m"), q("300m"), q("1"), round_up=True) == (q("334m"), False)
    # Exact: 100m x 1000m / 200m = 500m either way.
    assert scale_cpu(q("100m"), q("200m"), q("1"), round_up=True) == (q("500m"), False)


def test_scale_cpu_caps_and_division_by_zero() -> None:
    capped, was_capped = scale_cpu(q("10G"), q("1m"), q("10G"))
    assert was_capped
    assert capped.milli_value() == MAX_INT64
    # divisionByZero: the scaled quantity comes back unchanged.
    assert scale_cpu(q("300m"), q("0"), q("1")) == (q("300m"), False)


def test_scale_memory_is_a_whole_byte_floor_in_every_mode() -> None:
    # 1Gi x 4Gi / 3Gi = 1431655765.33 -> 1431655765 (TestCapPodMemoryWithUnderByteSplit, min).
    scaled, capped = scale_memory(q("1Gi"), q("3Gi"), q("4Gi"))
    assert (str(scaled), capped) == ("1431655765", False)
    assert scaled.format == BINARY_SI
    # 2Gi x 2 / 1 = 4Gi, printed in the BinarySI format of the scaled quantity.
    assert str(scale_memory(q("2Gi"), q("1"), q("2"))[0]) == "4Gi"
    # Value() rounds up first: 1500m -> 2 bytes.
    assert str(scale_memory(q("1500m"), q("1"), q("1"))[0]) == "2"
    # A zero result stays 0 (upstream's roundDownToFullUnit would produce -1).
    assert str(scale_memory(q("0"), q("3Gi"), q("1Gi"))[0]) == "0"
    capped_quantity, was_capped = scale_memory(q("8Ei"), q("1"), q("2"))
    assert was_capped
    assert capped_quantity.value() == MAX_INT64


@st.composite
def _ratio_case(draw: st.DrawFn) -> tuple[str, Quantity, Quantity, Quantity, int, int, int]:
    resource = draw(st.sampled_from(["cpu", "memory"]))
    units = st.integers(min_value=1, max_value=10**12)
    limit, request, recommendation = draw(units), draw(units), draw(units)
    fmt: Format = draw(st.sampled_from([DECIMAL_SI, BINARY_SI]))
    build = Quantity.from_milli if resource == "cpu" else Quantity.from_int
    return (
        resource,
        build(limit, fmt),
        build(request, fmt),
        build(recommendation, DECIMAL_SI),
        limit,
        request,
        recommendation,
    )


@given(_ratio_case())
def test_proportional_limit_keeps_the_ratio_within_rounding(
    case: tuple[str, Quantity, Quantity, Quantity, int, int, int],
) -> None:
    resource, limit, request, recommendation, limit_units, request_units, rec_units = case
    got, annotation = proportional_resource_limit(
        resource,
        original_limit=limit,
        original_request=request,
        recommended_request=recommendation,
        default_limit=None,
    )
    assert got is not None
    got_units = got.milli_value() if resource == "cpu" else got.value()
    if limit_units == request_units:
        assert got == recommendation
        return
    if annotation:
        assert annotation.endswith(CAPPED)
        assert got_units == MAX_INT64
        assert limit_units * rec_units // request_units > MAX_INT64
        return
    # limit x origRequest and origLimit x request differ by less than origRequest (floor).
    slack = limit_units * rec_units - got_units * request_units
    assert 0 <= slack < request_units
    assert got.format == limit.format
