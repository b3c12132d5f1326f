"""Server-side field validation: Strict rejects unknown fields, Warn (the default) warns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.aio import client
from kubernetes.aio.client.exceptions import ApiException

from tests import builders
from tests.sim.apiserver.conftest import loose


def with_typos() -> dict[str, Any]:
    body = builders.workloads.deployment(
        name="web",
        namespace=None,
        replicas=1,
        match_labels={"app": "web"},
        template=builders.workloads.pod_template(
            labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
        ),
    )
    body["spec"] = {"replicaz": 2, **body["spec"]}  # reported in document order
    body["spec"]["template"]["spec"]["containers"][0]["imagez"] = "nginx"
    return body


async def send(api: Any, method: str, path: str, body: Any, **headers: str) -> Any:
    """A raw request through the client's transport: the generated methods validate bodies
    against their models and would refuse the unknown fields before sending them."""
    response = await api.call_api(
        method,
        api.configuration.host + path,
        header_params={"Content-Type": "application/json", **headers},
        body=body,
    )
    await response.read()
    return response


DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


async def test_strict_rejects_unknown_fields(api: Any) -> None:
    response = await send(api, "POST", DEPLOYMENTS + "?fieldValidation=Strict", with_typos())
    status = json.loads(response.data)
    assert response.status == 400
    assert status["reason"] == "BadRequest"
    assert status["message"] == (
        'strict decoding error: unknown field "spec.replicaz", unknown field '
        '"spec.template.spec.containers[0].imagez"'
    )


async def test_warn_is_the_default_and_answers_warning_headers(api: Any) -> None:
    response = await send(api, "POST", DEPLOYMENTS, with_typos())
    assert response.status == 201
    assert response.headers.getall("Warning") == [
        r'299 - "unknown field \"spec.replicaz\""',
        r'299 - "unknown field \"spec.template.spec.containers[0].imagez\""',
    ]
    ignored = await send(api, "PUT", DEPLOYMENTS + "/web?fieldValidation=Ignore", with_typos())
    assert ignored.status == 200
    assert "Warning" not in ignored.headers


async def test_strict_checks_the_patched_object(api: Any) -> None:
    apps = loose(client.AppsV1Api(api))
    await apps.create_namespaced_deployment(
        "default",
        builders.workloads.deployment(
            name="web",
            namespace=None,
            replicas=1,
            match_labels={"app": "web"},
            template=builders.workloads.pod_template(
                labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
            ),
        ),
    )
    response = await send(
        api,
        "PATCH",
        DEPLOYMENTS + "/web?fieldValidation=Strict",
        {"spec": {"paused": True, "pausd": True}},
        **{"Content-Type": "application/merge-patch+json"},
    )
    assert response.status == 400
    assert json.loads(response.data)["message"] == (
        'strict decoding error: unknown field "spec.pausd"'
    )
    patched = await apps.patch_namespaced_deployment(
        "web", "default", {"spec": {"paused": True}}, field_validation="Strict"
    )
    assert patched.spec.paused is True


async def test_known_fields_of_every_section_pass_strict(api: Any) -> None:
    core = loose(client.CoreV1Api(api))
    pod = {
        "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {"x": "y"}},
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx",
                    "resources": {"requests": {"cpu": "1"}},
                    "env": [
                        {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
                    ],
                }
            ],
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {}},
        },
    }
    created = await core.create_namespaced_pod("default", pod, field_validation="Strict")
    assert created.metadata.name == "p"


async def test_unknown_mode_is_bad_request(api: Any) -> None:
    with pytest.raises(ApiException) as caught:
        await loose(client.AppsV1Api(api)).create_namespaced_deployment(
            "default",
            builders.workloads.deployment(
                name="web",
                namespace=None,
                replicas=1,
                match_labels={"app": "web"},
                template=builders.workloads.pod_template(
                    labels={"app": "web"}, containers=[builders.pods.container(image="nginx")]
                ),
            ),
            field_validation="Loud",
        )
    assert caught.value.status == 400
