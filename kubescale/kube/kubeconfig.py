"""A kubeconfig file's context as a :class:`~kubescale.kube.connection.Configuration`.

What ``kubernetes.aio.config.load_kube_config`` did for kubescale, and what client-go's
``clientcmd`` reads (``k8s.io/client-go/tools/clientcmd/api/types.go``):

- the context: the named one, else ``current-context``; its ``cluster`` (required) and ``user``;
- the cluster: ``server``; for ``https`` the CA from ``certificate-authority`` (a file, relative
  to the kubeconfig's directory) or ``certificate-authority-data`` (base64), and the user's client
  certificate likewise (``client-certificate``/``client-key`` or their ``-data``);
  ``insecure-skip-tls-verify``, ``tls-server-name``, ``proxy-url``;
- the credentials, in the library's order: the ``gcp`` auth provider (its ``access-token``, or
  its ``cmd-path``/``cmd-args`` command's ``credential.access_token`` when missing or expired),
  the ``oidc`` auth provider (its ``id-token``, refreshed with ``refresh-token`` at the issuer's
  token endpoint when missing or expired), an ``exec`` plugin (client.authentication.k8s.io
  ``ExecCredential``: a ``token`` or a client certificate), ``token``/``tokenFile``,
  ``username``/``password`` (basic auth).

Credentials are obtained once, when the file is loaded, as the library did.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import json
import os
import shlex
import ssl
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from kubescale.base.times import parse_time
from kubescale.kube.connection import Configuration
from kubescale.objects.views import optional_status_of

__all__ = ["KubeconfigError", "configuration_from_kubeconfig"]


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used (the message names the field)."""


def _named(config: Mapping[str, Any], section: str, name: str) -> Mapping[str, Any]:
    entries = config.get(section)
    if not isinstance(entries, list):
        raise KubeconfigError(f"{section}: missing or not a list")
    for entry in entries:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(section[:-1])
            if not isinstance(value, Mapping):
                raise KubeconfigError(f"{section}[{name}]: no {section[:-1]} object")
            return value
    raise KubeconfigError(f"{section}: no entry named {name!r}")


def _file_or_data(
    obj: Mapping[str, Any], file_key: str, base: Path
) -> tuple[str | None, bytes | None]:
    """``(path, None)`` for ``file_key`` (relative to ``base``), ``(None, decoded)`` for its
    base64 ``-data`` field (which wins, as in client-go), ``(None, None)`` without either."""
    data = obj.get(f"{file_key}-data")
    if data:
        try:
            # whitespace (a wrapped value) is ignored, any other non-base64 byte is an error
            return None, base64.b64decode("".join(str(data).split()), validate=True)
        except (binascii.Error, ValueError) as err:
            raise KubeconfigError(f"{file_key}-data: not base64: {err}") from None
    path = obj.get(file_key)
    if path:
        return str(base / str(path)), None
    return None, None


def _expired(expiry: object, now: datetime.datetime) -> bool:
    when = expiry if isinstance(expiry, datetime.datetime) else parse_time(expiry)
    if when is None:
        return True  # unreadable: obtain a new token
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    # the library's margin: a token expiring within 5 minutes counts as expired
    return when <= now + datetime.timedelta(minutes=5)


async def _run(argv: list[str], env: Mapping[str, str], what: str) -> bytes:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            env=dict(env),
            stdin=None,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as err:
        raise KubeconfigError(f"{what}: cannot run {argv[0]!r}: {err.strerror or err}") from None
    out, err_out = await process.communicate()
    if process.returncode != 0:
        detail = err_out.decode(errors="replace").strip()
        raise KubeconfigError(
            f"{what}: process returned {process.returncode}" + (f". {detail}" if detail else "")
        )
    return out


async def exec_credential(
    spec: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> Mapping[str, Any]:
    """Run an exec plugin (``users[].user.exec``); the ``status`` of its ``ExecCredential``."""
    for key in ("command", "apiVersion"):
        if key not in spec:
            raise KubeconfigError(f"exec: malformed request. missing key {key!r}")
    api_version = str(spec["apiVersion"])
    env = dict(os.environ if environ is None else environ)
    for item in spec.get("env") or ():
        if isinstance(item, Mapping) and "name" in item:
            env[str(item["name"])] = str(item.get("value", ""))
    info = {
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": sys.stdout.isatty()},
    }
    env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
    argv = [str(spec["command"]), *(str(a) for a in spec.get("args") or ())]
    out = await _run(argv, env, "exec")
    try:
        data = json.loads(out)
    except ValueError as err:
        raise KubeconfigError(f"exec: failed to decode process output: {err}") from None
    if not isinstance(data, Mapping):
        raise KubeconfigError("exec: malformed response: not an object")
    for key in ("apiVersion", "kind", "status"):
        if key not in data:
            raise KubeconfigError(f"exec: malformed response. missing key {key!r}")
    if data["apiVersion"] != api_version:
        raise KubeconfigError(
            f"exec: plugin api version {data['apiVersion']} does not match {api_version}"
        )
    status = optional_status_of(data)
    if status is None:
        raise KubeconfigError("exec: malformed response: status is not an object")
    return status


async def _gcp_token(provider: Mapping[str, Any], now: datetime.datetime) -> str:
    config = provider.get("config") or {}
    token = config.get("access-token")
    if token and not ("expiry" in config and _expired(config["expiry"], now)):
        return str(token)
    if "cmd-path" not in config or "cmd-args" not in config:
        raise KubeconfigError("auth-provider gcp: cmd-path and cmd-args are required")
    argv = [str(config["cmd-path"]), *shlex.split(str(config["cmd-args"]))]
    out = await _run(argv, os.environ, "auth-provider gcp")
    try:
        return str(json.loads(out)["credential"]["access_token"])
    except (ValueError, KeyError, TypeError) as err:
        raise KubeconfigError(f"auth-provider gcp: unexpected output: {err}") from None


def _jwt_expiry(token: str) -> datetime.datetime | None:
    parts = token.split(".")
    if len(parts) != 3:
        raise KubeconfigError("oidc: JWT tokens should contain 3 period-delimited parts")
    payload = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error) as err:
        raise KubeconfigError(f"oidc: id-token payload unreadable: {err}") from None
    expires = claims.get("exp") if isinstance(claims, Mapping) else None
    if expires is None:
        return None
    return datetime.datetime.fromtimestamp(float(expires), tz=datetime.UTC)


async def _oidc_token(provider: Mapping[str, Any], now: datetime.datetime) -> str:
    config = provider.get("config")
    if not isinstance(config, Mapping):
        raise KubeconfigError("oidc: missing configuration")
    token = config.get("id-token")
    if token:
        expiry = _jwt_expiry(str(token))
        if expiry is None or not _expired(expiry, now):
            return str(token)
    if "refresh-token" not in config:
        raise KubeconfigError("oidc: No valid id-token, and cannot refresh without refresh-token")
    issuer = str(config.get("idp-issuer-url") or "").rstrip("/")
    ca = config.get("idp-certificate-authority-data")
    context: Any = True
    if ca:
        context = ssl.create_default_context(cadata=base64.b64decode(str(ca)).decode())
    auth = aiohttp.BasicAuth(str(config.get("client-id", "")), str(config.get("client-secret", "")))
    try:
        async with aiohttp.ClientSession(auth=auth, raise_for_status=True) as session:
            well_known = f"{issuer}/.well-known/openid-configuration"
            async with session.get(well_known, ssl=context) as response:
                endpoint = (await response.json())["token_endpoint"]
            form = {"grant_type": "refresh_token", "refresh_token": str(config["refresh-token"])}
            async with session.post(endpoint, data=form, ssl=context) as response:
                answer = await response.json()
        return str(answer["id_token"])
    except (aiohttp.ClientError, KeyError, TypeError, ValueError) as err:
        raise KubeconfigError(f"oidc: failed to refresh access token: {err}") from None


async def configuration_from_kubeconfig(
    config: Mapping[str, Any],
    *,
    base: Path,
    context: str | None = None,
    now: datetime.datetime | None = None,
) -> Configuration:
    """The connection ``context`` (``None``: ``current-context``) of a parsed kubeconfig;
    relative file paths are taken from ``base`` (the file's directory). See the module
    docstring."""
    now = now or datetime.datetime.now(datetime.UTC)
    name = context or config.get("current-context")
    if not name:
        raise KubeconfigError("current-context: not set and no context given")
    chosen = _named(config, "contexts", str(name))
    cluster_name = chosen.get("cluster")
    if not cluster_name:
        raise KubeconfigError(f"contexts[{name}].context.cluster: not set")
    cluster = _named(config, "clusters", str(cluster_name))
    user: Mapping[str, Any] = {}
    if chosen.get("user") and isinstance(config.get("users"), list):
        try:
            user = _named(config, "users", str(chosen["user"]))
        except KubeconfigError:
            user = {}  # the library's safe lookup: a missing user means no credentials
    configuration = Configuration()
    await _credentials(configuration, user, base=base, now=now)
    server = str(cluster.get("server") or "")
    if server:
        configuration.host = server.rstrip("/")
    if configuration.host.startswith("https"):
        ca_file, ca_data = _file_or_data(cluster, "certificate-authority", base)
        configuration.ssl_ca_cert = ca_file
        configuration.ca_cert_data = ca_data.decode() if ca_data is not None else None
        if configuration.cert_data is None:
            cert_file, cert_data = _file_or_data(user, "client-certificate", base)
            key_file, key_data = _file_or_data(user, "client-key", base)
            configuration.cert_file, configuration.key_file = cert_file, key_file
            configuration.cert_data, configuration.key_data = cert_data, key_data
    if "insecure-skip-tls-verify" in cluster:
        configuration.verify_ssl = not cluster["insecure-skip-tls-verify"]
    if cluster.get("tls-server-name"):
        configuration.tls_server_name = str(cluster["tls-server-name"])
    if cluster.get("proxy-url"):
        configuration.proxy = str(cluster["proxy-url"])
    return configuration


async def _credentials(
    configuration: Configuration, user: Mapping[str, Any], *, base: Path, now: datetime.datetime
) -> None:
    provider = user.get("auth-provider")
    provider_name = provider.get("name") if isinstance(provider, Mapping) else None
    if isinstance(provider, Mapping) and provider_name == "gcp":
        configuration.api_key["BearerToken"] = f"Bearer {await _gcp_token(provider, now)}"
        return
    if isinstance(provider, Mapping) and provider_name == "oidc":
        configuration.api_key["BearerToken"] = f"Bearer {await _oidc_token(provider, now)}"
        return
    spec = user.get("exec")
    if isinstance(spec, Mapping):
        status = await exec_credential(spec)
        if "token" in status:
            configuration.api_key["BearerToken"] = f"Bearer {status['token']}"
            return
        if "clientCertificateData" in status:
            if "clientKeyData" not in status:
                raise KubeconfigError("exec: missing clientKeyData field in plugin output")
            configuration.cert_data = str(status["clientCertificateData"]).encode()
            configuration.key_data = str(status["clientKeyData"]).encode()
            return
        raise KubeconfigError("exec: missing token or clientCertificateData in plugin output")
    token = user.get("token")
    token_file = user.get("tokenFile")
    if not token and token_file:
        path = base / str(token_file)
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise KubeconfigError(f"tokenFile {path}: {err.strerror or err}") from None
    if token:
        configuration.api_key["BearerToken"] = f"Bearer {token}"
        return
    if "username" in user and "password" in user:
        pair = f"{user['username']}:{user['password']}".encode()
        configuration.api_key["BearerToken"] = "Basic " + base64.b64encode(pair).decode()


def load(path: Path) -> Mapping[str, Any]:
    """The parsed file (a mapping), or :class:`KubeconfigError`."""
    try:
        parsed = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or "not valid YAML"
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise KubeconfigError(f"{problem}{where}") from None
    if not isinstance(parsed, dict):
        raise KubeconfigError("empty or not a YAML mapping")
    return parsed
