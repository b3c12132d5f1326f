"""kubescale: one process that autoscales a Kubernetes cluster."""

__version__ = "0.1.0"
