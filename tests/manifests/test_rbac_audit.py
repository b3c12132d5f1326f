"""RBAC audit: every request kubescale makes is allowed by the shipped roles, and every rule of
them is used — proven from the in-process API server's request log, not from a list.

Every component runs: ``kubescale serve`` with the registry's components, leader election and
webhook self-registration into kube-system (the manifests' namespace), until its loops have
run — with a stale webhook configuration to replace, a checkpoint of a deleted VPA to
garbage-collect and a CA rotated while it runs (the caBundle re-published); then the example
scenarios that drive each system's writes (VPA status, checkpoints, evictions and — the updater
example in mode InPlaceOrRecreate — in-place resizes, the webhook's status Lease; HPA scale and
status with resource, custom and external metrics; the cluster autoscaler's node groups,
taints, Machines and status ConfigMap). The API server records each request as the RBAC
authorizer sees it (verb, group, resource, subresource, namespace, name); :mod:`.rbac_rules`
evaluates the rendered manifests on it.

A rule is used when some request matches it, and each of its verbs when some request with that
verb does. No wildcards, but where no name can be known in advance: the custom and external
metrics APIs' resources are metric names and the kinds of described objects.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from kubescale.base.clock import RealClock
from kubescale.certs.authority import generate_ca
from kubescale.cli.main import build_parser
from kubescale.cli.serve import Server, default_components, serve
from kubescale.cli.serve_config import serve_config_from_args
from kubescale.components import REGISTRY
from kubescale.kube.resources import SECRETS
from kubescale.runtime.tls_secret import Action, generate
from kubescale.sim.apiserver.request_log import RequestRecord
from kubescale.sim.apiserver.served_kinds import SERVED
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.scenario.scenario_validation import load_scenario
from kubescale.webhook.registration import webhook_configuration
from kubescale.webhook.webhook_config import WebhookSettings
from tests.sim.scenario.shared_runs import run_to_end, shared_run

from .manifest_files import MANIFESTS, find, install_namespace, load_documents, render
from .rbac_rules import Request, ServiceAccountRef, allowed, rule_allows
from .upstream_examples import checkpoint_example

EXAMPLES: Final = (
    Path(__file__).resolve().parents[2] / "kubescale" / "sim" / "scenario" / "examples"
)
# (scenario, hours of it to run): enough for each system's writes to happen — half of what they
# were (the fixture took 304 s at load ~17, the most of any test; issue 32.7), and still every
# rule and verb of the role is used (test_every_rule_and_verb_is_used, which a cut too deep fails)
SCENARIOS: Final = (
    ("vpa-recommender.yaml", 1.0),
    ("vpa-updater.yaml", 1.0),
    ("hpa-pods-metric.yaml", 0.5),
    ("hpa-scale-to-zero.yaml", 0.5),
    ("cluster-autoscaler-consolidation.yaml", 1.0),
    ("cluster-autoscaler-burst.yaml", 0.5),
)
# The only wildcards: resources no role can name in advance.
WILDCARD_GROUPS: Final = frozenset({"custom.metrics.k8s.io", "external.metrics.k8s.io"})


def _request(record: RequestRecord) -> Request:
    return Request(
        verb=record.verb,
        group=record.group,
        resource=record.resource,
        subresource=record.subresource,
        namespace=record.namespace or None,
        name=record.name,
    )


async def _until(condition: Any, *, within: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not await condition():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.05)


def _policy_flags(parser: argparse.ArgumentParser, tmp_path: Path) -> list[str]:
    """The descheduler and the scheduler extender run with a policy (the example one): the flags
    that turn them on, where this kubescale has them."""
    (serve_parser,) = [
        choice
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, choice in action.choices.items()
        if name == "serve"
    ]
    known = {option for action in serve_parser._actions for option in action.option_strings}
    if "--policy-config-file" not in known:
        return []
    (config_map,) = load_documents(MANIFESTS / "examples" / "descheduler-policy.yaml")
    policy = tmp_path / "policy.yaml"
    policy.write_text(config_map["data"]["policy.yaml"], encoding="utf-8")
    return ["--policy-config-file", str(policy), "--descheduler", "true",
            "--scheduler-extender", "true"]  # fmt: skip


def _stale_objects(api: ApiServer) -> None:
    """A webhook configuration from an earlier install (replaced by self-registration), a
    checkpoint whose VPA is gone (garbage-collected by the recommender) and an HPA on a
    ReplicationController."""
    stale = webhook_configuration(WebhookSettings(), ca_bundle=b"stale")
    api.store.create({**stale, "webhooks": [{**stale["webhooks"][0], "timeoutSeconds": 5}]})
    checkpoint = checkpoint_example()
    checkpoint["metadata"] = {"name": "gone-app", "namespace": "default"}
    checkpoint["spec"] = {"vpaObjectName": "gone", "containerName": "app"}
    api.store.create(checkpoint)
    # An HPA on a ReplicationController (no informer: its Scale is read with GET /scale) whose
    # replicas are below minReplicas: the HPA patches /scale up to minReplicas, no metric needed.
    labels = {"app": "legacy"}
    api.store.create({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {"replicas": 1, "selector": labels, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
        }},
    })  # fmt: skip
    api.store.create({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "legacy", "namespace": "default",
                     "annotations": {"hpa.kubescale.io/controller": "kubescale"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "v1", "kind": "ReplicationController",
                               "name": "legacy"},
            "minReplicas": 2, "maxReplicas": 4,
            "metrics": [{"type": "Resource", "resource": {
                "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}],
        },
    })  # fmt: skip


async def _serve_records(cert_dir: Path, tmp_path: Path) -> set[RequestRecord]:
    """``kubescale serve`` with every component, as the Deployment runs it."""
    certs = tmp_path / "certs"
    shutil.copytree(cert_dir, certs)
    async with ApiServer() as api:
        _stale_objects(api)
        kubeconfig = tmp_path / "kubeconfig"
        api.write_kubeconfig(kubeconfig)
        argv = [
            "serve", "--port", "0", "--bind-address", "127.0.0.1", "--address", "127.0.0.1:0",
            "--tls-cert-file", str(certs / "serverCert.pem"),
            "--tls-private-key", str(certs / "serverKey.pem"),
            "--client-ca-file", str(certs / "caCert.pem"), "--cert-reload-interval", "0.2s",
            "--recommender-interval", "1s", "--checkpoints-gc-interval", "1s",
            "--horizontal-pod-autoscaler-sync-period", "1s", "--cloud-provider", "clusterapi",
            "--kubeconfig", str(kubeconfig),
            "--leader-elect-resource-namespace", install_namespace(),
            "--webhook-service-namespace", install_namespace(), "--log-level", "error",
            "--tls-secret-name", "vpa-tls-certs",
        ]  # fmt: skip
        parser = build_parser()
        argv += _policy_flags(parser, tmp_path)
        config = serve_config_from_args(parser.parse_args(argv))
        components = default_components(config, environ={})
        assert {c.name for c in components} == {spec.name for spec in REGISTRY}
        started: asyncio.Future[Server] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(
            serve(config, clock=RealClock(), components=components, started=started,
                  install_signal_handlers=False)
        )  # fmt: skip
        server = await asyncio.wait_for(started, timeout=20)
        try:
            async with aiohttp.ClientSession() as session:

                async def ready() -> bool:
                    url = f"http://127.0.0.1:{server.health_port}/readyz"
                    async with session.get(url) as response:
                        return response.status == 200

                await _until(ready, within=30)

            async def led_and_registered() -> bool:
                records = api.requests.counts()
                return any(r.resource == "leases" and r.verb == "update" for r in records) and any(
                    r.resource == "mutatingwebhookconfigurations" for r in records
                )

            await _until(led_and_registered, within=30)
            # the self-managed Secret (created at start) replaced by one whose serving
            # certificate is due: a replica renews it (update by name)
            (secret,) = api.store.list(SECRETS, namespace=install_namespace())
            due = generate(Action.CREATE, None, names=["vpa-webhook.kube-system.svc"],
                           now=datetime.now(UTC) - timedelta(days=300))  # fmt: skip
            api.store.update({**secret, "data": due.data()})
            # a new CA: the registration loop re-publishes it (JSON patch of the caBundle)
            rotated = generate_ca(common_name="rotated", now=datetime.now(UTC), days=1,
                                  key_type="ecdsa")  # fmt: skip
            (certs / "caCert.pem").write_bytes(rotated.cert_pem)

            async def done() -> bool:
                records = api.requests.counts()
                return (
                    any(r.resource == "secrets" and r.verb == "update" for r in records)
                    and any(
                        r.resource == "mutatingwebhookconfigurations" and r.verb == "patch"
                        for r in records
                    )
                    and any(
                        r.resource == "verticalpodautoscalercheckpoints" and r.verb == "delete"
                        for r in records
                    )
                    and any(
                        (r.resource, r.subresource, r.verb)
                        == ("replicationcontrollers", "scale", "patch")
                        for r in records
                    )
                )

            await _until(done, within=30)
            await asyncio.sleep(2.0)  # every loop's first iteration
        finally:
            server.stop_event.set()
            assert await asyncio.wait_for(task, timeout=30) == 0
        return set(api.requests.counts())


def _in_place_updater(tmp_path: Path) -> Path:
    """The updater example with mode InPlaceOrRecreate (pods/resize, then the pod's annotation)."""
    text = (EXAMPLES / "vpa-updater.yaml").read_text(encoding="utf-8")
    text = text.replace("updateMode: Recreate}", "updateMode: InPlaceOrRecreate}")
    text = text.replace("  vpa-updater: {}", '  vpa-updater: {feature-gates: "InPlace=true"}')
    assert "InPlaceOrRecreate" in text
    assert "InPlace=true" in text
    path = tmp_path / "vpa-updater-in-place.yaml"
    path.write_text(text, encoding="utf-8")
    return path


async def _scenario_records(tmp_path: Path) -> set[RequestRecord]:
    records: set[RequestRecord] = set()
    runs = [(EXAMPLES / name, hours) for name, hours in SCENARIOS]
    # the descheduler's examples, where it exists (each evicts; the dry run only reads)
    runs += [(path, 0.5) for path in sorted(EXAMPLES.glob("descheduler-*.yaml"))]
    runs.append((_in_place_updater(tmp_path), 0.5))
    for path, hours in runs:
        scenario = load_scenario(path)
        scenario = replace(scenario, duration=min(scenario.duration, hours * 3600.0))
        # the same run as another test's where one reads it whole (the autoscaler's
        # consolidation example, the recommender's first hour): made once a process
        # (tests.sim.scenario.shared_runs; issue 32.7)
        records |= (await shared_run(run_to_end, scenario)).requests
    return records


@pytest.fixture(scope="module")
def requests_made(cert_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Request]:
    async def collect() -> set[RequestRecord]:
        served = await _serve_records(cert_dir, tmp_path_factory.mktemp("serve"))
        return served | await _scenario_records(tmp_path_factory.mktemp("scenarios"))

    records = asyncio.run(collect())
    return sorted({_request(r) for r in records}, key=str)


def _objects_and_account() -> tuple[list[dict[str, Any]], ServiceAccountRef]:
    objects = render()
    deployment = find(objects, "Deployment", "kubescale")
    account = ServiceAccountRef(
        namespace=deployment["metadata"]["namespace"],
        name=deployment["spec"]["template"]["spec"]["serviceAccountName"],
    )
    return objects, account


def _rules() -> list[tuple[str, dict[str, Any]]]:
    """(role, rule) of every ClusterRole and Role of the manifests."""
    return [
        (f"{obj['kind']} {obj['metadata']['name']}", rule)
        for obj in render()
        if obj["kind"] in ("ClusterRole", "Role")
        for rule in obj.get("rules") or []
    ]


def test_every_request_is_allowed(requests_made: list[Request]) -> None:
    objects, account = _objects_and_account()
    assert len(requests_made) > 50
    refused = [str(r) for r in requests_made if not allowed(objects, account=account, request=r)]
    assert refused == []


def test_every_rule_and_verb_is_used(requests_made: list[Request]) -> None:
    unused = []
    for role, rule in _rules():
        for verb in rule["verbs"]:
            one_verb = {**rule, "verbs": [verb]}
            if not any(rule_allows(one_verb, request) for request in requests_made):
                unused.append(f"{role}: {verb} {rule.get('apiGroups')} {rule.get('resources')}"
                              f" {rule.get('resourceNames', '')}")  # fmt: skip
    assert unused == [], unused


def test_no_wildcards() -> None:
    for role, rule in _rules():
        assert "*" not in rule["verbs"], role
        assert "*" not in rule["apiGroups"], role
        if set(rule["apiGroups"]) <= WILDCARD_GROUPS:
            continue
        assert not any("*" in resource for resource in rule["resources"]), (role, rule)


# Aggregated APIs the shipped roles name, served beside the catalogue (sim/apiserver/metrics_apis)
AGGREGATED: Final = frozenset({("metrics.k8s.io", "pods"), ("metrics.k8s.io", "nodes")})


def _granted_pairs_that_do_not_exist() -> list[str]:
    """A rule grants every apiGroup x resource pair it lists; each pair must name a resource (and
    subresource) the API server serves, or the role grants combinations that do not exist."""
    served = {(kind.group, kind.plural): kind for kind in SERVED}
    missing = []
    for role, rule in _rules():
        for group in rule["apiGroups"]:
            if group in WILDCARD_GROUPS:
                continue
            for resource in rule["resources"]:
                plural, _, subresource = resource.partition("/")
                if (group, plural) in AGGREGATED and not subresource:
                    continue
                kind = served.get((group, plural))
                if kind is None or (subresource and subresource not in kind.subresources):
                    missing.append(f"{role}: {group or 'core'}/{resource}")
    return missing


def test_no_rule_grants_a_group_resource_pair_that_does_not_exist() -> None:
    assert _granted_pairs_that_do_not_exist() == []
