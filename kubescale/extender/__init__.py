"""Scheduler extender: ``/filter`` and ``/prioritize`` enforcing the descheduler's policy."""
