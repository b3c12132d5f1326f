"""Hostile policy files end ``kubescale serve`` at start with one line naming the file and the
field (issue 27, 6): no traceback, and no policy that passes validation only to fail every
cycle.

Upstream reads the file, decodes it as YAML/JSON and validates it before the first cycle
(``LoadPolicyConfig``, ``validateDeschedulerConfiguration``); its ``metricsProviders``
Prometheus ``url`` is only ``url.Parse``-d (PR #1705), so ``file:///...`` passes and every query
fails ("unsupported protocol scheme"). Here such a URL is refused at start, and should one reach
a cycle anyway, only the plugins that read Prometheus fail that cycle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from kubescale.cli.main import main
from kubescale.controllers.descheduler.descheduler_config import DeschedulerSettings
from kubescale.controllers.descheduler.descheduler_loop import DeschedulerLoop
from kubescale.controllers.descheduler.descheduler_metrics import DeschedulerMetrics
from kubescale.kube.events import EventRecorder
from kubescale.kube.informer_set import InformerSet
from kubescale.scheduling.policy.policy_loading import parse_policy
from tests.builders.meta import json_body
from tests.controllers.descheduler.builders import cycle_node, cycle_pod
from tests.controllers.descheduler.test_descheduler_loop import (
    TAINT,
    Setup,
    create_pod,
    setup,
    terminating,
)

__all__ = ["setup"]  # the fixture, shared with the loop's tests

HEADER = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\n"
PROFILE = (
    "profiles: [{name: p, plugins: {deschedule: {enabled: [RemovePodsViolatingNodeTaints]}}}]\n"
)


def prometheus(url: str) -> bytes:
    return (
        f"{HEADER}metricsProviders: [{{source: Prometheus, prometheus: {{url: '{url}'}}}}]\n"
        f"{PROFILE}"
    ).encode()


DEEP = 100_000

CASES = [
    # (case, file contents, what the one line says after "<file>: ")
    ("binary", bytes(range(256)) * 4, "not a YAML or JSON text file: byte 128 (0x80) is not UTF-8"),
    ("100k-deep sequence", b"[" * DEEP + b"]" * DEEP, "not a DeschedulerPolicy: nested too deeply"),
    (
        "100k-deep mapping",
        b"{a: " * DEEP + b"1" + b"}" * DEEP,
        "not a DeschedulerPolicy: nested too deeply",
    ),
    (
        "3000-deep block mapping",
        b"".join(b"  " * i + b"a:\n" for i in range(3000)),
        "not a DeschedulerPolicy: nested too deeply",
    ),
    # UTF-8, but a character YAML does not accept: PyYAML's multi-line error, on one line.
    (
        "NUL",
        HEADER.encode() + b"x: \x00\n",
        "not valid YAML: unacceptable character #x0000: special characters are not allowed in "
        '"<unicode string>", position 60',
    ),
    (
        "file:// Prometheus",
        prometheus("file:///etc/passwd"),
        "metricsProviders[0].prometheus.url: prometheus address 'file:///etc/passwd': "
        "unsupported protocol scheme 'file' (http or https)",
    ),
    (
        "no host",
        prometheus("http:///api"),
        "metricsProviders[0].prometheus.url: prometheus address 'http:///api' is not an "
        "absolute URL",
    ),
    (
        "bad port",
        prometheus("https://prometheus:99999"),
        "metricsProviders[0].prometheus.url: prometheus address 'https://prometheus:99999': "
        "Port out of range 0-65535",
    ),
]


@pytest.mark.parametrize(("contents", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_hostile_policy_file_is_one_line_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], contents: bytes, message: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_bytes(contents)
    assert main(["serve", "--policy-config-file", str(path), "--descheduler", "true"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.endswith("\n")
    assert err.count("\n") == 1, err[:2000]
    assert err == f"kubescale serve: error: --policy-config-file: {path}: {message}\n"


def test_the_inline_policy_flag_too(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "--descheduler-policy", "[" * DEEP + "]" * DEEP, "--descheduler", "true"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "kubescale serve: error: --descheduler-policy: not a DeschedulerPolicy: nested too deeply\n"
    )


def test_an_http_prometheus_url_is_accepted() -> None:
    # upstream's own README example is http (PR #1705 dropped the https-only rule)
    for url in ("http://prometheus.monitoring:9090", "https://thanos.example/prefix"):
        document = {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "metricsProviders": [{"source": "Prometheus", "prometheus": {"url": url}}],
        }
        provider = parse_policy(document).provider("Prometheus")
        assert provider is not None
        assert provider.prometheus_url == url


async def test_a_bad_prometheus_url_that_got_through_stops_only_its_plugins(
    setup: Setup,
) -> None:
    """Defence in depth: a policy built in code (no loader) with a ``file://`` URL. The
    LowNodeUtilization plugin that queries Prometheus has no values this cycle; the node
    taints plugin of the same policy still evicts web-0 and web-1 from the tainted n1."""
    api = setup.api
    api.store.create(json_body(cycle_node("n1", taints=[TAINT])))
    api.store.create(json_body(cycle_node("n2")))
    for name in ("web-0", "web-1"):
        create_pod(api, cycle_pod(name, "n1", cpu="100m", labels={"app": "web"}))
    policy = parse_policy(
        {
            "apiVersion": "descheduler/v1alpha2",
            "kind": "DeschedulerPolicy",
            "metricsProviders": [
                {"source": "Prometheus", "prometheus": {"url": "http://prometheus:9090"}}
            ],
            "profiles": [
                {
                    "name": "default",
                    "pluginConfig": [
                        {
                            "name": "LowNodeUtilization",
                            "args": {
                                "thresholds": {"MetricResource": 30},
                                "targetThresholds": {"MetricResource": 50},
                                "metricsUtilization": {
                                    "source": "Prometheus",
                                    "prometheus": {"query": "node_util"},
                                },
                            },
                        }
                    ],
                    "plugins": {
                        "deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]},
                        "balance": {"enabled": ["LowNodeUtilization"]},
                    },
                }
            ],
        }
    )
    bad = dataclasses.replace(policy.metrics_providers[0], prometheus_url="file:///etc/passwd")
    policy = dataclasses.replace(policy, metrics_providers=(bad,))
    informers = InformerSet(client=setup.client, rng=random.Random(1))
    events = EventRecorder(client=setup.client, component="descheduler")
    loop = DeschedulerLoop(
        client=setup.client,
        informers=informers,
        settings=DeschedulerSettings(policy=policy),
        policy=policy,
        metrics=DeschedulerMetrics(CollectorRegistry()),
        events=events,
    )
    informers.start()
    try:
        assert await asyncio.wait_for(informers.wait_synced(), timeout=10)
        target = str(api.store.resource_version)
        for _ in range(100):
            api.bookmark_watches()
            if await loop.wait_for_resource_version(target, within=0.1):
                break
        await loop.run_once(setup.clock.now())
        assert terminating(api) == ["web-0", "web-1"]
        report = loop.last_report
        assert report is not None
        assert len(report.errors) == 1  # LowNodeUtilization: no Prometheus values this cycle
        assert "LowNodeUtilization" in report.errors[0]
    finally:
        await events.close()
        await informers.stop()
        await loop.close()
