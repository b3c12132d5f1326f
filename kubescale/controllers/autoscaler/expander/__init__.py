"""Choosing among scale-up options (upstream's ``expander``: random, most-pods, least-waste,
price with its pricing model, priority, and their chain).
"""
