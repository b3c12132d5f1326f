"""A kubescale component in a run: its routes on kubescale's TLS server are reached by the
API server's admission chain (a mutating webhook configuration the component creates) and by
the simulated scheduler (an extender entry the component declares), both over verified TLS."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from aiohttp import web

from kubescale.kube.resources import PODS
from kubescale.sim.scenario.kubescale_components import ComponentContext, ComponentSetup
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


def _component(context: ComponentContext) -> ComponentSetup:
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
                "service": {"namespace": context.service_namespace,
                            "name": context.service_name, "path": "/mutate"},
                "caBundle": context.ca_bundle,
            },
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
        }],
    }  # fmt: skip
    return ComponentSetup(
        mounts=(_routes,),
        objects=(webhook,),
        extenders=({"urlPrefix": "/extender", "filterVerb": "filter", "nodeCacheCapable": True},),
    )


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
    async with SimulationRun(scenario, extra_components=[_component]) as run:
        await run.run()
        pods = run.api.store.snapshots(PODS)
    assert len(pods) == 3
    assert all(pod["metadata"]["labels"]["admitted-by"] == "kubescale" for pod in pods)
    assert {pod["spec"]["nodeName"] for pod in pods} == {"node-1"}
