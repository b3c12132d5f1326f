"""A kubeconfig's context as a connection (:mod:`kubescale.kube.kubeconfig`): each field the
``kubernetes`` library read for kubescale (and client-go's ``clientcmd`` reads), the credential
order, exec plugins run for real, and TLS verification against the in-process API server."""

from __future__ import annotations

import base64
import datetime
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kubescale.base.clock import RealClock
from kubescale.certs.authority import generate_ca
from kubescale.kube.client import connect
from kubescale.kube.config_loading import ConfigError
from kubescale.kube.connection import Configuration, ssl_context
from kubescale.kube.errors import KubeTransportError
from kubescale.kube.kubeconfig import KubeconfigError, configuration_from_kubeconfig
from kubescale.kube.resources import CONFIG_MAPS
from kubescale.sim.apiserver.kubeconfig import write_kubeconfig_file
from kubescale.sim.apiserver.server import ApiServer

from .conftest import FAST_CLIENT

NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)


def _config(cluster: dict[str, Any], user: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "clusters": [{"name": "c", "cluster": cluster}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    if user is not None:
        body["users"] = [{"name": "u", "user": user}]
    return body


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _load(cluster: dict[str, Any], user: dict[str, Any] | None, base: Path) -> Configuration:
    return await configuration_from_kubeconfig(_config(cluster, user), base=base, now=NOW)


def _jwt(claims: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"e30.{payload}.sig"


def _plugin(tmp_path: Path, output: dict[str, Any] | str, *, code: int = 0) -> dict[str, Any]:
    """An exec plugin: this interpreter printing ``output`` (and its KUBERNETES_EXEC_INFO
    and env to a file, to check what it was given)."""
    text = output if isinstance(output, str) else json.dumps(output)
    seen = tmp_path / "plugin-saw.json"
    script = (
        "import json, os, sys\n"
        f"open({str(seen)!r}, 'w').write(json.dumps("
        "{'info': os.environ.get('KUBERNETES_EXEC_INFO'), 'extra': os.environ.get('EXTRA')}))\n"
        f"sys.stdout.write({text!r})\n"
        f"sys.exit({code})\n"
    )
    return {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": ["-c", script],
        "env": [{"name": "EXTRA", "value": "yes"}],
    }


HTTPS = {"server": "https://api.example:6443/"}


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        # token wins over tokenFile (client-go: bearer token, else the file)
        ({"token": "abc", "tokenFile": "missing"}, "Bearer abc"),
        # tokenFile relative to the kubeconfig's directory, stripped
        ({"tokenFile": "token.txt"}, "Bearer from-file"),
        # basic auth: base64("alice:s3cret")
        ({"username": "alice", "password": "s3cret"}, "Basic " + _b64(b"alice:s3cret")),
        # the gcp provider's unexpired access-token (expiry one day after NOW)
        (
            {
                "auth-provider": {
                    "name": "gcp",
                    "config": {"access-token": "gcp-tok", "expiry": "2026-01-02T00:00:00Z"},
                }
            },
            "Bearer gcp-tok",
        ),
        # the oidc provider's id-token, valid until NOW + 1 h (beyond the 5-minute margin)
        (
            {
                "auth-provider": {
                    "name": "oidc",
                    "config": {"id-token": _jwt({"exp": NOW.timestamp() + 3600})},
                }
            },
            "Bearer " + _jwt({"exp": NOW.timestamp() + 3600}),
        ),
        # no user section: no credentials
        (None, None),
    ],
)
async def test_credentials(tmp_path: Path, user: dict[str, Any] | None, expected: str) -> None:
    (tmp_path / "token.txt").write_text("from-file\n")
    configuration = await _load(HTTPS, user, tmp_path)
    assert configuration.host == "https://api.example:6443"  # trailing slash dropped
    assert configuration.authorization() == expected


async def test_cluster_tls_fields(tmp_path: Path) -> None:
    ca = generate_ca(common_name="kubeconfig-test-ca", now=NOW, days=1, key_type="ecdsa")
    cluster = {
        **HTTPS,
        "certificate-authority-data": _b64(ca.cert_pem),
        "tls-server-name": "kubernetes.default",
        "proxy-url": "http://proxy:3128",
    }
    user = {"client-certificate-data": _b64(ca.cert_pem), "client-key-data": _b64(ca.key_pem)}
    configuration = await _load(cluster, user, tmp_path)
    assert configuration.ca_cert_data == ca.cert_pem.decode()
    assert (configuration.cert_data, configuration.key_data) == (ca.cert_pem, ca.key_pem)
    assert configuration.tls_server_name == "kubernetes.default"
    assert configuration.proxy == "http://proxy:3128"
    assert configuration.verify_ssl
    context = ssl_context(configuration)  # the CA and the key pair load
    assert context.get_ca_certs()[0]["subject"] == ((("commonName", "kubeconfig-test-ca"),),)
    # files instead, relative to the kubeconfig's directory
    (tmp_path / "ca.pem").write_bytes(ca.cert_pem)
    files = {**HTTPS, "certificate-authority": "ca.pem", "insecure-skip-tls-verify": True}
    by_file = await _load(files, {"client-certificate": "c.pem", "client-key": "k.pem"}, tmp_path)
    assert by_file.ssl_ca_cert == str(tmp_path / "ca.pem")
    assert (by_file.cert_file, by_file.key_file) == (
        str(tmp_path / "c.pem"),
        str(tmp_path / "k.pem"),
    )
    assert not by_file.verify_ssl


async def test_plain_http_reads_no_certificates(tmp_path: Path) -> None:
    cluster = {"server": "http://127.0.0.1:8080", "certificate-authority": "none.pem"}
    configuration = await _load(cluster, {"client-certificate": "none.pem"}, tmp_path)
    assert (configuration.ssl_ca_cert, configuration.cert_file) == (None, None)


async def test_an_exec_plugin_token(tmp_path: Path) -> None:
    status = {"token": "exec-tok", "expirationTimestamp": "2026-01-01T01:00:00Z"}
    answer = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}
    exec_spec = _plugin(tmp_path, {**answer, "status": status})
    configuration = await _load(HTTPS, {"exec": exec_spec, "token": "ignored"}, tmp_path)
    assert configuration.authorization() == "Bearer exec-tok"
    saw = json.loads((tmp_path / "plugin-saw.json").read_text())
    assert saw["extra"] == "yes"
    assert json.loads(saw["info"])["kind"] == "ExecCredential"
    assert json.loads(saw["info"])["apiVersion"] == "client.authentication.k8s.io/v1"


async def test_an_exec_plugin_certificate(tmp_path: Path) -> None:
    status = {"clientCertificateData": "CERT PEM", "clientKeyData": "KEY PEM"}
    answer = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"}
    configuration = await _load(
        HTTPS, {"exec": _plugin(tmp_path, {**answer, "status": status})}, tmp_path
    )
    assert (configuration.cert_data, configuration.key_data) == (b"CERT PEM", b"KEY PEM")
    assert configuration.authorization() is None


@pytest.mark.parametrize(
    ("output", "code", "message"),
    [
        ("oops", 3, "exec: process returned 3"),
        ("not json", 0, "exec: failed to decode process output"),
        (
            {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "kind": "ExecCredential",
                "status": {},
            },
            0,
            "does not match client.authentication.k8s.io/v1",
        ),
        (
            {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential"},
            0,
            "missing key 'status'",
        ),
    ],
)
async def test_a_failing_exec_plugin_is_a_one_line_error(
    tmp_path: Path, output: dict[str, Any] | str, code: int, message: str
) -> None:
    with pytest.raises(KubeconfigError, match=message):
        await _load(HTTPS, {"exec": _plugin(tmp_path, output, code=code)}, tmp_path)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"contexts": [], "current-context": "x"}, "contexts: no entry named 'x'"),
        ({"current-context": ""}, "current-context: not set"),
        ({**_config(HTTPS), "clusters": "nope"}, "clusters: missing or not a list"),
        (_config({**HTTPS, "certificate-authority-data": "!!"}), "certificate-authority-data"),
    ],
)
async def test_bad_kubeconfigs_name_the_field(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    path = tmp_path / "kubeconfig"
    write_kubeconfig_file(path, config)
    with pytest.raises(ConfigError, match=message) as caught:
        await connect(kubeconfig=path, clock=RealClock())
    assert "\n" not in str(caught.value)


async def test_an_expired_oidc_token_without_refresh_token_is_refused(tmp_path: Path) -> None:
    provider = {"name": "oidc", "config": {"id-token": _jwt({"exp": NOW.timestamp() - 1})}}
    with pytest.raises(KubeconfigError, match="cannot refresh without refresh-token"):
        await _load(HTTPS, {"auth-provider": provider}, tmp_path)


async def test_the_server_certificate_is_verified(tmp_path: Path) -> None:
    """Against the in-process API server (TLS): its own CA connects; another CA is refused
    with the TLS failure named; ``insecure-skip-tls-verify`` connects without a CA."""
    other = generate_ca(common_name="another-ca", now=NOW, days=1, key_type="ecdsa")
    async with ApiServer() as api:
        base = api.kubeconfig()
        cluster = base["clusters"][0]["cluster"]
        variants = {
            "own": cluster,
            "other": {**cluster, "certificate-authority-data": _b64(other.cert_pem)},
            "insecure": {"server": cluster["server"], "insecure-skip-tls-verify": True},
        }
        results: dict[str, str] = {}
        for name, variant in variants.items():
            path = tmp_path / f"{name}.yaml"
            write_kubeconfig_file(
                path, {**base, "clusters": [{**base["clusters"][0], "cluster": variant}]}
            )
            kube = await connect(kubeconfig=path, settings=FAST_CLIENT)
            try:
                results[name] = (await kube.list(CONFIG_MAPS))["kind"]
            except KubeTransportError as err:
                results[name] = str(err)
            finally:
                await kube.close()
    assert results["own"] == results["insecure"] == "ConfigMapList"
    assert "certificate verify failed" in results["other"]
