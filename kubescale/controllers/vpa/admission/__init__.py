"""The VPA admission decision on the shared cache: what the webhook answers and what the cluster
autoscaler binpacks with (upstream keeps the rules in ``pkg/utils/vpa``; here the cached decision
is shared too).
"""
