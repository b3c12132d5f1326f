"""Configuration lookup and the in-cluster service-account token re-read."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubescale.base.clock import VirtualClock
from kubescale.kube.config_loading import (
    ConfigError,
    InClusterPaths,
    ServiceAccountToken,
    load_configuration,
    load_in_cluster,
)


def _mount(tmp_path: Path, token: str = "token-1") -> InClusterPaths:
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text(
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    )
    return InClusterPaths(token=tmp_path / "token", ca_cert=tmp_path / "ca.crt")


async def test_in_cluster_host_ca_and_token(tmp_path: Path) -> None:
    paths = _mount(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    configuration = load_in_cluster(clock=VirtualClock(), environ=env, paths=paths)
    assert configuration.host == "https://10.0.0.1:443"
    assert configuration.ssl_ca_cert == str(paths.ca_cert)
    assert configuration.authorization() == "Bearer token-1"


def test_ipv6_service_host_is_bracketed(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    configuration = load_in_cluster(clock=VirtualClock(), environ=env, paths=_mount(tmp_path))
    assert configuration.host == "https://[fd00::1]:6443"


async def test_token_file_is_re_read_after_the_refresh_period(tmp_path: Path) -> None:
    clock = VirtualClock()
    paths = _mount(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    configuration = load_in_cluster(clock=clock, environ=env, paths=paths)
    paths.token.write_text("token-2\n")
    await clock.advance(59)
    assert configuration.authorization() == "Bearer token-1"
    await clock.advance(1)
    assert configuration.authorization() == "Bearer token-2"


async def test_a_failed_re_read_keeps_the_last_good_token(tmp_path: Path) -> None:
    clock = VirtualClock()
    paths = _mount(tmp_path)
    token = ServiceAccountToken(paths.token, clock=clock, refresh_period=10)
    paths.token.write_text("")  # the kubelet is mid-rotation
    await clock.advance(10)
    assert token.current() == "token-1"
    paths.token.write_text("token-3")
    await clock.advance(10)
    assert token.current() == "token-3"
    assert token.reads == 2


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "must be set"),
        ({"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": ""}, "must be set"),
    ],
)
def test_in_cluster_needs_the_service_environment(
    tmp_path: Path, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_in_cluster(clock=VirtualClock(), environ=env, paths=_mount(tmp_path))


def test_in_cluster_needs_the_ca_and_token_files(tmp_path: Path) -> None:
    env = {"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"}
    missing = InClusterPaths(token=tmp_path / "no-token", ca_cert=tmp_path / "no-ca")
    with pytest.raises(ConfigError, match="CA certificate"):
        load_in_cluster(clock=VirtualClock(), environ=env, paths=missing)
    paths = _mount(tmp_path)
    with pytest.raises(ConfigError, match="token"):
        load_in_cluster(
            clock=VirtualClock(),
            environ=env,
            paths=InClusterPaths(token=tmp_path / "no-token", ca_cert=paths.ca_cert),
        )


async def test_lookup_order_prefers_kubeconfig_env_then_in_cluster(tmp_path: Path) -> None:
    paths = _mount(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    configuration = await load_configuration(
        kubeconfig=None, context=None, clock=VirtualClock(), environ=env, in_cluster_paths=paths
    )
    assert configuration.host == "https://10.0.0.1:443"
    with pytest.raises(ConfigError, match="does not exist"):
        await load_configuration(
            kubeconfig=None,
            context=None,
            clock=VirtualClock(),
            environ={**env, "KUBECONFIG": str(tmp_path / "missing")},
            in_cluster_paths=paths,
        )
    with pytest.raises(ConfigError, match="no kubeconfig"):
        await load_configuration(
            kubeconfig=None, context=None, clock=VirtualClock(), environ={"HOME": str(tmp_path)}
        )
