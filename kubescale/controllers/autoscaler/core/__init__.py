"""The loop: upstream's ``StaticAutoscaler.RunOnce`` in steps, its metrics, pod lists and node
writes (upstream's ``core``).
"""
