"""How many nodes a group needs for pending pods (upstream's ``estimator``, binpacking)."""
