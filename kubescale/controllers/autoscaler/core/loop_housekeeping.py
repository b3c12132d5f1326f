"""Housekeeping steps of ``RunOnce`` before any scaling decision (reference §1 steps 1, 10-15),
each a decision (a generator of intents, :data:`kubescale.plans.executor.Decision`) that the
iteration's one decision (:mod:`.run_once_decision`) runs in upstream's order:

* :meth:`Housekeeping.problems_decision` — node groups the provider skipped (malformed
  annotations) are told once each, as a Warning event ``InvalidNodeGroup`` on their object;
* :meth:`~Housekeeping.clean_up_decision` — first loop only: ToBeDeleted taints an earlier run
  left behind are removed (``cleanUpIfRequired``);
* :meth:`~Housekeeping.state_effects_decision` — what the cluster state registry asks for: a
  timed-out scale-up is taken back (``DecreaseTargetSize``, event ``ScaleUpTimedOut`` "Nodes
  added to group <g> failed to register within <d>"), new instance-creation errors are told
  (``ScaleUpFailed``);
* :meth:`~Housekeeping.unregistered_decision` — ``removeOldUnregisteredNodes``: instances
  unregistered for longer than the provision time are deleted, within ``target − min`` unless
  ``--force-delete-unregistered-nodes`` (``DeleteUnregistered``); it returns the groups it
  resized;
* :meth:`~Housekeeping.created_with_errors_decision` — ``deleteCreatedNodesWithErrors``;
* :meth:`~Housekeeping.fix_sizes_decision` — ``fixNodeGroupSize``: a group whose size has been
  wrong (fewer registered nodes than its target) for longer than the provision time gets its
  target lowered.

A node group write left unanswered (:class:`~.cloud_provider.WriteOutcomeUnknown`) counts as
done, as everywhere in kubescale: a timed-out scale-up's revert is not reported failed, a size
fix ends the iteration.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from kubescale.base.go_time import go_duration_string
from kubescale.base.logs import component_logger
from kubescale.controllers.autoscaler.cloudprovider.cloud_provider import (
    CloudProvider,
    ProviderSnapshot,
    WriteOutcomeUnknown,
)
from kubescale.controllers.autoscaler.cloudprovider.provider_writes import (
    ACTOR,
    node_group_failure,
)
from kubescale.controllers.autoscaler.clusterstate.cluster_state import (
    ClusterStateRegistry,
    InstanceCreationFailed,
    ScaleUpTimedOut,
    UnregisteredNode,
)
from kubescale.controllers.autoscaler.config.autoscaler_settings import AutoscalerSettings
from kubescale.controllers.autoscaler.metrics.autoscaler_metrics import AutoscalerMetrics
from kubescale.controllers.autoscaler.model.node_facts import (
    TO_BE_DELETED_TAINT,
    node_name,
    taint_time,
)
from kubescale.objects.node import Node
from kubescale.plans.executor import Decision
from kubescale.plans.intents import DeleteNodes, Event, ResizeNodeGroup, Untaint

__all__ = ["Housekeeping"]

log = component_logger("cluster-autoscaler")

EventSink = Callable[[str, str, str], None]


class Housekeeping:
    """The module docstring's steps."""

    def __init__(
        self,
        *,
        provider: CloudProvider,
        registry: ClusterStateRegistry,
        settings: AutoscalerSettings,
        metrics: AutoscalerMetrics,
        status_event: EventSink,
    ) -> None:
        self.provider = provider
        self.registry = registry
        self.settings = settings
        self.metrics = metrics
        self.status_event = status_event
        self.reported_problems: set[str] = set()

    def problems_decision(self, snapshot: ProviderSnapshot) -> Decision[None]:
        """Each node group the provider skipped is told once, as a Warning event
        ``InvalidNodeGroup`` on its object."""
        current = {p.message for p in snapshot.problems}
        for problem in snapshot.problems:
            if problem.message in self.reported_problems:
                continue
            log.warning("node group skipped", extra={"fields": {"problem": problem.message}})
            if problem.source is not None:
                yield Event(
                    actor=ACTOR,
                    involved=problem.source,
                    type="Warning",
                    reason="InvalidNodeGroup",
                    message=problem.message,
                )
        self.reported_problems = current

    def clean_up_decision(self, nodes: Iterable[Node]) -> Decision[None]:
        """``cleanUpIfRequired``: ToBeDeleted taints an earlier run left behind."""
        for node in nodes:
            if taint_time(node, TO_BE_DELETED_TAINT) is None:
                continue
            cleaned = yield Untaint(
                actor=ACTOR,
                node=node_name(node),
                key=TO_BE_DELETED_TAINT,
                uncordon=self.settings.cordon_node_before_terminating,
            )
            if cleaned.error is not None:
                log.warning(
                    "cannot clean up a taint", extra={"fields": {"error": str(cleaned.error)}}
                )

    def state_effects_decision(self, effects: Sequence[object]) -> Decision[None]:
        """What the cluster state registry's update asks for: a timed-out scale-up taken back
        (``DecreaseTargetSize``), instance creation errors told."""
        for effect in effects:
            if isinstance(effect, ScaleUpTimedOut):
                group = effect.group
                waited = go_duration_string(effect.waited.total_seconds())
                self.status_event(
                    "Warning",
                    "ScaleUpTimedOut",
                    f"Nodes added to group {group.id} failed to register within {waited}",
                )
                self.metrics.failed_scale_ups_total.labels("timeout").inc()
                applied = yield ResizeNodeGroup(actor=ACTOR, group=group.id, delta=-effect.increase)
                err = node_group_failure(applied)
                if isinstance(err, WriteOutcomeUnknown):
                    log.warning(
                        "revert of a timed-out scale-up unanswered; counted as done",
                        extra={"fields": {"group": group.id, "error": str(err)}},
                    )
                elif err is not None:
                    self.status_event(
                        "Warning",
                        "FailedToRevertScaleUp",
                        f"Failed to decrease target size for group {group.id} after scale-up "
                        f"timeout: {err}",
                    )
            elif isinstance(effect, InstanceCreationFailed):
                self.status_event(
                    "Warning",
                    "ScaleUpFailed",
                    f"Failed adding {effect.count} nodes to group {effect.group.id} due to "
                    f"{effect.error.error_class.value}.{effect.error.code}; source errors: "
                    f"{effect.error.message}",
                )
                self.metrics.failed_scale_ups_total.labels("cloudProviderError").inc()

    def unregistered_decision(
        self, snapshot: ProviderSnapshot, long_unregistered: Sequence[UnregisteredNode]
    ) -> Decision[set[str]]:
        """``removeOldUnregisteredNodes``: one
        :class:`~kubescale.plans.intents.DeleteNodes` per instance (oldest first), while the
        group stays above its min size counting the removals already made (unless
        ``--force-delete-unregistered-nodes``); a removal left unanswered counts as done."""
        removed: dict[str, int] = {}
        for unregistered in long_unregistered:
            group = snapshot.groups.get(unregistered.group_id)
            if group is None:
                continue
            done = removed.get(group.id, 0)
            if not self.settings.force_delete_unregistered_nodes and (
                group.target_size - done <= group.min_size
            ):
                continue
            fake: Node = {
                "metadata": {"name": unregistered.instance_id},
                "spec": {"providerID": unregistered.instance_id},
            }
            applied = yield DeleteNodes(actor=ACTOR, group=group.id, nodes=[fake])
            err = node_group_failure(applied)
            if isinstance(err, WriteOutcomeUnknown):
                # counts as done until the group's objects show otherwise
                log.warning(
                    "removal of an unregistered node unanswered; counted as done",
                    extra={"fields": {"group": group.id, "error": str(err)}},
                )
                removed[group.id] = done + 1
                continue
            if err is not None:
                self.status_event(
                    "Warning",
                    "DeleteUnregisteredFailed",
                    f"Failed to remove node {unregistered.instance_id}: {err}",
                )
                continue
            removed[group.id] = done + 1
            self.status_event(
                "Normal",
                "DeleteUnregistered",
                f"Removed unregistered node {unregistered.instance_id}",
            )
            self.metrics.old_unregistered_nodes_removed_count.inc()
        return set(removed)

    def created_with_errors_decision(self, snapshot: ProviderSnapshot) -> Decision[None]:
        """``deleteCreatedNodesWithErrors``: instances whose creation failed, one
        :class:`~kubescale.plans.intents.DeleteNodes` per group."""
        for group in snapshot.groups.values():
            failed = [i for i in group.instances if i.error is not None]
            if not failed:
                continue
            fakes: list[Node] = [
                {"metadata": {"name": i.id}, "spec": {"providerID": i.id}} for i in failed
            ]
            applied = yield DeleteNodes(actor=ACTOR, group=group.id, nodes=fakes)
            err = node_group_failure(applied)
            if err is not None:
                log.warning(
                    "cannot delete failed instances",
                    extra={"fields": {"group": group.id, "error": str(err)}},
                )

    def fix_sizes_decision(self, snapshot: ProviderSnapshot, now: datetime) -> Decision[bool]:
        """``fixNodeGroupSize``: a size wrong for longer than the provision time is lowered
        (``DecreaseTargetSize`` by current − expected); whether a resize was done (or left
        unanswered: counted as done), on which upstream's ``RunOnce`` ends the iteration."""
        fixed = False
        for group in snapshot.groups.values():
            incorrect = self.registry.incorrect_sizes.get(group.id)
            if incorrect is None:
                continue
            if incorrect.first_observed + group.options.max_node_provision_time > now:
                continue
            delta = incorrect.current - incorrect.expected
            if delta >= 0:
                continue
            log.info(
                "fixing node group size",
                extra={
                    "fields": {
                        "group": group.id,
                        "from": incorrect.expected,
                        "to": incorrect.current,
                    }
                },
            )
            applied = yield ResizeNodeGroup(actor=ACTOR, group=group.id, delta=delta)
            err = node_group_failure(applied)
            if isinstance(err, WriteOutcomeUnknown):
                # counts as done until the group's object shows otherwise
                log.warning(
                    "node group size fix unanswered; counted as done",
                    extra={"fields": {"group": group.id, "error": str(err)}},
                )
            elif err is not None:
                log.warning("cannot fix node group size", extra={"fields": {"error": str(err)}})
                continue
            fixed = True
        return fixed
