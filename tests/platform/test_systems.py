"""The one brain is the architecture: systems meet only in the coordination layer.

Three rules, each checked over the whole package and each shown failing on a planted violation
(the checkers run on a source string or a small tree, so the proof stays with the test):

(a) no system imports another system — the systems are the VPA (``kubescale.controllers.vpa``
    and ``kubescale.webhook``, its admission-controller server), the HPA controller, the
    cluster autoscaler, the descheduler and the scheduler extender; where one needs another's
    computation the coordination layer defines a port and the wiring plugs the provider in;
(b) no branch on the coordination setting (``.shared``, ``Coordination.SEPARATE`` /
    ``ONE_BRAIN``, ``coordination ==``, a ``one_brain`` flag) outside ``kubescale.coordination``
    — the setting's definition (``kubescale.base.coordination``) and the wiring that passes it
    on (``cli``, the simulator's scenarios) excepted;
(c) the coordination layer imports no system.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

from tests.platform.test_layers import IMPORTS, PACKAGE_ROOT, Import, _Walker, _where

SYSTEMS: Final[dict[str, str]] = {
    "kubescale.controllers.vpa": "vpa",
    "kubescale.webhook": "vpa",
    "kubescale.controllers.hpa": "hpa",
    "kubescale.controllers.autoscaler": "cluster-autoscaler",
    "kubescale.controllers.descheduler": "descheduler",
    "kubescale.extender": "scheduler-extender",
}
"""Module prefix → system (the webhook is the VPA's admission controller)."""

BRANCH_FREE_EXEMPT: Final = ("kubescale.coordination", "kubescale.base.coordination")
"""Where the setting is defined and read."""
WIRING: Final = ("kubescale.cli", "kubescale.sim")
"""The wiring that picks the implementation from a flag or a scenario key (the simulator's own
``shared`` usage streams are unrelated to the setting)."""


def system_of(module: str) -> str | None:
    for prefix, system in SYSTEMS.items():
        if module == prefix or module.startswith(prefix + "."):
            return system
    return None


def _inside(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def cross_system_imports(imports: Iterable[Import]) -> set[tuple[str, str]]:
    """(importer, imported) module pairs where one system imports another."""
    found: set[tuple[str, str]] = set()
    for imp in imports:
        source, target = system_of(imp.source), system_of(imp.target)
        if source is not None and target is not None and source != target:
            found.add((imp.source, imp.target))
    return found


def coordination_imports_of_systems(imports: Iterable[Import]) -> list[str]:
    return [
        _where(imp)
        for imp in imports
        if _inside(imp.source, ("kubescale.coordination",)) and system_of(imp.target) is not None
    ]


def coordination_branches(module: str, source: str) -> Iterator[str]:
    """``module:line what`` for each read of the coordination setting in ``source``."""
    if _inside(module, BRANCH_FREE_EXEMPT) or _inside(module, WIRING):
        return
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Attribute):
            if node.attr == "shared":
                what = ".shared"
            elif (
                node.attr in {"SEPARATE", "ONE_BRAIN"}
                and isinstance(node.value, ast.Name)
                and node.value.id == "Coordination"
            ):
                what = f"Coordination.{node.attr}"
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_names_coordination(o) for o in operands):
                what = "coordination comparison"
        elif isinstance(node, ast.Name | ast.arg | ast.keyword):
            name = node.id if isinstance(node, ast.Name) else node.arg
            if name == "one_brain":
                what = "one_brain"
        if what is not None:
            yield f"{module}:{getattr(node, 'lineno', 0)} {what}"


def _names_coordination(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "coordination") or (
        isinstance(node, ast.Attribute) and node.attr == "coordination"
    )


def _package_sources(root: Path) -> Iterator[tuple[str, str]]:
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path.read_text(encoding="utf-8")


def all_coordination_branches(root: Path) -> list[str]:
    return [
        hit
        for module, source in _package_sources(root)
        for hit in coordination_branches(module, source)
    ]


def _planted_imports(module: str, source: str) -> list[Import]:
    walker = _Walker(module, is_package=False)
    walker.visit(ast.parse(source))
    return walker.imports


# -- (a) ----------------------------------------------------------------------------------------


def test_no_system_imports_another_system() -> None:
    assert sorted(cross_system_imports(IMPORTS)) == []


def test_a_system_importing_another_is_caught() -> None:
    planted = _planted_imports(
        "kubescale.controllers.autoscaler.component",
        "from kubescale.controllers.vpa.admission.cached_pod_admission import CachedPodAdmission\n",
    )
    assert cross_system_imports(planted) == {
        (
            "kubescale.controllers.autoscaler.component",
            "kubescale.controllers.vpa.admission.cached_pod_admission",
        )
    }
    # the webhook is the VPA: the VPA's own modules are not "another system"
    same = _planted_imports(
        "kubescale.webhook.example", "from kubescale.controllers.vpa import api\n"
    )
    assert cross_system_imports(same) == set()
    # a system may use the coordination layer
    port = _planted_imports(
        "kubescale.extender.example", "from kubescale.coordination import ports\n"
    )
    assert cross_system_imports(port) == set()


# -- (b) ----------------------------------------------------------------------------------------


def test_no_coordination_branch_outside_the_coordination_layer() -> None:
    assert all_coordination_branches(PACKAGE_ROOT) == []


def test_coordination_branches_are_caught(tmp_path: Path) -> None:
    planted = {
        "controllers/vpa/updater/loop.py": "if cache.coordination.shared:\n    pass\n",
        "controllers/descheduler/loop.py": (
            "from kubescale.base.coordination import Coordination\n"
            "x = runtime.coordination is Coordination.SEPARATE\n"
        ),
        "webhook/component.py": "y = Coordination.ONE_BRAIN\n",
        "controllers/hpa/loop.py": "z = 1 if coordination == c else 2\n",
        "extender/component.py": "def f(*, one_brain: bool) -> None:\n    return None\n",
        "controllers/autoscaler/loop.py": "if self.disruptions.shared:\n    pass\n",
        # allowed: inside the coordination layer, and the wiring
        "coordination/brain.py": "shared = coordination.shared\n",
        "cli/serve.py": "c = Coordination.ONE_BRAIN\n",
    }
    root = tmp_path / "kubescale"
    for name, text in planted.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert all_coordination_branches(root) == [
        "kubescale.controllers.autoscaler.loop:1 .shared",
        "kubescale.controllers.descheduler.loop:2 coordination comparison",
        "kubescale.controllers.descheduler.loop:2 Coordination.SEPARATE",
        "kubescale.controllers.hpa.loop:1 coordination comparison",
        "kubescale.controllers.vpa.updater.loop:1 .shared",
        "kubescale.extender.component:1 one_brain",
        "kubescale.webhook.component:1 Coordination.ONE_BRAIN",
    ]


# -- (c) ----------------------------------------------------------------------------------------


def test_the_coordination_layer_imports_no_system() -> None:
    assert coordination_imports_of_systems(IMPORTS) == []


def test_the_coordination_layer_importing_a_system_is_caught() -> None:
    planted = _planted_imports(
        "kubescale.coordination.example",
        "from kubescale.controllers.descheduler.framework.eviction import PodEvictor\n",
    )
    assert coordination_imports_of_systems(planted) == [
        "kubescale.coordination.example:1 imports "
        "kubescale.controllers.descheduler.framework.eviction"
    ]
