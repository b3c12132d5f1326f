"""Scheduler extenders over real HTTPS: the ExtenderArgs sent, the answers honoured.

The extender is an aiohttp server with a certificate from ``kubescale.certs.authority``; the
scheduler reaches it as a KubeSchedulerConfiguration ``extenders`` entry with ``tlsConfig.caData``.
Upstream behaviour checked (``pkg/scheduler/extender.go``, ``schedule_one.go``): PascalCase
``Pod``/``Nodes``/``NodeNames`` with the one the extender does not use set to null; answers read
case-insensitively; only nodes that passed the in-tree filters are sent; ``FailedNodes`` and
``FailedAndUnresolvableNodes`` become the nodes' reasons; a failing extender fails the pod
(``SchedulerError``) unless ``ignorable``; ``httpTimeout``; prioritize scores count
``Score × weight × 10`` and their errors are ignored; ``managedResources`` limit interest and
``ignoredByScheduler`` hides a resource from NodeResourcesFit.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubescale.base.clock import VirtualClock
from kubescale.certs.authority import KeyPair, generate_ca, issue_serving_certificate
from kubescale.kube.resources import PODS
from kubescale.sim.apiserver.server import ApiServer
from kubescale.sim.cluster.scheduler import Scheduler
from kubescale.sim.cluster.scheduler_extenders import ExtenderConfig, parse_duration
from tests import builders

POD = functools.partial(
    builders.pods.pod,
    containers=[builders.pods.container(image="nginx", requests={"cpu": "1"})],
)

Answer = Callable[[dict[str, Any]], Any]


@dataclass
class Extender:
    """A running HTTPS extender: what it was asked, and how it answers."""

    url: str
    ca: KeyPair
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answers: dict[str, Answer] = field(default_factory=dict)
    status: dict[str, int] = field(default_factory=dict)
    delay: float = 0.0
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def config(self, **fields: Any) -> ExtenderConfig:
        raw: dict[str, Any] = {
            "urlPrefix": self.url + "/scheduler/",
            "tlsConfig": {"caData": base64.b64encode(self.ca.cert_pem).decode()},
            **fields,
        }
        return ExtenderConfig.from_dict(raw)

    def calls(self, verb: str) -> list[dict[str, Any]]:
        return [body for name, body in self.requests if name == verb]


@pytest.fixture(scope="module")
def authority() -> tuple[KeyPair, KeyPair]:
    now = datetime.now(UTC)
    ca = generate_ca(common_name="extender-test-ca", now=now, days=1, key_type="ecdsa")
    serving = issue_serving_certificate(
        ca=ca, names=["127.0.0.1", "localhost"], now=now, days=1, key_type="ecdsa"
    )
    return ca, serving


@pytest.fixture
async def extender(authority: tuple[KeyPair, KeyPair], tmp_path: Path) -> AsyncIterator[Extender]:
    ca, serving = authority
    (tmp_path / "cert.pem").write_bytes(serving.cert_pem)
    (tmp_path / "key.pem").write_bytes(serving.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    state = Extender(url="", ca=ca)

    async def handle(request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        body = await request.json()
        state.requests.append((verb, body))
        if state.delay:
            with contextlib.suppress(TimeoutError):  # a slow extender, released at teardown
                await asyncio.wait_for(state.release.wait(), state.delay)
        if verb in state.status:
            return web.Response(status=state.status[verb], text="broken")
        return web.json_response(state.answers[verb](body))

    app = web.Application()
    app.router.add_post("/scheduler/{verb}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    port = runner.addresses[0][1]
    state.url = f"https://127.0.0.1:{port}"
    try:
        yield state
    finally:
        state.release.set()
        await runner.cleanup()


node = functools.partial(builders.nodes.sim_node, instance_type="m")
"""A simulated ``m`` node: 4 CPUs, 8Gi."""


async def schedule(
    extenders: list[ExtenderConfig], nodes: list[dict[str, Any]], *pods: dict[str, Any]
) -> ApiServer:
    clock = VirtualClock()
    api = ApiServer(clock=clock, crd_dirs=[])
    for obj in [*nodes, *pods]:
        api.store.create(obj)
    scheduler = Scheduler(api, extenders=extenders)
    try:
        await scheduler.step(clock.now())
    finally:
        await scheduler.close()
    return api


def outcome(api: ApiServer, name: str) -> str:
    stored = api.store.get(PODS, name, "default")
    if stored["spec"].get("nodeName"):
        return str(stored["spec"]["nodeName"])
    (condition,) = [c for c in stored["status"]["conditions"] if c["type"] == "PodScheduled"]
    return f"{condition['reason']}: {condition['message']}"


TAINT = ({"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},)


async def test_node_cache_capable_filter_sends_names_and_its_verdict_counts(
    extender: Extender,
) -> None:
    extender.answers["filter"] = lambda args: {
        "NodeNames": ["n3"],
        "FailedNodes": {"n1": "recently descheduled web from n1"},
        "FailedAndUnresolvableNodes": {"n2": "hot node"},
        "Error": "",
    }
    config = extender.config(filterVerb="filter", nodeCacheCapable=True)
    api = await schedule(
        [config],
        [node(name="n0", taints=TAINT), node(name="n1"), node(name="n2"), node(name="n3")],
        POD(name="web"),
    )
    assert outcome(api, "web") == "n3"
    (args,) = extender.calls("filter")
    assert set(args) == {"Pod", "Nodes", "NodeNames"}
    assert args["Nodes"] is None
    assert args["NodeNames"] == ["n1", "n2", "n3"]  # n0 failed the in-tree TaintToleration
    assert args["Pod"]["metadata"]["name"] == "web"


async def test_filter_reasons_enter_the_unschedulable_message(extender: Extender) -> None:
    extender.answers["filter"] = lambda args: {
        "NodeNames": [],
        "FailedNodes": {"n1": "recently descheduled", "n2": "recently descheduled"},
        "FailedAndUnresolvableNodes": {"n3": "hot node"},
    }
    config = extender.config(filterVerb="filter", nodeCacheCapable=True)
    api = await schedule(
        [config],
        [node(name="n0", cpu="500m"), node(name="n1"), node(name="n2"), node(name="n3")],
        POD(name="web"),
    )
    assert outcome(api, "web") == (
        "Unschedulable: 0/4 nodes are available: 1 Insufficient cpu, 1 hot node, "
        "2 recently descheduled. preemption: 0/4 nodes are available: "
        "1 Preemption is not helpful for scheduling, 3 No preemption victims found for "
        "incoming pod."
    )


async def test_node_list_extender_gets_node_objects_and_may_answer_in_lower_case(
    extender: Extender,
) -> None:
    def answer(args: dict[str, Any]) -> Any:
        keep = [n for n in args["Nodes"]["items"] if n["metadata"]["name"] == "n2"]
        return {"nodes": {"items": keep}, "failedNodes": {"n1": "no"}, "error": ""}

    extender.answers["filter"] = answer
    config = extender.config(filterVerb="filter")
    api = await schedule([config], [node(name="n1"), node(name="n2")], POD(name="web"))
    assert outcome(api, "web") == "n2"
    (args,) = extender.calls("filter")
    assert args["NodeNames"] is None
    assert [n["metadata"]["name"] for n in args["Nodes"]["items"]] == ["n1", "n2"]
    assert args["Nodes"]["items"][0]["status"]["allocatable"]["cpu"] == "4"


async def test_a_missing_node_list_filters_out_every_node(extender: Extender) -> None:
    extender.answers["filter"] = lambda args: {"FailedNodes": {}}
    config = extender.config(filterVerb="filter", nodeCacheCapable=True)
    api = await schedule([config], [node(name="n1")], POD(name="web"))
    assert outcome(api, "web").startswith("Unschedulable: 0/1 nodes are available:")


async def test_naming_a_node_not_sent_is_an_error(extender: Extender) -> None:
    extender.answers["filter"] = lambda args: {"NodeNames": ["elsewhere"]}
    config = extender.config(filterVerb="filter", nodeCacheCapable=True)
    api = await schedule([config], [node(name="n1")], POD(name="web"))
    assert outcome(api, "web") == (
        f'SchedulerError: extender "{extender.url}/scheduler/" claims a filtered node '
        '"elsewhere" which is not found in the input node list'
    )


async def test_an_error_field_fails_the_pod(extender: Extender) -> None:
    extender.answers["filter"] = lambda args: {"NodeNames": ["n1"], "Error": "policy store down"}
    config = extender.config(filterVerb="filter", nodeCacheCapable=True)
    api = await schedule([config], [node(name="n1")], POD(name="web"))
    assert outcome(api, "web") == "SchedulerError: policy store down"


@pytest.mark.parametrize("ignorable", [False, True])
async def test_http_errors_fail_the_pod_unless_ignorable(
    extender: Extender, ignorable: bool
) -> None:
    extender.status["filter"] = 500
    config = extender.config(filterVerb="filter", nodeCacheCapable=True, ignorable=ignorable)
    api = await schedule([config], [node(name="n1")], POD(name="web"))
    expected = (
        "n1"
        if ignorable
        else "SchedulerError: failed filter with extender at URL "
        f"{extender.url}/scheduler/filter, code 500"
    )
    assert outcome(api, "web") == expected


@pytest.mark.parametrize("ignorable", [False, True])
async def test_http_timeout(extender: Extender, ignorable: bool) -> None:
    # The answer would come after 600 s (released at teardown): only the 150 ms httpTimeout can
    # end the call, so the outcome proves it — no elapsed time asserted (issue 32.7).
    extender.delay = 600.0
    extender.answers["filter"] = lambda args: {"NodeNames": args["NodeNames"]}
    config = extender.config(
        filterVerb="filter", nodeCacheCapable=True, ignorable=ignorable, httpTimeout="150ms"
    )
    assert config.timeout == pytest.approx(0.15)
    api = await schedule([config], [node(name="n1")], POD(name="web"))
    if ignorable:
        assert outcome(api, "web") == "n1"
    else:
        assert outcome(api, "web") == (
            f'SchedulerError: Post "{extender.url}/scheduler/filter": context deadline '
            "exceeded (Client.Timeout exceeded while awaiting headers)"
        )


def test_timeouts_default_to_five_seconds_and_parse_as_go_durations() -> None:
    assert ExtenderConfig.from_dict({"urlPrefix": "https://x"}).timeout == 5.0
    assert ExtenderConfig.from_dict({"urlPrefix": "https://x", "httpTimeout": "0s"}).timeout == 5.0
    assert parse_duration("1m30s") == 90.0
    assert parse_duration("1.5s") == 1.5
    assert parse_duration(2) == 2.0
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("5 seconds")
    with pytest.raises(ValueError, match="weight must be positive"):
        ExtenderConfig.from_dict({"urlPrefix": "https://x", "prioritizeVerb": "p"})


@pytest.mark.parametrize(("weight", "expected"), [(1, "n1"), (2, "n2")])
async def test_prioritize_scores_count_times_weight_times_ten(
    extender: Extender, weight: int, expected: str
) -> None:
    # LeastAllocated: n1 (empty) scores (75 + 97) / 2 = 86, n2 (2 of 4 cpus used) (25 + 95) / 2
    # = 60. The extender's 2 for n2 adds 20 × weight: 80 < 86 with weight 1, 100 > 86 with 2.
    extender.answers["prioritize"] = lambda args: [
        {"Host": "n1", "Score": 0},
        {"Host": "n2", "Score": 2},
    ]
    config = extender.config(prioritizeVerb="prioritize", weight=weight, nodeCacheCapable=True)
    api = await schedule(
        [config],
        [node(name="n1"), node(name="n2")],
        POD(
            name="busy",
            containers=[builders.pods.container(image="nginx", requests={"cpu": "2"})],
            node_name="n2",
        ),
        POD(name="web"),
    )
    assert outcome(api, "web") == expected
    (args,) = extender.calls("prioritize")
    assert args["NodeNames"] == ["n1", "n2"]


async def test_prioritize_errors_are_ignored_and_one_feasible_node_is_not_scored(
    extender: Extender,
) -> None:
    extender.status["prioritize"] = 500
    config = extender.config(prioritizeVerb="prioritize", weight=5, nodeCacheCapable=True)
    api = await schedule([config], [node(name="n1"), node(name="n2")], POD(name="web"))
    assert outcome(api, "web") == "n1"
    assert len(extender.calls("prioritize")) == 1
    api = await schedule([config], [node(name="n1")], POD(name="solo"))
    assert outcome(api, "solo") == "n1"
    assert len(extender.calls("prioritize")) == 1


async def test_managed_resources_limit_interest_and_can_be_ignored_by_the_scheduler(
    extender: Extender,
) -> None:
    extender.answers["filter"] = lambda args: {"NodeNames": args["NodeNames"]}
    config = extender.config(
        filterVerb="filter",
        nodeCacheCapable=True,
        managedResources=[{"name": "example.com/foo", "ignoredByScheduler": True}],
    )
    plain = POD(name="plain")
    foo = POD(
        name="foo",
        containers=[
            builders.pods.container(
                image="nginx", requests={"cpu": "1", **{"example.com/foo": "1"}}
            )
        ],
    )
    api = await schedule([config], [node(name="n1")], plain, foo)
    # the node has no example.com/foo: only ignoredByScheduler lets the pod fit
    assert (outcome(api, "plain"), outcome(api, "foo")) == ("n1", "n1")
    assert [a["Pod"]["metadata"]["name"] for a in extender.calls("filter")] == ["foo"]


async def test_tls_is_verified_against_ca_data_unless_insecure(extender: Extender) -> None:
    extender.answers["filter"] = lambda args: {"NodeNames": args["NodeNames"]}
    other = generate_ca(common_name="other", now=datetime.now(UTC), days=1, key_type="ecdsa")
    wrong = ExtenderConfig.from_dict(
        {
            "urlPrefix": extender.url + "/scheduler",
            "filterVerb": "filter",
            "nodeCacheCapable": True,
            "tlsConfig": {"caData": base64.b64encode(other.cert_pem).decode()},
        }
    )
    api = await schedule([wrong], [node(name="n1")], POD(name="web"))
    assert outcome(api, "web").startswith(f'SchedulerError: Post "{extender.url}/scheduler/filter"')
    assert "certificate verify failed" in outcome(api, "web")
    insecure = ExtenderConfig.from_dict(
        {
            "urlPrefix": extender.url + "/scheduler",
            "filterVerb": "filter",
            "nodeCacheCapable": True,
            "tlsConfig": {"insecure": True},
        }
    )
    api = await schedule([insecure], [node(name="n1")], POD(name="web"))
    assert outcome(api, "web") == "n1"


async def test_extenders_run_in_turn_on_the_survivors(extender: Extender) -> None:
    calls: list[list[str]] = []

    def first(args: dict[str, Any]) -> Any:
        calls.append(args["NodeNames"])
        return {"NodeNames": [n for n in args["NodeNames"] if n != "n1"]}

    def second(args: dict[str, Any]) -> Any:
        calls.append(args["NodeNames"])
        return {"NodeNames": args["NodeNames"][-1:]}

    extender.answers["filter"] = first
    extender.answers["second"] = second
    configs = [
        extender.config(filterVerb="filter", nodeCacheCapable=True),
        extender.config(filterVerb="second", nodeCacheCapable=True),
    ]
    api = await schedule(
        configs, [node(name="n1"), node(name="n2"), node(name="n3")], POD(name="web")
    )
    assert calls == [["n1", "n2", "n3"], ["n2", "n3"]]
    assert outcome(api, "web") == "n3"
