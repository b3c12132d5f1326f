"""``bench/vpa_updater_iteration.py`` (issue 29) at 300 pods: its machinery and its counters.

The figures are the bench's; here a tiny run (300 pods: 20 Deployments of 15, 10 VPAs over
150 pods) through the in-process API server and the real client fills every field, and its
counters follow the churn: the first iteration matches every controlled pod (300) and prices
every pod under a VPA (150); each later one matches exactly the pods changed before it (5 label
updates) and prices at most those. No timing is asserted.
"""

from __future__ import annotations

from bench import vpa_updater_iteration as bench


async def test_a_tiny_run_counts_what_changed() -> None:
    args = bench.parse_args(["--pods", "300", "--iterations", "3", "--churn", "5"])
    report, profile = await bench.measure(args)
    assert profile == ""
    first, *later = report["iterations"]
    # 300 pods / 15 = 20 Deployments; a VPA on every other one = 10 VPAs over 10 x 15 pods
    assert (report["vpas"], first["vpas"], first["pods"]) == (10, 10, 150)
    assert (first["matched_anew"], first["priced_anew"]) == (300, 150)
    assert first["intents"] == 0  # the recommendation holds the requests: nothing to update
    for iteration in later:
        assert iteration["matched_anew"] == 5
        assert iteration["priced_anew"] <= 5
        assert iteration["snapshot_cpu_seconds"] >= 0
        assert iteration["decide_cpu_seconds"] >= 0
