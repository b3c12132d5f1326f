"""The embedded simulated cluster: an in-process Kubernetes API server and the actors on it."""
