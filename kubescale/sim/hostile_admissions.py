"""Admissions of pods whose owner references are hostile: the storm of issue 11, defect 3.

Test and benchmark infrastructure (never imported by the product). A pod's
``ownerReferences`` are written by whoever creates the pod; the webhook resolves a controller
of a kind it has no informer for through the process's ``/scale`` lookups, which talk to the
API server with kubescale's own token. :func:`hostile_owner` makes five kinds of abuse, round
robin: a made-up group, a served group with a kind it does not serve, path injection through
``apiVersion``, path injection through the name of a real scalable kind, and well-formed names
that do not exist. :func:`run_storm` sends them through the webhook's decision as the process
would, its lookups loop woken by each miss and sweeping every ``sweep`` seconds.

This module imports nothing of kubescale (its collaborators are passed in), so
``bench/hostile_owner_references.py`` can load it by file path to measure an older tree too.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Protocol

__all__ = [
    "ALLOWED_PATH",
    "INJECTED_API_VERSIONS",
    "INJECTED_NAMES",
    "hostile_owner",
    "review",
    "run_storm",
]

# apiVersions an attacker writes into an owner reference: path traversal, a query, a fragment,
# percent-encoding, a bare slash, whitespace, an upper-case group.
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
    """The AdmissionReview of the CREATE of a pod controlled by :func:`hostile_owner` (i)."""
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


class _Webhook(Protocol):
    async def admit(self, body: bytes, *, content_type: str) -> Any: ...


class _Cache(Protocol):
    @property
    def lookups_wanted(self) -> asyncio.Event: ...

    async def resolve_lookups(self) -> None: ...


class _Clock(Protocol):
    async def advance(self, seconds: float) -> Any: ...


async def run_storm(
    *,
    webhook: _Webhook,
    cache: _Cache,
    clock: _Clock,
    admissions: int = 5000,
    seconds: int = 150,
    sweep: int = 7,
) -> int:
    """``admissions`` admissions spread evenly over ``seconds`` of the (virtual) clock; the
    lookups resolved as the process's loop would (woken by a miss, swept every ``sweep``
    seconds — upstream's scaleCacheLoopPeriod is 7 s). Returns how many answers were errors."""
    per_second = admissions // seconds + 1
    sent = errors = 0
    for second in range(seconds):
        for _ in range(per_second):
            if sent == admissions:
                break
            answer = await webhook.admit(review(sent), content_type="application/json")
            errors += answer.status == "error"
            sent += 1
        if cache.lookups_wanted.is_set() or second % sweep == 0:
            await cache.resolve_lookups()
        await clock.advance(1.0)
    return errors
