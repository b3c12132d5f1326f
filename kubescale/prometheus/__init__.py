"""A Prometheus HTTP query API client, as client_golang calls it, and its value formats."""
