"""Scheduling simulations on the shared fit check: pods onto nodes (with equivalence groups), node
removal, drainability, utilization, template nodes (upstream's ``simulator``).
"""
