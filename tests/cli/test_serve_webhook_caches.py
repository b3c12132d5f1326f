"""What ``kubescale serve`` caches with the VPA admission webhook alone (issue 29).

Upstream's admission controller watches VPAs, LimitRanges and, through its controller fetcher,
the seven well-known workload-controller kinds; kubescale's webhook adds namespaces (what it
keeps per namespace is released on the namespace's DELETE) and, with ``--avoid-hpa-conflict``
(on under the default one-brain coordination), HPAs. A webhook-only replica starts those
informers and no other — no pods, no nodes — and caches the controllers as the controller lookups
read them (owner chain and selector), without the pod template; with every component on, the
same Deployment is cached with its template (the recommender, the updater and the HPA read it).
VPAs and HPAs alike: the webhook alone caches them projected (the fields their TypedDicts name:
no ``managedFields``, no ``kubectl`` last-applied copy), a process with the updater, which writes
VPAs back, caches them whole.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.components import REGISTRY
from kubescale.kube.resources import (
    DEPLOYMENTS,
    HORIZONTAL_POD_AUTOSCALERS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.sim.apiserver.server import ApiServer
from tests import builders

WEBHOOK_COLLECTIONS = {
    "verticalpodautoscalers",
    "limitranges",
    "horizontalpodautoscalers",
    "namespaces",
    "deployments",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "jobs",
    "cronjobs",
    "replicationcontrollers",
}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MANAGED_FIELDS = [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1"}]
TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
}


async def _until_ready(server: Server) -> None:
    url = f"http://127.0.0.1:{server.health_port}/readyz"
    async with aiohttp.ClientSession() as session:
        for _ in range(2000):  # a hang guard, not a time bound
            async with session.get(url) as response:
                if response.status == 200:
                    return
            await asyncio.sleep(0.01)
    raise AssertionError("never ready")


def _with_unread_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with what a server adds and no reader reads: managedFields, kubectl's copy."""
    obj["metadata"]["managedFields"] = MANAGED_FIELDS
    obj["metadata"]["annotations"] = {LAST_APPLIED: "{}", "team": "web"}
    return obj


async def _serve_and_read(
    cert_dir: Path, tmp_path: Path, flags: list[str]
) -> tuple[set[str], dict[str, Any] | None, dict[str, dict[str, Any] | None]]:
    """The collections the process watches, its cached Deployment ``default/web`` and its
    cached VPA and HPA ``default/web`` by plural."""
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    async with ApiServer() as api:
        api.store.load(
            [
                builders.workloads.deployment(match_labels={"app": "web"}, template=TEMPLATE),
                _with_unread_metadata(
                    builders.vpas.vpa(name="web", target=target, targets={"app": {"cpu": "1"}})
                ),
                _with_unread_metadata(
                    builders.hpas.hpa(name="web", target=target, min_replicas=1, max_replicas=3)
                ),
            ]
        )
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = [
            "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
            "--tls-cert-file", str(cert_dir / "serverCert.pem"),
            "--tls-private-key", str(cert_dir / "serverKey.pem"),
            "--client-ca-file", str(cert_dir / "caCert.pem"),
            "--kubeconfig", str(kubeconfig), "--leader-elect", "false",
            "--webhook-service-namespace", "kube-system", "--register-webhook", "false",
            *flags,
        ]  # fmt: skip
        config = serve_config_from_args(build_parser().parse_args(argv))
        started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(config, clock=RealClock(), components=default_components(config, environ={}),
                  started=started, install_signal_handlers=False)
        )  # fmt: skip
        server = await asyncio.wait_for(started, timeout=30)  # a hang guard
        try:
            await _until_ready(server)
            assert server.cache is not None
            collections = set(server.cache.collections())
            deployments = server.cache.informers.informer(DEPLOYMENTS)
            cached = deployments.lister.get("web", "default")
            others = {
                rt.plural: server.cache.informers.informer(rt).lister.get("web", "default")
                for rt in (VERTICAL_POD_AUTOSCALERS, HORIZONTAL_POD_AUTOSCALERS)
                if rt.plural in collections
            }
        finally:
            server.stop_event.set()
            assert await asyncio.wait_for(task, timeout=30) == 0
    return collections, cached, others


async def test_the_webhook_alone_caches_only_what_it_reads(cert_dir: Path, tmp_path: Path) -> None:
    others = [a for spec in REGISTRY if spec.name != "webhook" for a in (f"--{spec.name}", "false")]
    collections, cached, vpa_and_hpa = await _serve_and_read(
        cert_dir, tmp_path, ["--webhook", "true", *others]
    )
    assert collections == WEBHOOK_COLLECTIONS
    assert cached is not None
    assert cached["spec"] == {"selector": {"matchLabels": {"app": "web"}}}  # no template
    assert cached["metadata"]["uid"]
    assert set(vpa_and_hpa) == {"verticalpodautoscalers", "horizontalpodautoscalers"}
    for plural, obj in vpa_and_hpa.items():
        assert obj is not None, plural
        assert "managedFields" not in obj["metadata"], plural
        assert obj["metadata"]["annotations"] == {"team": "web"}, plural  # no last-applied
        assert obj["spec"]["targetRef" if plural == "verticalpodautoscalers" else "scaleTargetRef"]
    vpa = vpa_and_hpa["verticalpodautoscalers"]
    assert vpa is not None
    assert vpa["status"]["recommendation"]["containerRecommendations"][0]["target"] == {"cpu": "1"}


@pytest.mark.parametrize("with_webhook", [True, False])
async def test_with_a_reader_of_templates_the_template_is_cached(
    cert_dir: Path, tmp_path: Path, with_webhook: bool
) -> None:
    flags = ["--webhook", str(with_webhook).lower(), "--vpa-updater", "true"]
    flags += [
        a
        for spec in REGISTRY
        if spec.name not in ("webhook", "vpa-updater")
        for a in (f"--{spec.name}", "false")
    ]
    collections, cached, vpa_and_hpa = await _serve_and_read(cert_dir, tmp_path, flags)
    assert "pods" in collections  # the updater's
    assert cached is not None
    assert cached["spec"]["template"] == TEMPLATE
    vpa = vpa_and_hpa.get("verticalpodautoscalers")
    assert vpa is not None  # the updater writes VPAs back: cached whole, with the webhook too
    assert vpa["metadata"]["managedFields"] == MANAGED_FIELDS
    assert LAST_APPLIED in vpa["metadata"]["annotations"]
