"""An in-process Kubernetes API server speaking the real REST protocol over HTTP(S).

Entry point: :class:`kubescale.sim.apiserver.server.ApiServer`. The parts, in request order:
``routing`` (URL → resource), ``rest`` (verbs), ``faults`` (injected failures),
``field_validation``, ``writes`` (admission around create/update), ``store``/``storage``/
``deletion`` (the registry rules and the objects), ``listing`` (selectors, paging), ``watch``,
``subresources``/``eviction``, ``discovery``/``openapi``, ``crds``, ``kubeconfig``; PATCH
algorithms in ``patching``; webhooks in ``admission`` (the chain), ``admission_matching``
(which webhooks a request calls) and ``webhook_calls`` (the HTTPS calls); the metrics APIs in
``metrics_apis`` (routes, discovery) and ``metrics_values`` (what they answer); metav1.Status
errors in ``errors``.
"""
