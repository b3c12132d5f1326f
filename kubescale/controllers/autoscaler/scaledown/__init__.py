"""Scale-down: unneeded nodes, the actuator, consolidation and disruption cost
(upstream's ``core/scaledown``).
"""
