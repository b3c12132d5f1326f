"""Scenarios for the simulated cluster: their format, the runner, and the reports of a run."""
