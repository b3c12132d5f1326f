"""The VPA recommender: upstream VPA 1.8's recommender, number for number.

Pure model modules (no I/O, no clock reads; times are aware UTC datetimes passed in):

* :mod:`kubescale.controllers.vpa.go_math` — the Go ``math``/``time`` arithmetic the model depends
  on (``math.Log``/``Exp2``/``Pow`` as compiled for amd64, ``time.Time.Round``, int64 truncation),
  scalar and numpy-vectorised, bit-for-bit;
* :mod:`kubescale.controllers.vpa.histogram` — exponential bucketing and decaying histograms, stored
  as rows of per-resource stores behind a per-histogram API;
* :mod:`kubescale.controllers.vpa.histogram_rows` — the rows' bucket-weight pools (dense 176-bucket
  slots, or narrow windows for rows whose weights stay within a few buckets, e.g. memory);
* :mod:`kubescale.controllers.vpa.aggregate_state` — ``AggregateContainerState`` and
  ``ContainerState`` (CPU sample ordering, memory peaks per aggregation interval, OOM bump-up);
* :mod:`kubescale.controllers.vpa.estimators` and :mod:`kubescale.controllers.vpa.recommendation` —
  the model flags, the percentile/margin/confidence/pod-minimum estimator chain and the
  post-processors;
* :mod:`kubescale.controllers.vpa.checkpoint_format` — ``VerticalPodAutoscalerCheckpoint`` v3
  objects;
* :mod:`kubescale.controllers.vpa.cluster_state` — ``ClusterState``, the boundary the recommender
  loop and the Prometheus history provider feed.
"""
