"""``bench/informer_sync.py`` (issue 29) at 60 pods: an API server child, the informers synced in
this process, every field of its JSON line; with ``--lookup-reads`` the controller kinds are
cached without their pod template (smaller). No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, *flags: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "informer_sync.py"), "--pods", "60",
         "--work", str(tmp_path), *flags],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,  # a hang guard
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_tiny_sync_reports_every_field(tmp_path: Path) -> None:
    kinds = ["pods", "deployments", "replicasets"]
    whole = _run(tmp_path, "--kinds", *kinds, "--profile", str(tmp_path / "profile.txt"))
    # 60 pods: 60 / 15 = 4 Deployments and ReplicaSets (bench/scale_cluster.py's shape)
    assert whole["objects"] == {"pods": 60, "deployments": 4, "replicasets": 4}
    assert set(whole) >= {
        "cpu_seconds",
        "server_cpu_seconds",
        "server_rss_mib",
        "wall_seconds",
        "rss_mib",
        "peak_rss_mib",
        "cache_mib",
    }
    assert whole["server_cpu_seconds"] >= 0  # the child's CPU over the sync, from /proc
    assert whole["server_rss_mib"] > 0
    assert whole["profiled"] is True
    assert "cumulative" in (tmp_path / "profile.txt").read_text()
    narrow = _run(tmp_path, "--kinds", *kinds, "--lookup-reads")
    assert narrow["objects"] == whole["objects"]
    for kind in ("deployments", "replicasets"):
        assert narrow["cache_mib"][kind] < whole["cache_mib"][kind]
    assert narrow["cache_mib"]["pods"] == whole["cache_mib"]["pods"]
