"""How the systems of the suite coordinate: one process-wide setting, ``--coordination``.

``one-brain`` (the default) — the systems decide together: every voluntary disruption (VPA
updater eviction or resize, descheduler eviction, cluster-autoscaler drain and consolidation)
is granted by one arbiter against one ledger per workload and per cluster; the VPA leaves alone
the resource an HPA on the same workload scales on; the cluster autoscaler binpacks pending pods
with the requests the webhook will give them; the descheduler evicts a pod only when the fit
simulation finds it a better place, and the cluster autoscaler's scale-down does not remove, in
its next loops, a node the descheduler just moved pods onto.

``separate`` — upstream's behaviour, the five systems as separate programs: each loop has its
own budget and counts only its own disruptions, the VPA does not know about the HPA, the
cluster autoscaler reads the requests in the pod spec, the descheduler evicts without the fit
check. It exists so that a user (and ``kubescale simulate``'s comparison) can see what the
coordination buys on the same cluster and seed.

On the ground floor because every layer reads it: the access layer's disruption ledger, the
component contract (:class:`kubescale.runtime.component.Runtime` carries it to every component)
and the simulator's scenarios (the ``coordination:`` key).
"""

from __future__ import annotations

import argparse
import enum
from typing import Final

__all__ = ["COORDINATION_VALUES", "DEFAULT_COORDINATION", "Coordination", "parse_coordination"]


class Coordination(enum.Enum):
    ONE_BRAIN = "one-brain"
    SEPARATE = "separate"

    @property
    def shared(self) -> bool:
        """Whether the systems share one budget and one view (``one-brain``)."""
        return self is Coordination.ONE_BRAIN


DEFAULT_COORDINATION: Final = Coordination.ONE_BRAIN
COORDINATION_VALUES: Final = tuple(c.value for c in Coordination)


def parse_coordination(text: str) -> Coordination:
    """``one-brain`` or ``separate`` (a flag or scenario value) → :class:`Coordination`."""
    for value in Coordination:
        if value.value == text:
            return value
    raise argparse.ArgumentTypeError(
        f"invalid coordination {text!r} (want one of: {', '.join(COORDINATION_VALUES)})"
    )
