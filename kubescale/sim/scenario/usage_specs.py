"""The ``usage`` of a scenario container: which usage model, with which parameters.

Each model's parameters are declared once in :data:`USAGE_MODELS` (name → kind, required,
default), which drives both validation and the documentation in ``examples/README.md``.
Kinds: ``cpu`` (a CPU quantity → cores), ``memory`` (a memory quantity → bytes), ``amount``
(a ``{cpu, memory}`` mapping → :class:`~.scenario_format.Amount`), ``duration`` (Go duration →
seconds), ``probability`` (0…1), ``number`` (≥ 0), ``bool``, ``string``, ``hold``
(``previous`` or ``linear``), ``file`` (a path, relative to the scenario file, that must
exist), ``steps`` (a list of ``{at, cpu, memory}``).
Every model also takes ``shared: true`` — the amounts are a service's total, divided among the
running replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kubescale.sim.cluster.trace_replay import Trace, TraceReplay, load_trace
from kubescale.sim.cluster.usage_models import (
    BurstUsage,
    ConstantUsage,
    DiurnalUsage,
    LinearGrowthUsage,
    RandomWalkUsage,
    StepUsage,
    Usage,
    UsageModel,
)

from .scenario_fields import Problems, field_path
from .scenario_format import Amount, UsageSpec

__all__ = [
    "USAGE_MODELS",
    "Param",
    "build_usage_model",
    "load_traces",
    "parse_amount",
    "parse_usage",
    "replay_files",
]


@dataclass(frozen=True)
class Param:
    kind: str
    required: bool = False
    default: Any = None
    positive: bool = False
    """For durations: must be > 0 (a period, an interval)."""


USAGE_MODELS: Final[dict[str, dict[str, Param]]] = {
    "constant": {"cpu": Param("cpu", default=0.0), "memory": Param("memory", default=0.0)},
    "diurnal": {
        "mean": Param("amount", required=True),
        "amplitude": Param("amount", required=True),
        "period": Param("duration", default=86400.0, positive=True),
        "phase": Param("duration", default=0.0),
    },
    "step": {"steps": Param("steps", required=True)},
    "randomWalk": {
        "start": Param("amount", required=True),
        "volatility": Param("amount", required=True),
        "interval": Param("duration", default=60.0, positive=True),
        "min": Param("amount"),
        "max": Param("amount"),
    },
    "bursts": {
        "base": Param("amount", required=True),
        "burst": Param("amount", required=True),
        "probability": Param("probability", required=True),
        "duration": Param("duration", default=300.0, positive=True),
        "interval": Param("duration", default=60.0, positive=True),
    },
    "linear": {
        "start": Param("amount", required=True),
        "ratePerHour": Param("amount", required=True),
        "resetOnRestart": Param("bool", default=True),
        "max": Param("amount"),
    },
    "replay": {
        "file": Param("file", required=True),
        "workload": Param("string", required=True),
        "container": Param("string", default="main"),
        "timeOffset": Param("duration", default=0.0),
        "hold": Param("hold", default="previous"),
        "replicas": Param("file"),
    },
}


def _quantity_value(p: Problems, value: object, path: str) -> float | None:
    quantity = p.quantity(value, path)
    return quantity.as_float() if quantity is not None else None


def parse_amount(p: Problems, value: object, path: str) -> Amount | None:
    """``{cpu: 250m, memory: 256Mi}`` (either may be left out: 0)."""
    raw = p.mapping(value, path, allowed=("cpu", "memory"))
    if raw is None:
        return None
    cpu = _quantity_value(p, raw.get("cpu", 0), field_path(path, "cpu"))
    memory = _quantity_value(p, raw.get("memory", 0), field_path(path, "memory"))
    if cpu is None or memory is None:
        return None
    return Amount(cpu_cores=cpu, memory_bytes=memory)


def _steps(p: Problems, value: object, path: str) -> tuple[tuple[float, Amount], ...] | None:
    steps: list[tuple[float, Amount]] = []
    for item_path, item in p.items(value, path):
        raw = p.mapping(item, item_path, allowed=("at", "cpu", "memory"), required=("at",))
        if raw is None:
            continue
        at = p.duration(raw.get("at"), field_path(item_path, "at"))
        amount = parse_amount(p, {k: v for k, v in raw.items() if k != "at"}, item_path)
        if at is not None and amount is not None:
            if steps and at <= steps[-1][0]:
                p.add(field_path(item_path, "at"), "steps must be in increasing time order")
            steps.append((at, amount))
    if not steps:
        p.add(path, "want at least one step")
        return None
    return tuple(steps)


def _param(p: Problems, param: Param, value: object, path: str, *, base_dir: Path) -> Any:
    if param.kind in ("cpu", "memory"):
        return _quantity_value(p, value, path)
    if param.kind == "amount":
        return parse_amount(p, value, path)
    if param.kind == "duration":
        return p.duration(value, path, positive=param.positive)
    if param.kind == "probability":
        return p.number(value, path, maximum=1.0)
    if param.kind == "number":
        return p.number(value, path)
    if param.kind == "bool":
        return p.boolean(value, path, default=bool(param.default))
    if param.kind == "steps":
        return _steps(p, value, path)
    if param.kind == "hold":
        return p.choice(value, path, what="hold", choices=("previous", "linear"))
    text = p.string(value, path)
    if param.kind == "file" and text is not None:
        resolved = base_dir / text
        if not resolved.is_file():
            p.add(path, f"file {text!r} not found (looked at {resolved})")
            return None
        return str(resolved)
    return text


def parse_usage(p: Problems, value: object, path: str, *, base_dir: Path) -> UsageSpec | None:
    """A container's ``usage`` mapping: ``type``, ``shared`` and the model's parameters."""
    if not isinstance(value, dict):
        p.mapping(value, path, allowed=())
        return None
    kind = p.choice(
        value.get("type"), field_path(path, "type"), what="usage model", choices=USAGE_MODELS
    )
    if kind is None:
        return None
    params = USAGE_MODELS[kind]
    raw = p.mapping(
        value,
        path,
        allowed=("type", "shared", *params),
        required=[name for name, param in params.items() if param.required],
    )
    if raw is None:
        return None
    shared = p.boolean(raw.get("shared"), field_path(path, "shared"), default=False)
    parsed: dict[str, Any] = {}
    ok = True
    for name, param in params.items():
        if raw.get(name) is None:
            parsed[name] = param.default
            ok = ok and not param.required
            continue
        parsed[name] = _param(p, param, raw[name], field_path(path, name), base_dir=base_dir)
        ok = ok and parsed[name] is not None
    if not ok:
        return None
    return UsageSpec(type=kind, shared=shared, params=parsed)


def replay_files(specs: Iterable[UsageSpec]) -> dict[str, set[str]]:
    """Trace file → the workloads replayed from it."""
    files: dict[str, set[str]] = {}
    for spec in specs:
        if spec.type == "replay":
            files.setdefault(str(spec.params["file"]), set()).add(str(spec.params["workload"]))
    return files


def _replica_files(specs: Iterable[UsageSpec]) -> dict[str, str]:
    """Trace file → the replica series file replayed with it (``ValueError`` for two)."""
    found: dict[str, str] = {}
    for spec in specs:
        if spec.type != "replay" or spec.params.get("replicas") is None:
            continue
        trace, replicas = str(spec.params["file"]), str(spec.params["replicas"])
        if found.setdefault(trace, replicas) != replicas:
            raise ValueError(
                f"{trace} is replayed with two replica series ({found[trace]}, {replicas})"
            )
    return found


def load_traces(specs: Iterable[UsageSpec]) -> dict[str, Trace]:
    """Each trace file the specs replay, loaded once with just the workloads they use (and the
    replica series replayed with it).

    Raises ``ValueError`` (bad CSV, no matching samples) naming the file.
    """
    listed = list(specs)
    replicas = _replica_files(listed)
    return {
        file: load_trace(Path(file), workloads=workloads, replica_file=replicas.get(file))
        for file, workloads in sorted(replay_files(listed).items())
    }


def _usage(amount: Amount | None, *, per: float = 1.0) -> Usage | None:
    if amount is None:
        return None
    return Usage(amount.cpu_cores / per, amount.memory_bytes / per)


def build_usage_model(spec: UsageSpec, *, traces: Mapping[str, Trace]) -> UsageModel:
    """The :mod:`kubescale.sim.cluster.usage_models` model a spec describes.

    Raises ``ValueError`` when the parameters are inconsistent (e.g. ``max`` below ``min``) and
    ``KeyError`` when a replayed series is not in its trace.
    """
    params, shared = spec.params, spec.shared

    def amount(name: str) -> Usage:
        found = _usage(params[name])
        assert found is not None
        return found

    if spec.type == "constant":
        return ConstantUsage(params["cpu"], params["memory"], shared=shared)
    if spec.type == "diurnal":
        return DiurnalUsage(
            mean=amount("mean"),
            amplitude=amount("amplitude"),
            period=params["period"],
            phase=params["phase"],
            shared=shared,
        )
    if spec.type == "step":
        steps = [(at, Usage(a.cpu_cores, a.memory_bytes)) for at, a in params["steps"]]
        return StepUsage(steps=steps, shared=shared)
    if spec.type == "randomWalk":
        return RandomWalkUsage(
            start=amount("start"),
            volatility=amount("volatility"),
            interval=params["interval"],
            minimum=_usage(params["min"]) or Usage(0.0, 0.0),
            maximum=_usage(params["max"]),
            shared=shared,
        )
    if spec.type == "bursts":
        return BurstUsage(
            base=amount("base"),
            burst=amount("burst"),
            probability=params["probability"],
            duration=params["duration"],
            interval=params["interval"],
            shared=shared,
        )
    if spec.type == "linear":
        rate = _usage(params["ratePerHour"], per=3600.0)
        assert rate is not None
        return LinearGrowthUsage(
            start=amount("start"),
            rate=rate,
            reset_on_restart=params["resetOnRestart"],
            maximum=_usage(params["max"]),
            shared=shared,
        )
    if spec.type == "replay":
        return TraceReplay(
            traces[str(params["file"])],
            str(params["workload"]),
            str(params["container"]),
            time_offset=params["timeOffset"],
            hold=params["hold"],
            shared=shared,
            scale_by_replicas=params.get("replicas") is not None,
        )
    raise ValueError(f"unknown usage model {spec.type!r}")
