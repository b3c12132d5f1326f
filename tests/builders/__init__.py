"""One set of object builders per kind for every test (issue 28 item 5).

Each builder returns the plain dict the API would send, with keyword-only parameters; a
parameter left at ``None`` leaves its field out, so a test states exactly the fields it reads.
A module that needs other defaults passes them at the call site or keeps a module-level
``functools.partial`` (``tests/platform/test_test_tree.py`` rejects a second builder).
``typed_pod``/``typed_node``/``typed_pdb`` are the same builders typed as the
:mod:`kubescale.objects` TypedDicts (``Pod``, ``Node``, ``PodDisruptionBudget``), for code typed
with them (``typed_machine_set`` likewise); :func:`~tests.builders.nodes.sim_node` is the Node the
simulated cloud's kubelet registers; :func:`~tests.builders.meta.json_body` turns a typed
object back into the plain dict the simulated API server's store takes.
"""

from tests.builders import (
    admission,
    cluster_api,
    hpas,
    limit_ranges,
    meta,
    nodes,
    pdbs,
    pods,
    vpas,
    workloads,
)

__all__ = [
    "admission",
    "cluster_api",
    "hpas",
    "limit_ranges",
    "meta",
    "nodes",
    "pdbs",
    "pods",
    "vpas",
    "workloads",
]
