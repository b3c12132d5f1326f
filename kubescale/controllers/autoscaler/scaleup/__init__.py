"""Scale-up: options, similar-group balancing, resource limits and their execution
(upstream's ``core/scaleup``).
"""
