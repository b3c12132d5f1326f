"""The descheduler: upstream kubernetes-sigs/descheduler's loop, ten strategies and DefaultEvictor.

* :mod:`.policy` — the ``descheduler/v1alpha2`` ``DeschedulerPolicy``: parsing, defaults and
  validation of every plugin's arguments, errors naming the field.
* :mod:`.framework` — pod facts, the DefaultEvictor, eviction limits and one descheduling cycle
  (all profiles' Deschedule plugins, then all Balance plugins) as a pure generator of evictions.
* :mod:`.strategies` — the ten strategy plugins.
* :mod:`.placement` — "would the policy evict this pod from that node", the rules the scheduler
  extender (:mod:`kubescale.extender`) shares with the strategies.
* which node each owner's pods were recently evicted from, and the one-brain budget of a
  cycle, are the coordination layer's (:mod:`kubescale.coordination.eviction_memory`,
  :mod:`kubescale.coordination.descheduler_budget`).
* :mod:`.descheduler_loop` — the loop that reads the informer caches, runs a cycle and evicts
  through the Eviction API; :mod:`.descheduler_config` its flags, :mod:`.descheduler_metrics`
  upstream's ``descheduler_*`` metrics, :mod:`.usage_sources` real node usage
  (metrics.k8s.io, Prometheus) for ``LowNodeUtilization``'s ``metricsUtilization``.
"""
