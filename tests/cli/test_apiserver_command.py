"""``kubescale apiserver --kubeconfig-out``: a standalone process the real client can use."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes.aio import client

from kubescale.cli.main import main
from tests.sim.apiserver.conftest import client_configuration, loose

REPO = Path(__file__).resolve().parents[2]


async def test_standalone_server_serves_the_client_until_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    crds = tmp_path / "crds"
    crds.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubescale",
        "apiserver",
        "--kubeconfig-out",
        str(kubeconfig),
        "--crd-dir",
        str(crds),
        env=env,
        cwd=str(tmp_path),
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        # Until the file is written or the server exits (no count of tries, which a loaded
        # machine outlasts; issue 32.7); the timeout only guards against a hang.
        async with asyncio.timeout(600):
            while True:
                if kubeconfig.exists() or process.returncode is not None:
                    break
                await asyncio.sleep(0.05)
        assert kubeconfig.exists(), "the server did not write its kubeconfig"
        assert kubeconfig.stat().st_mode & 0o777 == 0o600
        configuration = await client_configuration(yaml.safe_load(kubeconfig.read_text()))
        assert configuration.host.startswith("https://127.0.0.1:")
        async with client.ApiClient(configuration=configuration) as api:
            core = loose(client.CoreV1Api(api))
            names = [ns.metadata.name for ns in (await core.list_namespace()).items]
            assert names == ["default", "kube-node-lease", "kube-public", "kube-system"]
            await core.create_namespaced_config_map("default", {"metadata": {"name": "cm"}})
            assert (await core.read_namespaced_config_map("cm", "default")).metadata.name == "cm"
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), timeout=10)
    assert code == 0
    assert process.stderr is not None
    log = (await process.stderr.read()).decode()
    assert "kubeconfig written" in log


def test_a_missing_crd_dir_is_an_error_not_silence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent"
    argv = ["apiserver", "--kubeconfig-out", str(tmp_path / "kc"), "--crd-dir", str(missing)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"kubescale apiserver: error: --crd-dir {missing}: not a directory\n"
    )
    assert not (tmp_path / "kc").exists()
