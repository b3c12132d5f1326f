"""The HPA controller: upstream-exact horizontal scaling, plus scale-to-zero, PromQL metrics
and predictive scale-up (``docs/hpa.md``)."""
