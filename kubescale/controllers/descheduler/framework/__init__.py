"""The descheduling framework: pod facts, DefaultEvictor, limits, one cycle."""
