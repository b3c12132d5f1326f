"""The cluster autoscaler's taints on nodes it is removing, shared by every system that must
respect them: the autoscaler that sets them, the descheduler that leaves such nodes to the
autoscaler's drain and never counts them as a better place (upstream ``pkg/utils/taints``).
"""

from __future__ import annotations

from typing import Final

__all__ = ["AUTOSCALER_MARKS", "DELETION_CANDIDATE_TAINT", "TO_BE_DELETED_TAINT"]

TO_BE_DELETED_TAINT: Final = "ToBeDeletedByClusterAutoscaler"
"""On a node the autoscaler is draining and removing (NoSchedule)."""
DELETION_CANDIDATE_TAINT: Final = "DeletionCandidateOfClusterAutoscaler"
"""On a node the autoscaler found unneeded (PreferNoSchedule, soft)."""
AUTOSCALER_MARKS: Final = frozenset({TO_BE_DELETED_TAINT, DELETION_CANDIDATE_TAINT})
