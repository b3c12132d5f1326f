"""Plans: what a loop decided to do to the cluster, as typed intents, and the one executor.

A loop's iteration reads its snapshot (informers, a few GETs), then *decides* without touching
the client: the decision is a :data:`~.intents.Plan` (an ordered list of intents) or, where a
later step needs an earlier step's outcome (the VPA updater counts an eviction in its budget
only if it was done or may have been), a generator that yields one intent at a time and
receives its :class:`~.executor.Applied` result (:data:`~.executor.Decision`). The
:class:`~.executor.PlanExecutor` applies either through the client: it checks the write gate
(the leader Lease) before each write, makes evictions and resizes through the disruption
ledger, counts a write whose outcome is unknown (timeout, 5xx) as done, queues events on the
system's recorder, and counts every intent in one metric the same way for every system.

``--dry-run`` (:mod:`.dry_run`, upstream descheduler's flag name) runs the same decisions with
an executor that writes nothing: each intent is printed as one line (:func:`.intents.describe`)
and answered as done.
"""
