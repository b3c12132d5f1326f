"""Hostile owner references in admitted pods cannot steer kubescale's API-server traffic.

A pod's ``ownerReferences`` are written by whoever creates the pod. The webhook resolves a
controller of a kind it has no informer for through the process's ``/scale`` lookups, which
talk to the API server with kubescale's own token — so an owner reference must never choose the
URL (``..`` segments, ``?``, ``#``, ``%``), and a storm of admissions naming unknown kinds or
objects must not become a storm of GETs.

5,000 admissions over 150 s (simulated time, as the process's lookups loop would resolve them:
woken by each miss, swept every 7 s) through the webhook's decision on its caches, against the
in-process API server, which counts every request it receives.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.shared_cache import SharedCache
from kubescale.sim.apiserver.server import ApiServer
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_caches import WebhookCaches
from kubescale.webhook.webhook_config import WebhookSettings

from .api_fixtures import build_caches

ADMISSIONS = 5000
SECONDS = 150
SWEEP = 7  # the lookups loop's period (upstream scaleCacheLoopPeriod)

# apiVersions an attacker writes into an owner reference: path traversal, a query, a fragment,
# percent-encoding, a bare slash, whitespace.
INJECTED_API_VERSIONS = (
    "../../api/v1/namespaces/kube-system/secrets/v1",
    "apps?watch=true&x=/v1",
    "apps/v1#",
    "%2e%2e/%2e%2e/api/v1",
    "cluster.x-k8s.io/../../api/v1/namespaces/kube-system/secrets/v1beta1",
    "/v1",
    "apps /v1",
    "Apps/v1",
)
# names of a real scalable kind (MachineDeployment) that try the same through the object path
INJECTED_NAMES = (
    "../../../../../api/v1/namespaces/kube-system/secrets/token",
    "pool?watch=true",
    "pool#x",
    "pool%2F..",
    "..",
)


def hostile_owner(i: int) -> dict[str, str]:
    """The i-th hostile owner reference: five kinds of abuse, round robin."""
    match i % 5:
        case 0:  # a made-up group, different every time
            return {"apiVersion": f"evil-{i}.example.com/v1", "kind": "Widget", "name": "w"}
        case 1:  # a served group, a kind it does not serve
            return {"apiVersion": "apps/v1", "kind": f"Ghost{i}", "name": "g"}
        case 2:  # path injection through apiVersion
            api_version = INJECTED_API_VERSIONS[i // 5 % len(INJECTED_API_VERSIONS)]
            return {"apiVersion": api_version, "kind": "Secret", "name": "token"}
        case 3:  # path injection through the name of a real scalable kind
            name = INJECTED_NAMES[i // 5 % len(INJECTED_NAMES)]
            return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                    "name": name}  # fmt: skip
        case _:  # a real scalable kind, a well-formed name that does not exist
            return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                    "name": f"ghost-{i}"}  # fmt: skip


def review(i: int) -> bytes:
    owner = {**hostile_owner(i), "uid": f"uid-{i}", "controller": True}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"p-{i}", "namespace": "default", "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "app", "image": "x"}]},
    }
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"u-{i}",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    }
    return json.dumps(body).encode()


@dataclass
class Storm:
    api: ApiServer
    cache: SharedCache
    caches: WebhookCaches
    webhook: AdmissionWebhook
    clock: VirtualClock


@pytest.fixture
async def storm(tmp_path: Path) -> AsyncIterator[Storm]:
    clock = VirtualClock()
    async with ApiServer(clock=clock, seed=5) as api:
        api.write_kubeconfig(tmp_path / "kubeconfig")
        kube: KubeClient = await connect(
            kubeconfig=tmp_path / "kubeconfig", clock=clock, rng=random.Random(0)
        )
        try:
            cache, caches = build_caches(kube, WebhookSettings(), clock=clock)
            cache.start()
            assert await cache.wait_synced(10)
            webhook = AdmissionWebhook(
                settings=WebhookSettings(), registry=CollectorRegistry(), caches=caches
            )
            webhook.controller_wait = 0.0
            yield Storm(api=api, cache=cache, caches=caches, webhook=webhook, clock=clock)
        finally:
            await cache.stop()
            await kube.close()


async def run_storm(storm: Storm) -> None:
    """ADMISSIONS admissions spread over SECONDS; the lookups run as the process's loop would."""
    per_second = ADMISSIONS // SECONDS + 1
    sent = 0
    for second in range(SECONDS):
        for _ in range(per_second):
            if sent == ADMISSIONS:
                break
            answer = await storm.webhook.admit(review(sent), content_type="application/json")
            assert answer.status != "error", answer
            sent += 1
        # woken by a miss (the loop resolves the queue), and the sweep every SWEEP seconds
        if storm.cache.lookups_wanted.is_set() or second % SWEEP == 0:
            await storm.cache.resolve_lookups()
        await storm.clock.advance(1.0)
    assert sent == ADMISSIONS


# What the lookups may ask for: discovery, and the /scale of a real scalable kind by a valid
# name. Nothing else — and never anything under /api/v1 but the core discovery document.
ALLOWED_PATH = re.compile(
    r"/apis|/api|/api/v1"
    r"|/apis/[a-z0-9.-]+/v[0-9a-z]+"
    r"|/apis/cluster\.x-k8s\.io/v1beta1/namespaces/default/machinedeployments/ghost-[0-9]+/scale"
    # the informers' own lists and re-watches of their collections, across namespaces
    r"|(/api/v1|/apis/[a-z0-9.-]+/v[0-9a-z]+)/[a-z]+\?(limit=[0-9]+|allowWatchBookmarks=true&"
    r"resourceVersion=[0-9]+&timeoutSeconds=[0-9]+&watch=true)"
)


async def test_hostile_owner_references_reach_no_url_and_raise_no_get_storm(
    storm: Storm,
) -> None:
    storm.api.requests.clear()  # the informers' lists and watches are not the lookups'
    await run_storm(storm)
    paths = storm.api.requests.paths()
    gets = sum(n for (method, _), n in paths.items() if method == "GET")
    sent = sorted(path for _, path in paths)
    stray = [path for path in sent if not ALLOWED_PATH.fullmatch(path)]
    assert stray == [], stray[:20]
    assert not any("secrets" in path or ".." in path for path in sent)
    # Before: 3,000 owners of unknown kinds or served ones each re-discovered every 30 s.
    # After: the group list and each served group's document at most once per 30 s, and GETs
    # of objects that do not exist at the lookups' rate limit (5/s, burst 20).
    assert gets <= 20 + 5 * SECONDS, gets
    lookups = storm.cache.scale_lookups
    assert lookups.cached_group_versions <= lookups.limits.max_group_versions
    assert lookups.cached_objects <= lookups.limits.max_objects
    assert lookups.pending <= 2 * lookups.limits.max_pending
