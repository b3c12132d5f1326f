"""The VPA's answer to the autoscaler (``controllers/vpa/requests_ahead.py``): an answer with what
it was decided from, which the autoscaler keeps across scans while it still holds.

The cluster is ``test_admission_routes``' (Deployment ``web`` → ReplicaSet ``web-rs``, VPA
``web-vpa`` on the Deployment in ``Recreate``, target cpu 250m / memory 200Mi; the pod asks
100m / 100Mi), on the real informers of the in-process API server.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import RealClock
from kubescale.controllers.vpa.requests_ahead import WebhookRequestsAhead
from kubescale.kube.client import connect
from kubescale.kube.resources import VERTICAL_POD_AUTOSCALERS
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of
from kubescale.sim.apiserver.server import ApiServer
from tests.builders.meta import stored_as
from tests.builders.pods import container, typed_pod
from tests.webhook.test_admission_routes import _recommendation, _seed, web_pod


@pytest.fixture
async def ahead(tmp_path: Path) -> AsyncIterator[tuple[ApiServer, Any, WebhookRequestsAhead]]:
    async with ApiServer(seed=1) as api:
        _seed(api)
        api.write_kubeconfig(tmp_path / "kubeconfig")
        kube = await connect(kubeconfig=tmp_path / "kubeconfig", rng=random.Random(0))
        cache = SharedCache(client=kube, clock=RealClock())
        provider = WebhookRequestsAhead(cache)
        cache.start()
        try:
            assert await cache.wait_synced(within=30.0)
            yield api, kube, provider
        finally:
            await cache.stop()
            await kube.close()


def _requests(pod: Pod) -> dict[str, str]:
    return dict(spec_of(pod)["containers"][0]["resources"]["requests"])


async def test_an_answer_holds_until_the_vpa_changes(
    ahead: tuple[ApiServer, Any, WebhookRequestsAhead],
) -> None:
    api, kube, provider = ahead
    pending = stored_as(web_pod(name="web-rs-1"), Pod)
    answer = provider.answer_for(pending)
    # a pending pod is counted with the webhook's requests: the VPA's target
    assert _requests(answer.pod) == {"cpu": "250m", "memory": "200Mi"}
    assert answer.basis is not None
    assert not answer.pod_only
    assert provider.still_current(answer)
    assert provider.requests_for(pending) == answer.pod

    await kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web-vpa",
        {"status": {"recommendation": _recommendation({"cpu": "300m", "memory": "256Mi"})}},
        namespace="default",
        subresource="status",
    )
    api.bookmark_watches()
    informers = provider.admission.caches
    assert await informers.cache.wait_for_resource_version(
        str(api.store.resource_version), within=30.0
    )
    # the VPA the answer was decided with is not the informer's any more
    assert not provider.still_current(answer)
    again = provider.answer_for(pending)
    assert _requests(again.pod) == {"cpu": "300m", "memory": "256Mi"}
    assert provider.still_current(again)


async def test_a_scheduled_pod_never_admitted_with_a_vpa_depends_on_itself(
    ahead: tuple[ApiServer, Any, WebhookRequestsAhead],
) -> None:
    _, _, provider = ahead
    scheduled = typed_pod(
        name="lone",
        node_name="n1",
        containers=[container(requests={"cpu": "100m"})],
    )
    answer = provider.answer_for(scheduled)
    assert answer.pod is scheduled
    assert answer.pod_only
    assert provider.still_current(answer)
