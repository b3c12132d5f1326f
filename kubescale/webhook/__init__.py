"""VPA admission webhook: pod mutation from VPA recommendations and VPA object validation."""
