"""Controller loops (VPA recommender/updater, HPA, cluster autoscaler, descheduler).

Each is a ``run_once(now)`` run on an interval by :mod:`kubescale.runtime.loop_runner`.
"""
