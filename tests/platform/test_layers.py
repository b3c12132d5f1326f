"""The layers read top-down: a test that walks every import of the package.

Floors, top to bottom (an import may point down or stay on its floor, never up):

====  ==========================================================================
 9    ``kubescale.cli``, ``kubescale.__main__``, ``kubescale`` itself (CLI, wiring)
 8    ``kubescale.sim`` (simulation and test infrastructure; inside it
      ``scenario`` → ``cluster`` → ``apiserver``)
 7    ``kubescale.components`` (the registry, which plugs providers into the coordination
      layer's ports), ``kubescale.report`` (live cluster report)
 6    ``kubescale.webhook``, ``kubescale.extender``, ``kubescale.controllers`` (the systems)
 5    ``kubescale.plans`` (the intents every loop's decision returns and the one executor
      that applies them through the coordination layer)
 4    ``kubescale.coordination`` (the one brain: the systems' ports and both implementations)
 3    ``kubescale.runtime``, ``kubescale.scheduling`` (component contract; fit simulation)
 2    ``kubescale.kube``, ``kubescale.certs``, ``kubescale.prometheus`` (access layer),
      ``kubescale.rendering`` (report rendering shared by the simulator and ``report``)
 1    ``kubescale.base`` (ground floor: imports nothing of kubescale above it),
      ``kubescale.objects`` (typed API objects and value types; may import ``base``, never
      imported by it)
====  ==========================================================================

Also: no import cycle between packages or between modules; no import of a kubescale module
inside a function or under ``TYPE_CHECKING`` (workarounds for a cycle that should not exist);
the product never imports the simulator. Imports by name are allowed in two tables only:
``kubescale.cli.main`` loads the module of the command on the command line
(``importlib.import_module``, its ``COMMANDS`` table) — lazy command dispatch, so that
``--help`` imports nothing else; and the registry (``kubescale.components``) imports a system's
component when that system is enabled (its ``BuildByName`` entries: a webhook-only replica
loads no other system, issue 29). Both are ordinary imports of modules on their own floor or
below, not workarounds for a cycle; the tables' modules count as imported by their module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import kubescale
from kubescale.cli.main import COMMANDS
from kubescale.components import REGISTRY, BuildByName

PACKAGE_ROOT = Path(kubescale.__file__).resolve().parent

FLOORS: list[tuple[str, int]] = [
    ("kubescale.cli", 9),
    ("kubescale.__main__", 9),
    ("kubescale.sim", 8),
    ("kubescale.components", 7),
    ("kubescale.report", 7),
    ("kubescale.webhook", 6),
    ("kubescale.extender", 6),
    ("kubescale.controllers", 6),
    ("kubescale.plans", 5),
    ("kubescale.coordination", 4),
    ("kubescale.runtime", 3),
    ("kubescale.scheduling", 3),
    ("kubescale.kube", 2),
    ("kubescale.certs", 2),
    ("kubescale.prometheus", 2),
    ("kubescale.rendering", 2),
    ("kubescale.base", 1),
    ("kubescale.objects", 1),
]
SIM_FLOORS = {"kubescale.sim.scenario": 3, "kubescale.sim.cluster": 2, "kubescale.sim.apiserver": 1}


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    local: bool
    """Inside a function, or under ``if TYPE_CHECKING``."""


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_ROOT.rglob("*.py"))}


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = source.split(".") if is_package else source.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


class _Walker(ast.NodeVisitor):
    def __init__(self, source: str, is_package: bool) -> None:
        self.source = source
        self.is_package = is_package
        self.imports: list[Import] = []
        self._depth = 0

    def _nested(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = _nested
    visit_AsyncFunctionDef = _nested

    def visit_If(self, node: ast.If) -> None:
        guarded = isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
        if guarded:
            self._depth += 1
        self.generic_visit(node)
        if guarded:
            self._depth -= 1

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        target = _resolve(self.source, self.is_package, node)
        for alias in node.names:
            # "from package import module" names a module; "from module import name" does not
            candidate = f"{target}.{alias.name}"
            self._add(candidate if candidate in _MODULES else target, node.lineno)

    def _add(self, target: str, line: int) -> None:
        if target == "kubescale" or target.startswith("kubescale."):
            self.imports.append(Import(self.source, target, line, local=self._depth > 0))


_MODULES = _modules()


def _imports() -> Iterator[Import]:
    for name, path in _MODULES.items():
        walker = _Walker(name, path.name == "__init__.py")
        walker.visit(ast.parse(path.read_text(encoding="utf-8")))
        yield from walker.imports


IMPORTS = list(_imports())


def _floor(module: str, floors: list[tuple[str, int]] = FLOORS) -> int | None:
    for prefix, floor in floors:
        if module == prefix or module.startswith(prefix + "."):
            return floor
    return 8 if module == "kubescale" else None


def _where(imp: Import) -> str:
    return f"{imp.source}:{imp.line} imports {imp.target}"


def test_every_module_has_a_floor() -> None:
    assert [m for m in _MODULES if _floor(m) is None] == []


def test_no_import_runs_up() -> None:
    upward = [
        _where(imp) for imp in IMPORTS if (_floor(imp.target) or 0) > (_floor(imp.source) or 0)
    ]
    assert upward == []


def test_the_ground_floor_imports_nothing_above_it() -> None:
    above = [
        _where(imp)
        for imp in IMPORTS
        if imp.source.startswith("kubescale.base") and not imp.target.startswith("kubescale.base")
    ]
    assert above == []


def test_the_typed_objects_import_only_the_base() -> None:
    """``kubescale.objects`` shares the ground floor: it may use ``base`` (times), ``base`` may
    not use it."""
    above = [
        _where(imp)
        for imp in IMPORTS
        if imp.source.startswith("kubescale.objects")
        and not imp.target.startswith(("kubescale.objects", "kubescale.base"))
    ]
    assert above == []


def test_the_simulated_cluster_never_imports_the_scenario_and_report_code() -> None:
    sim_floors = list(SIM_FLOORS.items())
    upward = [
        _where(imp)
        for imp in IMPORTS
        if imp.source.startswith("kubescale.sim.")
        and imp.target.startswith("kubescale.sim.")
        and (_floor(imp.target, sim_floors) or 0) > (_floor(imp.source, sim_floors) or 0)
    ]
    assert upward == []


def test_the_product_never_imports_the_simulator() -> None:
    product = [
        _where(imp)
        for imp in IMPORTS
        if (_floor(imp.source) or 0) < 7 and imp.target.startswith("kubescale.sim")
    ]
    assert product == []


def test_no_local_import_workarounds() -> None:
    assert [_where(imp) for imp in IMPORTS if imp.local] == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _package(module: str) -> str:
    path = _MODULES.get(module)
    return module if path is not None and path.name == "__init__.py" else module.rpartition(".")[0]


def _imports_by_name() -> list[str]:
    """Where the package calls ``importlib.import_module`` (or ``__import__``)."""
    found = []
    for name, path in _MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("import_module", "__import__"):
                    found.append(f"{name}:{node.lineno}")
    return found


def test_only_the_cli_and_the_registry_import_by_name_and_only_their_tables() -> None:
    assert sorted({where.split(":")[0] for where in _imports_by_name()}) == [
        "kubescale.cli.main",
        "kubescale.components",
    ]
    for command in COMMANDS:
        assert f"kubescale.cli.{command.module}" in _MODULES, command
    for spec in REGISTRY:
        assert isinstance(spec.build, BuildByName), spec.name
        named = [spec.build.module, *(module for _, module, _ in spec.build.providers)]
        for module in named:
            assert module in _MODULES, (spec.name, module)
            # the registry's floor (7) is above every system's (6): no upward import by name
            assert (_floor(module) or 0) <= (_floor("kubescale.components") or 0), module


def test_no_import_cycle_between_packages() -> None:
    edges: dict[str, set[str]] = {}
    for imp in IMPORTS:
        source, target = _package(imp.source), _package(imp.target)
        if source != target and not source.startswith(target + "."):
            # a package's modules may use their parent package's modules (its shared pieces)
            edges.setdefault(source, set()).add(target)
    assert _cycles(edges) == []


def test_no_import_cycle_between_modules() -> None:
    edges: dict[str, set[str]] = {}
    for imp in IMPORTS:
        if imp.target in _MODULES and imp.target != imp.source:
            edges.setdefault(imp.source, set()).add(imp.target)
    assert _cycles(edges) == []


def test_the_walker_sees_an_upward_and_a_local_import() -> None:
    """The checks above can fail: a module that imports the CLI from a function is caught."""
    walker = _Walker("kubescale.base.example", is_package=False)
    walker.visit(ast.parse("def f():\n    from kubescale.cli.main import main\n    return main\n"))
    (imp,) = walker.imports
    assert imp.local
    assert (_floor(imp.target) or 0) > (_floor(imp.source) or 0)
