"""update_with_retry: a concurrent write between GET and PUT costs a re-read, not the change."""

from __future__ import annotations

from typing import Any

import pytest

from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError
from kubescale.kube.resources import CONFIG_MAPS, VERTICAL_POD_AUTOSCALERS
from kubescale.kube.writes import ConflictRetry, update_with_retry
from kubescale.sim.apiserver.server import ApiServer
from tests import builders
from tests.kube.objects import config_map


def _concurrent_write(apiserver: ApiServer, name: str, key: str, value: str) -> None:
    """Another writer changes the object on the server (in-process, between our GET and PUT)."""
    current = dict(apiserver.store.get(CONFIG_MAPS, name, "default"))
    current["data"] = {**(current.get("data") or {}), key: value}
    apiserver.store.update(current)


async def test_conflict_between_get_and_update_is_retried(
    apiserver: ApiServer, client: KubeClient
) -> None:
    apiserver.store.create(config_map("cm", data={"start": "1"}))
    seen: list[dict[str, str]] = []

    def mutate(obj: dict[str, Any]) -> dict[str, Any]:
        seen.append(dict(obj["data"]))
        if len(seen) == 1:
            _concurrent_write(apiserver, "cm", "theirs", "x")
        obj["data"]["ours"] = "y"
        return obj

    stored = await update_with_retry(
        client, CONFIG_MAPS, name="cm", namespace="default", mutate=mutate
    )
    assert seen == [{"start": "1"}, {"start": "1", "theirs": "x"}]
    assert stored["data"] == {"start": "1", "theirs": "x", "ours": "y"}
    server_copy = apiserver.store.get(CONFIG_MAPS, "cm", "default")
    assert server_copy["data"] == stored["data"]


async def test_a_stale_lister_object_costs_one_conflict(
    apiserver: ApiServer, client: KubeClient
) -> None:
    stale = apiserver.store.create(config_map("cm", data={"n": "0"}))
    _concurrent_write(apiserver, "cm", "n", "1")
    calls = 0

    def increment(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)
        return obj

    stored = await update_with_retry(
        client, CONFIG_MAPS, name="cm", namespace="default", mutate=increment, current=stale
    )
    assert calls == 2
    assert stored["data"]["n"] == "2"


async def test_conflicts_are_bounded(apiserver: ApiServer, client: KubeClient) -> None:
    apiserver.store.create(config_map("cm", data={}))
    attempts = 0

    def always_raced(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal attempts
        attempts += 1
        _concurrent_write(apiserver, "cm", "race", str(attempts))
        obj["data"]["ours"] = "y"
        return obj

    with pytest.raises(KubeApiError) as caught:
        await update_with_retry(
            client,
            CONFIG_MAPS,
            name="cm",
            namespace="default",
            mutate=always_raced,
            retry=ConflictRetry(attempts=3),
        )
    assert caught.value.conflict
    assert attempts == 3


async def test_no_change_means_no_write(apiserver: ApiServer, client: KubeClient) -> None:
    created = apiserver.store.create(config_map("cm", data={"a": "1"}))
    result = await update_with_retry(
        client, CONFIG_MAPS, name="cm", namespace="default", mutate=lambda obj: None
    )
    assert result["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    after = apiserver.store.get(CONFIG_MAPS, "cm", "default")
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


async def test_status_subresource(apiserver: ApiServer, client: KubeClient) -> None:
    apiserver.store.create(builders.vpas.vpa(name="v", target=builders.vpas.target_ref()))

    def recommend(obj: dict[str, Any]) -> dict[str, Any]:
        obj["status"] = {"recommendation": {"containerRecommendations": []}}
        obj["spec"]["updatePolicy"] = {"updateMode": "Off"}  # ignored by /status
        return obj

    stored = await update_with_retry(
        client,
        VERTICAL_POD_AUTOSCALERS,
        name="v",
        namespace="default",
        mutate=recommend,
        subresource="status",
    )
    assert stored["status"] == {"recommendation": {"containerRecommendations": []}}
    assert "updatePolicy" not in stored["spec"]


async def test_other_errors_propagate_at_once(client: KubeClient) -> None:
    with pytest.raises(KubeApiError) as caught:
        await update_with_retry(
            client, CONFIG_MAPS, name="missing", namespace="default", mutate=lambda o: o
        )
    assert caught.value.not_found
