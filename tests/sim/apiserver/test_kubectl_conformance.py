"""kubectl against the in-process API server: the real CLI, its discovery, its content types.

kubectl is the strictest everyday client: it reads discovery (aggregated or legacy) before any
request, builds REST mappings from it, fetches OpenAPI to validate what ``apply`` sends, sends
strategic-merge patches with the last-applied annotation on ``apply``, uses the ``scale``
subresource, and polls or watches for the object to go on ``delete``. Every test runs
``kubectl`` (``$KUBECTL``, which tests/run.sh points at Debian's ``kubernetes-client`` 1.20,
else whichever is on PATH)
with a kubeconfig written by :meth:`ApiServer.write_kubeconfig` over TLS, and checks the result
through the server's store. Each invocation runs with ``-v=6`` so a failure shows the requests
kubectl made.

kubectl < 1.27 validates ``apply`` on the client against the protobuf ``/openapi/v2``
document, later ones leave it to the server through ``/openapi/v3``: both paths are exercised
by every ``apply`` here, with validation on.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubescale.kube.resources import DEPLOYMENTS, PODS
from kubescale.sim.apiserver.errors import ApiError
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

POD = functools.partial(builders.pods.pod, containers=[builders.pods.container(image="nginx")])

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl")  # tests/run.sh sets KUBECTL
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl is not installed (CI installs Debian's kubernetes-client)"
)
TIMEOUT = 60.0

DEPLOYMENT_YAML = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels:
    app: web
spec:
  replicas: {replicas}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: app
        image: {image}
        ports:
        - containerPort: 80
"""


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"kubectl {' '.join(self.args)} → {self.returncode}\n{self.stdout}\n{self.stderr}"


@dataclass
class Kubectl:
    server: ApiServer
    kubeconfig: Path
    home: Path

    def command(self, *args: str) -> list[str]:
        assert KUBECTL is not None
        return [
            KUBECTL,
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.home / 'cache'}",
            "--request-timeout=20s",
            "-v=6",
            *args,
        ]

    @property
    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", ""), "HOME": str(self.home)}

    async def run(self, *args: str, stdin: str | None = None) -> Result:
        process = await asyncio.create_subprocess_exec(
            *self.command(*args),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
        )
        out, err = await asyncio.wait_for(
            process.communicate(stdin.encode() if stdin is not None else None), TIMEOUT
        )
        assert process.returncode is not None
        return Result(args, process.returncode, out.decode(), err.decode())

    async def ok(self, *args: str, stdin: str | None = None) -> Result:
        result = await self.run(*args, stdin=stdin)
        assert result.returncode == 0, result.explain()
        return result


@pytest.fixture
async def kubectl(tmp_path: Path) -> AsyncIterator[Kubectl]:
    async with ApiServer() as server:
        kubeconfig = tmp_path / "kubeconfig"
        server.write_kubeconfig(kubeconfig)
        yield Kubectl(server=server, kubeconfig=kubeconfig, home=tmp_path)


def stored_deployment(kubectl: Kubectl) -> dict[str, Any]:
    return kubectl.server.store.get(DEPLOYMENTS, "web", "default")


async def test_get_lists_and_filters_by_label(kubectl: Kubectl) -> None:
    kubectl.server.store.create(POD(name="web-0", labels={"app": "web"}))
    kubectl.server.store.create(POD(name="db-0", labels={"app": "db"}))

    listed = json.loads((await kubectl.ok("get", "pods", "-n", "default", "-o", "json")).stdout)
    assert sorted(item["metadata"]["name"] for item in listed["items"]) == ["db-0", "web-0"]

    names = await kubectl.ok("get", "pods", "-n", "default", "-l", "app=web", "-o", "name")
    assert names.stdout.split() == ["pod/web-0"]

    table = await kubectl.ok("get", "pod", "web-0", "-n", "default")
    assert table.stdout.splitlines()[0].split()[0] == "NAME"
    assert "web-0" in table.stdout


async def test_get_watch_streams_new_objects(kubectl: Kubectl) -> None:
    kubectl.server.store.create(POD(name="first", labels={}))
    process = await asyncio.create_subprocess_exec(
        *kubectl.command("get", "pods", "-n", "default", "-w", "-o", "name"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=kubectl.env,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        first = await asyncio.wait_for(process.stdout.readline(), TIMEOUT)
        kubectl.server.store.create(POD(name="second", labels={}))
        second = await asyncio.wait_for(process.stdout.readline(), TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
        stderr = (await process.stderr.read()).decode()
        await process.wait()
    assert first.decode().strip() == "pod/first", stderr
    assert second.decode().strip() == "pod/second", stderr


async def test_apply_creates_then_updates(kubectl: Kubectl) -> None:
    await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT_YAML.format(replicas=2, image="nginx:1"),
    )
    created = stored_deployment(kubectl)
    assert created["spec"]["replicas"] == 2
    last_applied = created["metadata"]["annotations"][
        "kubectl.kubernetes.io/last-applied-configuration"
    ]
    assert json.loads(last_applied)["spec"]["replicas"] == 2

    result = await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT_YAML.format(replicas=3, image="nginx:2"),
    )
    assert "deployment.apps/web configured" in result.stdout
    updated = stored_deployment(kubectl)
    assert updated["spec"]["replicas"] == 3
    assert updated["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])


OPENAPI_V3_KUBECTL_MINOR = 27  # validation reads /openapi/v3 from here on


async def kubectl_minor(kubectl: Kubectl) -> int:
    version = json.loads((await kubectl.ok("version", "--client", "-o", "json")).stdout)
    return int(version["clientVersion"]["minor"].rstrip("+"))


async def test_apply_validates_against_the_servers_openapi(kubectl: Kubectl) -> None:
    # kubectl < 1.27 validates on the client against protobuf /openapi/v2; later ones ask
    # /openapi/v3 whether the server validates (fieldValidation). Both must let apply through.
    await kubectl.ok("apply", "-f", "-", stdin=DEPLOYMENT_YAML.format(replicas=2, image="nginx:1"))
    assert stored_deployment(kubectl)["spec"]["replicas"] == 2


async def test_strict_validation_rejects_unknown_fields(kubectl: Kubectl) -> None:
    if await kubectl_minor(kubectl) < OPENAPI_V3_KUBECTL_MINOR:
        pytest.skip("this kubectl has no --validate=strict (server-side field validation)")
    manifest = DEPLOYMENT_YAML.format(replicas=2, image="nginx:1")
    typo = manifest.replace("replicas: 2", "replicaz: 2")
    rejected = await kubectl.run("apply", "--validate=strict", "-f", "-", stdin=typo)
    assert rejected.returncode != 0, rejected.explain()
    assert "replicaz" in rejected.stderr, rejected.explain()


async def test_patch_strategic_merge_and_json(kubectl: Kubectl) -> None:
    await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT_YAML.format(replicas=2, image="nginx:1"),
    )

    strategic = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "n:3"}]}}}}
    await kubectl.ok("patch", "deployment", "web", "-n", "default", "-p", json.dumps(strategic))
    [container] = stored_deployment(kubectl)["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "n:3"
    assert container["ports"] == [{"containerPort": 80}]  # merged by name, not replaced

    merge = {"metadata": {"labels": {"tier": "front"}}}
    await kubectl.ok(
        "patch", "deployment", "web", "-n", "default", "--type=merge", "-p", json.dumps(merge)
    )
    assert stored_deployment(kubectl)["metadata"]["labels"] == {"app": "web", "tier": "front"}

    operations = [{"op": "replace", "path": "/spec/replicas", "value": 4}]
    await kubectl.ok(
        "patch", "deployment", "web", "-n", "default", "--type=json", "-p", json.dumps(operations)
    )
    assert stored_deployment(kubectl)["spec"]["replicas"] == 4


async def test_scale(kubectl: Kubectl) -> None:
    await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT_YAML.format(replicas=2, image="nginx:1"),
    )
    await kubectl.ok("scale", "deployment", "web", "-n", "default", "--replicas=5")
    assert stored_deployment(kubectl)["spec"]["replicas"] == 5


async def test_delete(kubectl: Kubectl) -> None:
    kubectl.server.store.create(POD(name="doomed", labels={}))
    await kubectl.ok(
        "apply",
        "-f",
        "-",
        stdin=DEPLOYMENT_YAML.format(replicas=1, image="nginx:1"),
    )

    await kubectl.ok("delete", "pod", "doomed", "-n", "default")
    await kubectl.ok("delete", "deployment", "web", "-n", "default")
    for rt, name in ((PODS, "doomed"), (DEPLOYMENTS, "web")):
        with pytest.raises(ApiError) as missing:
            kubectl.server.store.get(rt, name, "default")
        assert missing.value.code == 404


async def test_top_and_raw_reads_of_the_metrics_apis(kubectl: Kubectl) -> None:
    server = kubectl.server
    server.store.create(POD(name="web-0", labels={"app": "web"}))
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi"},
            "allocatable": {"cpu": "4", "memory": "8Gi"},
        },
    }
    server.store.create(node)
    server.metrics.set_pod_metrics(
        namespace="default",
        name="web-0",
        labels={"app": "web"},
        containers={"app": {"cpu": "250m", "memory": "64Mi"}},
    )
    server.metrics.set_node_metrics(name="n1", usage={"cpu": "1", "memory": "2Gi"})
    server.metrics.set_pod_metric(
        namespace="default", pod="web-0", metric="rps", value=12, pod_labels={"app": "web"}
    )

    pods = await kubectl.ok("top", "pod", "-n", "default", "-l", "app=web", "--containers")
    assert [line.split() for line in pods.stdout.splitlines()[1:]] == [
        ["web-0", "app", "250m", "64Mi"]
    ]
    nodes = await kubectl.ok("top", "node")
    assert [line.split() for line in nodes.stdout.splitlines()[1:]] == [
        ["n1", "1000m", "25%", "2048Mi", "25%"]
    ]
    raw = await kubectl.ok(
        "get", "--raw", "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/*/rps"
    )
    assert [item["value"] for item in json.loads(raw.stdout)["items"]] == ["12"]
