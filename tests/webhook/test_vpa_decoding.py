"""The webhook's boundary: :func:`~kubescale.webhook.vpa_decoding.decode_vpa` turns the request's
raw VPA into the typed VPA the rules read, as Go's ``json.Unmarshal`` would have filled
``vpa_types.VerticalPodAutoscaler``: a ``null`` field unset, a ``null`` list item its type's
zero value, a quantity its text (a bare JSON number read as ``Quantity.UnmarshalJSON`` reads it,
a ``null`` map value the zero quantity)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubescale.objects.quantities import Quantity
from kubescale.objects.vpa import VerticalPodAutoscaler
from kubescale.webhook.vpa_decoding import VpaDecodeError, decode_vpa
from tests import builders

TARGET = builders.vpas.target_ref()


def _decoded(raw: dict[str, Any]) -> VerticalPodAutoscaler:
    vpa = decode_vpa(raw)
    assert not isinstance(vpa, VpaDecodeError), vpa
    return vpa


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(
            {"targetRef": TARGET, "updatePolicy": None, "startupBoost": None},
            {"targetRef": TARGET},
            id="null fields are left unset",
        ),
        pytest.param(
            {"updatePolicy": {"updateMode": None, "minReplicas": 2}},
            {"updatePolicy": {"minReplicas": 2}},
            id="a null field inside a struct is unset",
        ),
        pytest.param(
            # Go: []ResourceName{""}; []ContainerResourcePolicy{{}}; []*Selector{nil} (counted)
            {
                "resourcePolicy": {
                    "containerPolicies": [None, {"controlledResources": ["cpu", None]}]
                },
                "recommenders": [None, {"name": "r"}],
            },
            {
                "resourcePolicy": {"containerPolicies": [{}, {"controlledResources": ["cpu", ""]}]},
                "recommenders": [{}, {"name": "r"}],
            },
            id="a null list item is its zero value",
        ),
        pytest.param(
            # 1 -> "1" (str(1)); 0.5 -> "0.5" (repr); " 2Gi " -> "2Gi" (trimmed); null -> "0"
            {
                "resourcePolicy": {
                    "containerPolicies": [
                        {
                            "minAllowed": {"cpu": 1, "memory": " 2Gi ", "gpu": None},
                            "maxAllowed": {"cpu": 0.5},
                            "oomBumpUpRatio": 2,
                        }
                    ]
                }
            },
            {
                "resourcePolicy": {
                    "containerPolicies": [
                        {
                            "minAllowed": {"cpu": "1", "memory": "2Gi", "gpu": "0"},
                            "maxAllowed": {"cpu": "0.5"},
                            "oomBumpUpRatio": "2",
                        }
                    ]
                }
            },
            id="quantities become their text",
        ),
        pytest.param(
            {"targetRef": TARGET, "unknownField": None, "updatePolicy": {"extra": [1]}},
            {"targetRef": TARGET, "updatePolicy": {"extra": [1]}},
            id="unknown fields are kept as sent (a null one is unset too)",
        ),
    ],
)
def test_decode_vpa(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    raw = builders.vpas.vpa(name="web", spec=spec)
    decoded = _decoded(raw)
    assert decoded.get("spec") == expected
    assert decoded.get("metadata") == raw["metadata"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param(
            {"updatePolicy": {"minReplicas": "2"}},
            "json: cannot unmarshal string into Go struct field"
            " PodUpdatePolicy.spec.updatePolicy.minReplicas of type int32",
            id="a string where an int32 goes",
        ),
        pytest.param(
            {"resourcePolicy": {"containerPolicies": [{"minAllowed": {"cpu": "1x"}}]}},
            # resource.ErrFormatWrong: "x" is no suffix
            "quantities must match the regular expression"
            " '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            id="a quantity that does not parse",
        ),
    ],
)
def test_what_does_not_decode_is_upstreams_error(spec: dict[str, Any], message: str) -> None:
    assert decode_vpa(builders.vpas.vpa(spec=spec)) == VpaDecodeError(message)


_QUANTITY_VALUES = st.one_of(
    st.none(),
    st.integers(min_value=-(10**12), max_value=10**12),
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False),
    st.builds(
        lambda number, suffix, pad: f"{pad}{number}{suffix}{pad}",
        st.integers(min_value=0, max_value=10**6),
        st.sampled_from(["", "m", "k", "Mi", "Gi", "n", "x"]),
        st.sampled_from(["", " "]),
    ),
)


def _nulls(value: object) -> list[object]:
    """Every ``None`` in a JSON value (map values and list items)."""
    if value is None:
        return [None]
    if isinstance(value, dict):
        return [null for item in value.values() for null in _nulls(item)]
    if isinstance(value, list):
        return [null for item in value for null in _nulls(item)]
    return []


@given(
    resources=st.dictionaries(st.sampled_from(["cpu", "memory", "gpu"]), _QUANTITY_VALUES),
    ratio=_QUANTITY_VALUES,
    controlled=st.lists(st.one_of(st.none(), st.sampled_from(["cpu", "memory"]))),
)
def test_a_decoded_quantity_reads_as_upstream_reads_the_raw_one(
    resources: dict[str, object], ratio: object, controlled: list[object]
) -> None:
    """Whatever decodes: each quantity of the typed VPA is text that parses to the quantity
    ``Quantity.UnmarshalJSON`` reads from the raw value (zero for a null map value), and no
    ``null`` is left in its spec."""
    policy = {
        "containerName": "app",
        "minAllowed": resources,
        "oomBumpUpRatio": ratio,
        "controlledResources": controlled,
    }
    decoded = decode_vpa(builders.vpas.vpa(container_policies=[policy]))
    if isinstance(decoded, VpaDecodeError):
        return
    assert _nulls(decoded.get("spec")) == []
    (typed,) = decoded.get("spec", {}).get("resourcePolicy", {}).get("containerPolicies", [])
    for name, raw in resources.items():
        text = typed.get("minAllowed", {})[name]
        expected = Quantity(nanos=0) if raw is None else Quantity.from_json(raw)
        assert Quantity.parse(text) == expected, (name, raw, text)
    if ratio is None:
        assert "oomBumpUpRatio" not in typed
    else:
        assert Quantity.parse(typed.get("oomBumpUpRatio", "")) == Quantity.from_json(ratio)
    assert typed.get("controlledResources") == [item or "" for item in controlled]
