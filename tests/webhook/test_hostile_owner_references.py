"""Hostile owner references in admitted pods cannot steer kubescale's API-server traffic.

A pod's ``ownerReferences`` are written by whoever creates the pod. The webhook resolves a
controller of a kind it has no informer for through the process's ``/scale`` lookups, which
talk to the API server with kubescale's own token — so an owner reference must never choose the
URL (``..`` segments, ``?``, ``#``, ``%``), and a storm of admissions naming unknown kinds or
objects must not become a storm of GETs.

5,000 admissions over 150 s (simulated time, as the process's lookups loop would resolve them:
woken by each miss, swept every 7 s; :mod:`kubescale.sim.hostile_admissions`) through the
webhook's decision on its caches, against the in-process API server, which counts every request
it receives. On main before the fix: 9,029 GETs (764 after), among them
``/api/v1/namespaces/kube-system/secrets/v1`` and ``/apis/apps?watch=true&x=/v1``.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubescale.base.clock import VirtualClock
from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.shared_cache import SharedCache
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.hostile_admissions import ALLOWED_PATH
from kubescale.sim.hostile_admissions import run_storm as run_storm_on
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

from .api_fixtures import build_caches

ADMISSIONS = 5000
SECONDS = 150


@dataclass
class Storm:
    api: ApiServer
    cache: SharedCache
    caches: AdmissionCaches
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
    errors = await run_storm_on(
        webhook=storm.webhook, cache=storm.cache, clock=storm.clock,
        admissions=ADMISSIONS, seconds=SECONDS,
    )  # fmt: skip
    assert errors == 0


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
