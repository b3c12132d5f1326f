"""Flags and settings of the cluster autoscaler (upstream's ``config`` and flag set), including
the disruption budgets' syntax.
"""
