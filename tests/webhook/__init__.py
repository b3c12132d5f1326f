"""Tests of the VPA admission webhook (webhook/)."""
