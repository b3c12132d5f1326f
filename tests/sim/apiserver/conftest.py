"""Fixtures: a started ApiServer and real ``kubernetes.aio`` clients talking to it over HTTPS."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes.aio import client, config

from kubescale.base.clock import VirtualClock
from kubescale.sim.apiserver.server import ApiServer
from tests import builders


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
async def server(clock: VirtualClock) -> AsyncIterator[ApiServer]:
    async with ApiServer(clock=clock, crd_dirs=[], bookmark_interval=0.2) as api_server:
        yield api_server


async def client_configuration(kubeconfig: dict[str, Any]) -> Any:
    configuration = client.Configuration()
    load: Any = config.load_kube_config_from_dict  # untyped in kubernetes 37
    await load(kubeconfig, client_configuration=configuration)
    return configuration


@pytest.fixture
async def api(server: ApiServer) -> AsyncIterator[Any]:
    """A ``kubernetes.aio`` ApiClient configured from the server's (TLS) kubeconfig."""
    configuration = await client_configuration(server.kubeconfig())
    async with client.ApiClient(configuration=configuration) as api_client:
        yield api_client


def status_of(exc: Any) -> dict[str, Any]:
    """The metav1.Status body of a ``kubernetes.aio`` ApiException."""
    body = json.loads(exc.body)
    assert isinstance(body, dict)
    return body


async def json_of(response: Any) -> Any:
    """The JSON body of a ``*_without_preload_content`` response (an aiohttp response)."""
    try:
        return await response.json(content_type=None)
    finally:
        response.release()


pod_manifest = functools.partial(
    builders.pods.pod,
    namespace=None,
    labels={},
    containers=[builders.pods.container(image="nginx")],
)
"""A pod ``app`` (nginx), no namespace in its metadata; keywords of ``tests.builders.pods.pod``."""


def loose(generated_api: object) -> Any:
    """A generated API object typed as ``Any``: the tests pass raw dicts as bodies and read
    optional model fields directly, which the client accepts at run time but its pydantic
    signatures do not express."""
    return generated_api
