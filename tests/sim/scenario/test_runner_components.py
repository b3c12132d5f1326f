"""A kubescale component in a run: its routes on kubescale's TLS server are reached by the
API server's admission chain (a mutating webhook configuration the component registers when it
starts, as a real one would) and by the simulated scheduler (an extender entry the component
declares), both over verified TLS."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from kubescale.kube.resources import MUTATING_WEBHOOK_CONFIGURATIONS, PODS
from kubescale.runtime.component import BaseComponent, Runtime
from kubescale.sim.scenario.runner import SimulationRun
from kubescale.sim.scenario.scenario_validation import parse_scenario

LABEL_PATCH = [{"op": "add", "path": "/metadata/labels/admitted-by", "value": "kubescale"}]


def _routes(app: web.Application) -> None:
    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        response = {
            "uid": review["request"]["uid"],
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(LABEL_PATCH).encode()).decode(),
        }
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    async def keep_node_1(request: web.Request) -> web.Response:
        args = await request.json()
        names = args["NodeNames"]
        failed = {name: "not node-1" for name in names if name != "node-1"}
        kept = [name for name in names if name == "node-1"]
        return web.json_response({"NodeNames": kept, "FailedNodes": failed, "Error": ""})

    app.router.add_post("/mutate", mutate)
    app.router.add_post("/extender/filter", keep_node_1)


class _TestComponent(BaseComponent):
    name = "test-component"

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def mount(self, app: web.Application) -> None:
        _routes(app)

    def scheduler_extenders(self) -> Sequence[Mapping[str, Any]]:
        return ({"urlPrefix": "/extender", "filterVerb": "filter", "nodeCacheCapable": True},)

    async def start(self) -> None:
        service = self.runtime.service
        assert service is not None
        ca_bundle = base64.b64encode(self.runtime.certificates.client_ca_file.read_bytes())
        webhook = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "test-component"},
            "webhooks": [{
                "name": "label.kubescale.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "clientConfig": {
                    "service": {"namespace": service.namespace,
                                "name": service.name, "path": "/mutate"},
                    "caBundle": ca_bundle.decode(),
                },
                "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["pods"]}],
            }],
        }  # fmt: skip
        await self.runtime.client.create(MUTATING_WEBHOOK_CONFIGURATIONS, webhook)


async def test_a_component_serves_admission_and_the_scheduler_extender() -> None:
    document: dict[str, Any] = {
        "name": "component",
        "duration": "5m",
        "nodes": [{"name": "node", "count": 2, "allocatable": {"cpu": "4", "memory": "8Gi"}}],
        "workloads": [
            {"kind": "Deployment", "name": "web", "replicas": 3,
             "containers": [{"name": "app", "requests": {"cpu": "100m"},
                             "usage": {"type": "constant", "cpu": "50m"}}]},
        ],
    }  # fmt: skip
    scenario = parse_scenario(document, base_dir=Path())
    async with SimulationRun(scenario, extra_components=[_TestComponent]) as run:
        await run.run()
        pods = run.api.store.snapshots(PODS)
    assert len(pods) == 3
    assert all(pod["metadata"]["labels"]["admitted-by"] == "kubescale" for pod in pods)
    assert {pod["spec"]["nodeName"] for pod in pods} == {"node-1"}
