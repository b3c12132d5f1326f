"""The tests mirror the package tree, and objects are built by one set of builders per kind
(issue 28 item 5).

- Every folder under ``tests/`` mirrors a package of ``kubescale/`` (a test of
  ``kubescale/x/y/z.py`` lives in ``tests/x/y/test_z*.py``), except the few folders that test
  the product as a whole (:data:`CROSS_CUTTING`). Every folder is a package (``__init__.py``):
  pytest's default import mode then names modules by their path, so two ``test_backoff.py``
  in different folders do not collide.
- A test module outside ``tests/builders/`` defines no builder of its own for a kind the
  builders cover: no module-level function named after the kind (``pod``, ``_pod``,
  ``make_pod``, ``pod_manifest``, …) that returns a dict (annotated ``dict[…]``,
  ``Mapping[…]``, ``Any``, an ``Obj`` alias, or not annotated). It imports
  :mod:`tests.builders` instead (a module-level ``functools.partial`` with other defaults is
  fine: it is not a second builder). :data:`PENDING` lists the builders not converted yet; it
  may only shrink.
- Nor does a test module wrap one: no module-level function whose body is a single ``return``
  of a call to a :mod:`tests.builders` function (``def running_pod(name): return
  builders.pods.pod(name=name, …)``); a test calls the builder itself, with a
  ``functools.partial`` for the defaults its rows share.

Both checks are functions of a directory, so the planted violations below run them on a tree
made for the purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kubescale

PACKAGE_ROOT = Path(kubescale.__file__).resolve().parent
TESTS_ROOT = Path(__file__).resolve().parents[1]

CROSS_CUTTING = frozenset(
    {
        "platform",  # layers, packaging, the process as a whole (split brain, CPU starvation)
        "manifests",  # the repository's manifests/, charts/ and release files
        "builders",  # tests/builders: one set of object builders per kind
        "bench",  # the repository's bench/ scripts, run at a tiny size
    }
)

KINDS = frozenset(
    {
        "pod",
        "node",
        "namespace",
        "vpa",
        "hpa",
        "deployment",
        "replica_set",
        "stateful_set",
        "daemon_set",
        "job",
        "pdb",
        "limit_range",
        "machine_deployment",
        "machine_set",
        "machine",
        "review",
        "admission_review",
    }
)
"""Kinds :mod:`tests.builders` builds (``pods``, ``nodes``, ``vpas``, ``hpas``, ``workloads``,
``pdbs``, ``limit_ranges``, ``cluster_api``, ``admission``)."""

DICT_WORDS = frozenset(
    {"dict", "Mapping", "MutableMapping", "Any", "Obj"}
    | {"Pod", "Node", "Machine", "MachineSet", "MachineDeployment", "PodDisruptionBudget"}
    | {"VerticalPodAutoscaler"}
    | {"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "Namespace"}
)
"""A return annotation of one of these types (or none) marks a function returning an API
object — a kind's TypedDict of :mod:`kubescale.objects` is such a dict too;
``st.SearchStrategy[Any]`` or a parsed ``LimitRangeItem`` do not."""

PENDING: frozenset[str] = frozenset()
"""``path::name`` of private builders not converted to :mod:`tests.builders` yet."""


def mirror_violations(tests_root: Path, package_root: Path) -> list[str]:
    """Folders under ``tests_root`` that mirror no package under ``package_root`` (and are not
    cross-cutting), and folders without ``__init__.py``."""
    found: list[str] = []
    for folder in sorted(p for p in tests_root.rglob("*") if p.is_dir()):
        if folder.name == "__pycache__" or not any(folder.glob("*.py")):
            continue
        rel = folder.relative_to(tests_root)
        if not (folder / "__init__.py").is_file():
            found.append(f"tests/{rel.as_posix()}: no __init__.py")
        if rel.parts[0] in CROSS_CUTTING:
            continue
        if not (package_root / rel).is_dir():
            found.append(f"tests/{rel.as_posix()}: mirrors no package of kubescale/")
    return found


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
    return modules


def deeper_violations(tests_root: Path, package_root: Path) -> list[str]:
    """Test modules that belong in a deeper folder: every module they import of the package
    their folder mirrors lies in one subpackage of it (``tests/controllers/test_histogram.py``
    importing only ``kubescale.controllers.vpa.model.*`` belongs under ``controllers/vpa/``)."""
    found: list[str] = []
    for path in sorted(tests_root.rglob("test_*.py")):
        rel = path.parent.relative_to(tests_root)
        if "__pycache__" in rel.parts or not rel.parts or not (package_root / rel).is_dir():
            continue
        package = ".".join((package_root.name, *rel.parts))
        subpackages: set[str] = set()
        direct = False
        for module in _imported_modules(path):
            if module == package:
                direct = True
            elif module.startswith(package + "."):
                first = module.removeprefix(package + ".").split(".")[0]
                if (package_root / rel / first).is_dir():
                    subpackages.add(first)
                else:
                    direct = True
        if not direct and len(subpackages) == 1:
            found.append(
                f"tests/{path.relative_to(tests_root).as_posix()}: belongs in "
                f"tests/{rel.as_posix()}/{subpackages.pop()}/"
            )
    return found


def _kind(name: str) -> str | None:
    """The kind a function's name builds, if it is a builder's name."""
    bare = name.lstrip("_")
    for prefix in ("make_", "new_", "build_"):
        bare = bare.removeprefix(prefix)
    bare = bare.removesuffix("_manifest").removesuffix("_object")
    return bare if bare in KINDS else None


def builder_violations(tests_root: Path) -> list[str]:
    """``path::name`` of module-level functions outside ``tests/builders/`` named after a kind
    the builders cover that return a dict (not decorated: a fixture or a hypothesis strategy is
    not a builder; a parsed value such as a ``LimitRangeItem`` is not an API object)."""
    found: list[str] = []
    for path in sorted(tests_root.rglob("*.py")):
        rel = path.relative_to(tests_root)
        if rel.parts[0] == "builders" or "__pycache__" in rel.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if node.decorator_list or _kind(node.name) is None:
                continue
            if node.returns is not None:
                outer = node.returns
                if isinstance(outer, ast.Subscript):
                    outer = outer.value
                if ast.unparse(outer).rsplit(".", 1)[-1] not in DICT_WORDS:
                    continue
            found.append(f"tests/{rel.as_posix()}::{node.name}")
    return found


def _builder_imports(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names a module binds to :mod:`tests.builders` modules (``builders``, ``pods``) and to
    its functions (``typed_pod``)."""
    modules: set[str] = set()
    functions: set[str] = set()
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not node.module or node.level:
            continue
        if node.module == "tests":
            modules.update(a.asname or a.name for a in node.names if a.name == "builders")
        elif node.module == "tests.builders":
            modules.update(a.asname or a.name for a in node.names)
        elif node.module.startswith("tests.builders."):
            functions.update(a.asname or a.name for a in node.names)
    return modules, functions


def _root_name(expr: ast.expr) -> str | None:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def wrapper_violations(tests_root: Path) -> list[str]:
    """``path::name`` of module-level functions of test modules (``test_*.py``) whose body,
    docstring aside, is one ``return`` of a call to a :mod:`tests.builders` function (not
    decorated: a fixture or a strategy is no wrapper)."""
    found: list[str] = []
    for path in sorted(tests_root.rglob("test_*.py")):
        rel = path.relative_to(tests_root)
        if rel.parts[0] == "builders" or "__pycache__" in rel.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        modules, functions = _builder_imports(tree)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.decorator_list:
                continue
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if len(body) != 1 or not isinstance(body[0], ast.Return):
                continue
            call = body[0].value
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            if (isinstance(func, ast.Name) and func.id in functions) or (
                isinstance(func, ast.Attribute) and _root_name(func) in modules
            ):
                found.append(f"tests/{rel.as_posix()}::{node.name}")
    return found


def test_every_test_folder_mirrors_a_package() -> None:
    assert mirror_violations(TESTS_ROOT, PACKAGE_ROOT) == []
    assert deeper_violations(TESTS_ROOT, PACKAGE_ROOT) == []


def test_no_test_module_defines_its_own_builder() -> None:
    found = set(builder_violations(TESTS_ROOT))
    assert sorted(found - PENDING) == [], "use tests.builders instead"
    assert sorted(PENDING - found) == [], "converted: remove from PENDING"


def test_no_test_module_wraps_a_builder() -> None:
    """The 14 such wrappers of batch 7 (``running_pod_of_web``, ``ranked_pod``, ``revision``,
    …) are direct builder calls now."""
    assert wrapper_violations(TESTS_ROOT) == [], "call the builder (functools.partial for rows)"


PLANTED_WRAPPERS = '''\
import functools
from tests import builders
from tests.builders import pods as built
from tests.builders.pods import pod as build
from kubescale.objects.views import meta
def running_pod(name: str) -> dict:
    return builders.pods.pod(name=name)
def live_pod(name: str) -> dict:
    """A live pod."""
    return built.pod(name=name)
def bound_pod(name: str) -> dict:
    return build(name=name)
ready_pod = functools.partial(builders.pods.pod, name="a")
def pending_pod(name: str) -> dict:
    pod = build(name=name)
    return pod
def name_of(pod: dict) -> str:
    return meta(pod).name
@pytest.fixture
def web_pod() -> dict:
    return build(name="web")
'''
"""Three wrappers, and what is not one: a partial, a body of more than the return, a call of
another module, a fixture."""


def test_the_wrapper_check_catches_planted_wrappers(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    (tests / "kube").mkdir(parents=True)
    (tests / "builders").mkdir()
    (tests / "builders" / "pods.py").write_text(
        "def pod(*, name: str) -> dict:\n    return {}\n"
        "def running_pod(name: str) -> dict:\n    return pod(name=name)\n"
    )
    (tests / "kube" / "test_wraps.py").write_text(PLANTED_WRAPPERS)
    (tests / "kube" / "helpers.py").write_text(
        "from tests import builders\n"
        "def fit_node(name: str) -> dict:\n    return builders.nodes.node(name=name)\n"
    )
    assert wrapper_violations(tests) == [
        "tests/kube/test_wraps.py::running_pod",
        "tests/kube/test_wraps.py::live_pod",
        "tests/kube/test_wraps.py::bound_pod",
    ]


def test_the_checks_catch_planted_violations(tmp_path: Path) -> None:
    package = tmp_path / "kubescale"
    (package / "kube").mkdir(parents=True)
    (package / "kube" / "__init__.py").write_text("")
    (package / "controllers" / "vpa" / "model").mkdir(parents=True)
    (package / "controllers" / "hpa").mkdir(parents=True)
    tests = tmp_path / "tests"
    for folder in ("kube", "nowhere", "builders", "platform", "loose", "controllers"):
        (tests / folder).mkdir(parents=True)
        if folder != "loose":
            (tests / folder / "__init__.py").write_text("")
    (package / "loose").mkdir()
    (tests / "nowhere" / "test_x.py").write_text("def test_x() -> None:\n    assert True\n")
    (tests / "loose" / "test_y.py").write_text("def test_y() -> None:\n    assert True\n")
    (tests / "builders" / "pods.py").write_text("def pod(*, name: str) -> dict:\n    return {}\n")
    (tests / "kube" / "test_ok.py").write_text(
        "import functools\n"
        "from tests.builders.pods import pod as build\n"
        "pod = functools.partial(build, name='a')\n"
        "def _pod(state: object) -> None:\n    pass\n"
        "def pods() -> list[dict]:\n    return []\n"
        "def _node(fields: dict) -> st.SearchStrategy[Any]:\n    return st.none()\n"
        "def limit_range(**lists: str) -> LimitRangeItem:\n    return parse(lists)\n"
        "class Cluster:\n    def pod(self) -> dict:\n        return {}\n"
    )
    (tests / "kube" / "test_bad.py").write_text(
        "from typing import Any\n"
        "def _pod(name: str) -> dict[str, Any]:\n    return {'metadata': {'name': name}}\n"
        "def make_vpa(name):\n    return {}\n"
        "def limit_range_manifest() -> dict:\n    return {}\n"
    )
    (tests / "controllers" / "test_histogram.py").write_text(
        "from kubescale.controllers.vpa.model.histogram import Histogram\n"
        "from kubescale.objects.quantities import Quantity\n"
    )
    (tests / "controllers" / "test_both.py").write_text(
        "from kubescale.controllers.vpa.model import histogram\n"
        "from kubescale.controllers.hpa import hpa_loop\n"
    )
    assert deeper_violations(tests, package) == [
        "tests/controllers/test_histogram.py: belongs in tests/controllers/vpa/"
    ]
    assert mirror_violations(tests, package) == [
        "tests/loose: no __init__.py",
        "tests/nowhere: mirrors no package of kubescale/",
    ]
    assert builder_violations(tests) == [
        "tests/kube/test_bad.py::_pod",
        "tests/kube/test_bad.py::make_vpa",
        "tests/kube/test_bad.py::limit_range_manifest",
    ]
