"""The VPA: upstream VPA 1.8's recommender and updater, and the API rules they share with the
admission webhook (:mod:`kubescale.webhook`).

* :mod:`.api` — the rules of a VPA object every part applies (upstream ``pkg/utils/vpa``,
  ``limitrange``, ``target`` and the admission controller's recommendation provider): update
  modes and container policies, the top-most controller and the VPA a pod belongs to, current
  resources, LimitRange merge, min/maxAllowed and LimitRange capping, proportional limits, the
  resources and patches a recommendation gives a pod.
* :mod:`.model` — the recommender's pure model (Go-exact histograms, aggregate container state,
  estimators, post-processors, ``ClusterState``).
* :mod:`.checkpoint` — ``VerticalPodAutoscalerCheckpoint`` v3 format and store.
* :mod:`.recommender` — the recommender loop: feeder, OOM observer, status, Prometheus history.
* :mod:`.updater` — the updater loop: update priority, eviction restriction, rate limit.
"""
