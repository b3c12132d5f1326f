"""Recommendation policies: how the model's state becomes a container's recommendation.

``upstream`` (the default) is upstream VPA 1.8's estimator chain
(:mod:`kubescale.controllers.vpa.model.estimators`), unchanged. ``adaptive``
(:mod:`~kubescale.controllers.vpa.model.policy.adaptive_estimator`) is kubescale's opt-in policy:
it reads the same histograms plus each aggregate's OOM log
(:mod:`~kubescale.controllers.vpa.model.policy.oom_log`). Results and the tuning procedure:
``docs/vpa-recommendation-policy.md``.
"""
