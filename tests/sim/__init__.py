"""Tests of the simulated cluster, its scenarios and reports."""
