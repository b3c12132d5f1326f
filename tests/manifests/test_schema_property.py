"""Property: every object upstream's schema accepts, kubescale's CRDs accept without pruning.

Objects are generated from the *upstream facts* (:mod:`.upstream_crd_facts`: every field with its
type, format, bounds, enum, required siblings and CEL rules), not from kubescale's YAML, so the
property is the compatibility direction that matters: nothing an upstream user can write is
refused or silently dropped by kubescale's CRDs.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from . import upstream_crd_facts as facts
from .manifest_files import crd, version_schema
from .structural_schema import SchemaReport, check_object

_NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
_QUANTITIES = st.one_of(
    st.integers(min_value=0, max_value=2**40),
    st.builds(
        lambda n, suffix: f"{n}{suffix}",
        st.integers(min_value=0, max_value=10**6),
        st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "E-2"]),
    ),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(0, 99), st.integers(0, 99)),
)
_TIMES = st.datetimes(timezones=st.just(UTC)).map(
    lambda t: t.replace(microsecond=0).isoformat().replace("+00:00", "Z")
)


def _children(fields: dict[str, str], path: str) -> list[str]:
    prefix = f"{path}." if path != "." else ""
    return [
        key[len(prefix) :]
        for key in fields
        if key.startswith(prefix)
        and key != path
        and "." not in key[len(prefix) :]
        and not key[len(prefix) :].endswith("[]")
    ]


def _required(descriptor: str) -> list[str]:
    for word in descriptor.split():
        if word.startswith("required="):
            return word.removeprefix("required=").split(",")
    return []


def _scalar(descriptor: str) -> st.SearchStrategy[Any]:
    words = descriptor.split()
    options = dict(word.split("=", 1) for word in words if "=" in word)
    if "enum" in options:
        return st.sampled_from(options["enum"].split("|"))
    if words[0] == "string":
        strategy: st.SearchStrategy[Any] = _TIMES if "date-time" in words else _NAMES
        return st.one_of(st.none(), strategy) if "nullable" in words else strategy
    if words[0] == "integer":
        low = int(options.get("min", -(2**31)))
        high = 2**63 - 1 if "int64" in words else 2**31 - 1
        return st.integers(min_value=low, max_value=high)
    if words[0] == "number":
        return st.one_of(st.integers(0, 10**9), st.floats(0, 1e9, allow_nan=False))
    raise AssertionError(f"no strategy for {descriptor!r}")


def _node(fields: dict[str, str], path: str) -> st.SearchStrategy[Any]:
    descriptor = fields[path]
    if descriptor == "quantity":
        return _QUANTITIES
    if descriptor == "resources":
        return st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]), _QUANTITIES)
    kind = descriptor.split()[0]
    if kind == "array":
        return st.lists(_node(fields, f"{path}[]"), max_size=2)
    if kind != "object":
        return _scalar(descriptor)
    if "preserve-unknown" in descriptor:
        return st.dictionaries(st.integers(0, 175).map(str), st.integers(0, 10000), max_size=4)
    if "cel=2" in descriptor:  # startupBoost.cpu: factor iff Factor, quantity iff Quantity
        return st.one_of(
            st.fixed_dictionaries(
                {"type": st.just("Factor"), "factor": st.integers(1, 10)},
                optional={"durationSeconds": st.integers(0, 600)},
            ),
            st.fixed_dictionaries(
                {"type": st.just("Quantity"), "quantity": _QUANTITIES},
                optional={"durationSeconds": st.integers(0, 600)},
            ),
        )
    required = _required(descriptor)
    children = _children(fields, path)
    if path == ".":
        children = [c for c in children if c not in ("apiVersion", "kind", "metadata")]
    child_path = (lambda name: name) if path == "." else (lambda name: f"{path}.{name}")
    return st.fixed_dictionaries(
        {name: _node(fields, child_path(name)) for name in children if name in required},
        optional={
            name: _node(fields, child_path(name)) for name in children if name not in required
        },
    )


def _objects(fields: dict[str, str], kind: str) -> st.SearchStrategy[dict[str, Any]]:
    return _node(fields, ".").map(
        lambda body: {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": "generated"},
            **body,
        }
    )


@settings(max_examples=150, deadline=None)
@given(_objects(facts.VPA_V1_FIELDS, "VerticalPodAutoscaler"))
def test_any_object_upstreams_vpa_schema_accepts_is_kept_whole(vpa: dict[str, Any]) -> None:
    schema = version_schema(crd("verticalpodautoscalers"), "v1")
    assert check_object(schema, vpa) == SchemaReport(errors=(), pruned=())


@settings(max_examples=100, deadline=None)
@given(_objects(facts.CHECKPOINT_FIELDS, "VerticalPodAutoscalerCheckpoint"))
def test_any_checkpoint_upstreams_schema_accepts_is_kept_whole(checkpoint: dict[str, Any]) -> None:
    schema = version_schema(crd("verticalpodautoscalercheckpoints"), "v1")
    assert check_object(schema, checkpoint) == SchemaReport(errors=(), pruned=())
