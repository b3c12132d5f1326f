"""Benchmark: the VPA webhook's resident memory under namespace churn and fuzzed reviews.

Issue 26 item 7 (the webhook grew 103 → 249 MiB over 2,250 namespaces created and deleted, and
kept it) and issue 27 item 14 (100 → 283 MB over 100,000 fuzzed reviews, still growing). This
process is the webhook: the shared cache, the admission caches, the route's decision
(``AdmissionWebhook.admit``) and the event recorder, as ``kubescale serve --webhook`` builds
them; the API server (``kubescale apiserver``) runs in a child process, so this process's
``VmRSS`` is the webhook's (plus the load generator, which keeps nothing).

1. ``churn``: ``--namespaces`` (2,250) namespaces, one after the other, each with a Deployment,
   its ReplicaSet, a VPA with a recommendation (every other one a LimitRange), three pods
   admitted, then the namespace deleted; RSS every 250 namespaces, and once more after the
   deletes have reached the informers.
2. ``fuzz``: ``--reviews`` (200,000) fuzzed AdmissionReviews (seeded; pods of 50 live namespaces
   with random owners — real, missing, made-up kinds — labels, containers and quantities; VPA
   reviews; partial and garbage bodies; odd content types), the /scale lookups resolved as the
   process's loop does; RSS and the admission caches' entry counts every 10,000. Reviews are
   sent one at a time, so a pod's missing controller is not waited for (``controller_wait``
   0; the server's waits overlap other requests).

    .venv/bin/python bench/webhook_memory.py                  # → bench/results/webhook_memory.json
    PYTHONPATH=/tmp/before .venv/bin/python bench/webhook_memory.py --label before

``--label`` names the run in the file (runs of other labels are kept), so a run on an older
tree (``PYTHONPATH`` of an export of it) sits next to the current one.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import platform
import random
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubescale.controllers.vpa.admission.admission_caches import AdmissionCaches
from kubescale.kube.client import KubeClient, connect
from kubescale.kube.events import EventRecorder
from kubescale.kube.resources import (
    DEPLOYMENTS,
    LIMIT_RANGES,
    NAMESPACES,
    REPLICA_SETS,
    VERTICAL_POD_AUTOSCALERS,
)
from kubescale.kube.shared_cache import SharedCache
from kubescale.objects.views import ObjectRef
from kubescale.webhook.admission_routes import AdmissionWebhook
from kubescale.webhook.webhook_config import WebhookSettings

RESULTS = Path(__file__).parent / "results" / "webhook_memory.json"
LIVE_NAMESPACES = 50
JSON = "application/json"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS")


# -- the cluster ---------------------------------------------------------------------------------


async def seed_namespace(kube: KubeClient, namespace: str, *, limit_range: bool) -> None:
    """A namespace with Deployment ``web``, ReplicaSet ``web-rs``, VPA ``web`` (recommendation
    cpu 250m, memory 200Mi) and, with ``limit_range``, a LimitRange."""
    await kube.create(NAMESPACES, {"metadata": {"name": namespace}})
    labels = {"app": "web"}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "app"}]}}
    spec = {"selector": {"matchLabels": labels}, "template": template}
    meta = {"name": "web", "namespace": namespace}
    deployment = await kube.create(DEPLOYMENTS, {"metadata": meta, "spec": spec})
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "web",
        "uid": deployment["metadata"]["uid"],
        "controller": True,
    }
    rs_meta = {"name": "web-rs", "namespace": namespace, "ownerReferences": [owner]}
    await kube.create(REPLICA_SETS, {"metadata": rs_meta, "spec": spec})
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    await kube.create(VERTICAL_POD_AUTOSCALERS, {"metadata": meta, "spec": {"targetRef": target}})
    recommendation = {
        "containerRecommendations": [
            {"containerName": "app", "target": {"cpu": "250m", "memory": "200Mi"}}
        ]
    }
    await kube.patch(
        VERTICAL_POD_AUTOSCALERS,
        "web",
        {"status": {"recommendation": recommendation}},
        namespace=namespace,
        subresource="status",
    )
    if limit_range:
        limits = {"limits": [{"type": "Container", "max": {"cpu": "2", "memory": "4Gi"}}]}
        await kube.create(
            LIMIT_RANGES, {"metadata": {"name": "limits", "namespace": namespace}, "spec": limits}
        )


def pod_review(namespace: str, uid: str, cpu: str = "100m") -> bytes:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": "web-rs",
        "uid": "x",
        "controller": True,
    }
    resources = {"requests": {"cpu": cpu, "memory": "100Mi"}}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "web-rs-",
            "namespace": namespace,
            "labels": {"app": "web"},
            "ownerReferences": [owner],
        },
        "spec": {"containers": [{"name": "app", "image": "nginx", "resources": resources}]},
    }
    return _review(pod, uid=uid, namespace=namespace)


def _review(obj: Any, *, uid: str, namespace: str, vpa: bool = False, **extra: Any) -> bytes:
    group, resource = ("autoscaling.k8s.io", "verticalpodautoscalers") if vpa else ("", "pods")
    request = {
        "uid": uid,
        "kind": {
            "group": group,
            "version": "v1",
            "kind": "VerticalPodAutoscaler" if vpa else "Pod",
        },
        "resource": {"group": group, "version": "v1", "resource": resource},
        "namespace": namespace,
        "operation": "CREATE",
        "object": obj,
        **extra,
    }
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


# -- the fuzzer ----------------------------------------------------------------------------------

_CHARS = string.ascii_lowercase + string.digits


def _word(rng: random.Random, longest: int = 8) -> str:
    return "".join(rng.choices(_CHARS, k=rng.randint(1, longest)))


def _quantity(rng: random.Random) -> Any:
    draw = rng.random()
    if draw < 0.5:
        return rng.choice(["100m", "250m", "1", "128Mi", "1Gi", "0"])
    if draw < 0.8:
        return f"{rng.randint(1, 10**6)}{rng.choice(['m', 'Mi', 'Ki', '', 'G', 'k'])}"
    if draw < 0.9:
        return rng.choice([None, True, 12, -1, "abc", "1e100", "", "9223372036854775807"])
    return _word(rng, 12)


def _resources(rng: random.Random) -> Any:
    if rng.random() < 0.1:
        return rng.choice([None, "x", 3, []])
    names = ["cpu", "memory", "nvidia.com/gpu", _word(rng)]
    return {
        part: {name: _quantity(rng) for name in rng.sample(names, rng.randint(0, 3))}
        for part in ("requests", "limits")
        if rng.random() < 0.6
    }


def _owners(rng: random.Random, i: int) -> Any:
    draw = rng.random()
    if draw < 0.6:
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": "web-rs",
                "uid": f"o{i}",
                "controller": True,
            }
        ]
    if draw < 0.7:
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": f"gone-{_word(rng)}",
                "uid": "x",
                "controller": True,
            }
        ]
    if draw < 0.85:
        return [
            {
                "apiVersion": f"{_word(rng)}.example.com/v1",
                "kind": _word(rng).capitalize(),
                "name": _word(rng),
                "uid": "x",
                "controller": True,
            }
        ]
    if draw < 0.9:
        return [
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "MachineDeployment",
                "name": f"ghost-{_word(rng)}",
                "controller": True,
            }
        ]
    return rng.choice([[], "not a list", [{"kind": "Node", "name": "n", "controller": True}]])


def fuzzed(rng: random.Random, i: int, namespaces: list[str]) -> tuple[bytes, str]:
    """The i-th fuzzed review and its content type."""
    uid = f"fuzz-{i}"
    draw = rng.random()
    if draw < 0.65:
        namespace = rng.choice(namespaces) if rng.random() < 0.8 else f"fz-{_word(rng, 5)}"
        labels = {"app": "web", **{_word(rng): _word(rng, 20) for _ in range(rng.randint(0, 3))}}
        containers = [
            {
                "name": rng.choice(["app", "sidecar", _word(rng)]),
                "image": "nginx",
                "resources": _resources(rng),
            }
            for _ in range(rng.randint(1, 4))
        ]
        meta: dict[str, Any] = {
            "generateName": "web-rs-",
            "namespace": namespace,
            "labels": labels,
            "ownerReferences": _owners(rng, i),
        }
        if rng.random() < 0.3:
            meta["annotations"] = {_word(rng): _word(rng, 30)}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"containers": containers},
        }
        body = _review(pod, uid=uid, namespace=namespace)
    elif draw < 0.8:
        policies = [
            {
                "containerName": rng.choice(["*", "app", _word(rng)]),
                "minAllowed": {"cpu": _quantity(rng)},
                "maxAllowed": {"memory": _quantity(rng)},
                "mode": rng.choice(["Auto", "Off", _word(rng)]),
            }
            for _ in range(rng.randint(0, 3))
        ]
        spec = {
            "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": _word(rng)},
            "updatePolicy": {"updateMode": rng.choice(["Off", "Auto", "Recreate", _word(rng)])},
            "resourcePolicy": {"containerPolicies": policies},
        }
        vpa = {
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": _word(rng), "namespace": "default"},
            "spec": spec,
        }
        body = _review(vpa, uid=uid, namespace="default", vpa=True)
    elif draw < 0.9:
        body = json.dumps({"request": {"uid": uid, _word(rng): _word(rng)}}).encode()
    else:
        body = rng.randbytes(rng.randint(0, 64))
    content_type = JSON if rng.random() < 0.97 else rng.choice(["text/plain", "application/yaml"])
    return body, content_type


# -- the run -------------------------------------------------------------------------------------


def _sizes(webhook: AdmissionWebhook, cache: SharedCache) -> dict[str, int]:
    memo = webhook.memo
    answers = memo.answers()
    return {
        "decisions": len(memo) - answers,
        "answers": answers,
        "memo_bytes_counted": memo.bytes,
        "scale_lookups_pending": cache.scale_lookups.pending,
    }


async def _until(predicate: Any, within: float = 10.0) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            return False
        await asyncio.sleep(0.002)
    return True


async def run(args: argparse.Namespace, kubeconfig: Path) -> dict[str, Any]:
    kube = await connect(kubeconfig=kubeconfig, rng=random.Random(0))
    cache = SharedCache(client=kube, clock=kube.clock)
    caches = AdmissionCaches(cache=cache)
    webhook = AdmissionWebhook(
        settings=WebhookSettings(), registry=CollectorRegistry(), caches=caches
    )
    recorder = EventRecorder(client=kube, component="vpa-admission-controller")
    webhook.recorder = recorder
    cache.start()
    assert await cache.wait_synced(within=60)
    gc.collect()
    started = time.monotonic()
    churn: list[dict[str, Any]] = [{"namespaces": 0, "rss_mib": rss_mib()}]
    uid = 0
    for n in range(args.namespaces):
        namespace = f"churn-{n}"
        await seed_namespace(kube, namespace, limit_range=n % 2 == 0)
        target = ObjectRef(
            api_version="apps/v1", kind="Deployment", name="web", namespace=namespace
        )
        await _until(lambda target=target: bool(caches.vpas_for(target)))
        for index in range(3):
            uid += 1
            await webhook.admit(
                pod_review(namespace, f"c-{uid}", f"{index + 1}00m"), content_type=JSON
            )
        await kube.delete(NAMESPACES, namespace)
        if (n + 1) % 250 == 0:
            gc.collect()
            churn.append({"namespaces": n + 1, "rss_mib": rss_mib(), **_sizes(webhook, cache)})
            sys.stdout.write(f"churn {churn[-1]} {time.monotonic() - started:.0f} s\n")
    await recorder.flush()
    await asyncio.sleep(2.0)  # the last deletes reach the informers
    gc.collect()
    churn.append(
        {
            "namespaces": args.namespaces,
            "after_deletes": True,
            "rss_mib": rss_mib(),
            **_sizes(webhook, cache),
        }
    )
    churn_seconds = time.monotonic() - started

    live = [f"live-{n}" for n in range(LIVE_NAMESPACES)]
    for n, namespace in enumerate(live):
        await seed_namespace(kube, namespace, limit_range=n % 2 == 0)
    await asyncio.sleep(1.0)
    rng = random.Random(args.seed)
    # One review at a time here: a pod of a ReplicaSet that does not exist would wait
    # CONTROLLER_WAIT (1 s) for it each; in the server such waits overlap other requests.
    webhook.controller_wait = 0.0
    gc.collect()
    fuzz: list[dict[str, Any]] = [{"reviews": 0, "rss_mib": rss_mib(), **_sizes(webhook, cache)}]
    started = time.monotonic()
    for i in range(1, args.reviews + 1):
        body, content_type = fuzzed(rng, i, live)
        await webhook.admit(body, content_type=content_type)
        if cache.lookups_wanted.is_set() or i % 200 == 0:
            cache.lookups_wanted.clear()
            await cache.resolve_lookups()
        if i % 10_000 == 0:
            gc.collect()
            fuzz.append({"reviews": i, "rss_mib": rss_mib(), **_sizes(webhook, cache)})
            sys.stdout.write(f"fuzz {fuzz[-1]} {time.monotonic() - started:.0f} s\n")
    fuzz_seconds = time.monotonic() - started
    await recorder.close()
    await cache.stop()
    await kube.close()
    return {
        "churn": churn,
        "churn_seconds": round(churn_seconds, 1),
        "fuzz": fuzz,
        "fuzz_seconds": round(fuzz_seconds, 1),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="kubescale-bench-") as directory:
        kubeconfig = Path(directory) / "kubeconfig"
        server = subprocess.Popen(  # noqa: ASYNC220 - started once, before the loop's work
            [
                sys.executable,
                "-m",
                "kubescale",
                "apiserver",
                "--kubeconfig-out",
                str(kubeconfig),
                "--insecure-kubeconfig",
                "--log-level",
                "error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            assert await _until(kubeconfig.exists, within=60), "kubescale apiserver did not start"
            await asyncio.sleep(0.5)
            return await run(args, kubeconfig)
        finally:
            server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file (JSON)")
    parser.add_argument("--label", default="after", help="name of this run in the file")
    parser.add_argument("--namespaces", type=int, default=2250, help="namespaces churned")
    parser.add_argument("--reviews", type=int, default=200_000, help="fuzzed reviews")
    parser.add_argument("--seed", type=int, default=7, help="the fuzzer's seed")
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # a log line per bad review would measure the logger
    run_ = asyncio.run(measure(args))
    run_.update(
        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        pythonpath=os.environ.get("PYTHONPATH", ""),
        python=platform.python_version(),
        machine=platform.machine(),
        namespaces=args.namespaces,
        reviews=args.reviews,
    )
    previous: dict[str, Any] = {}
    if args.out.exists():
        with contextlib.suppress(ValueError):
            previous = json.loads(args.out.read_text(encoding="utf-8"))
    runs = previous.get("runs", {}) if isinstance(previous.get("runs"), dict) else {}
    runs[args.label] = run_
    args.out.parent.mkdir(parents=True, exist_ok=True)
    document = {"benchmark": "webhook_memory", "runs": runs}
    args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(f"written to {args.out}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
