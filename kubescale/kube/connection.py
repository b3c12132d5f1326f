"""The HTTP connection to the API server: its settings and one aiohttp session.

kubescale builds its own URLs (:mod:`kubescale.kube.api_paths`) and decodes JSON itself, so of a
Kubernetes client library it needs only the connection: a TLS context, the credentials and an
HTTP session. ``kubernetes.aio`` served that until issue 29: importing any part of it (its
``client`` package, or its ``config`` package, which imports the client) loads every generated
API and model class, the synchronous client, ``requests``, ``oauthlib`` and ``pydantic`` — 364
modules and 18 MiB of a webhook-only process's 73 MiB import floor, for nothing kubescale called.

:class:`Configuration` keeps the field names of that library's ``Configuration`` that kubescale
used (``host``, ``ssl_ca_cert``, ``cert_file``, ``key_file``, ``verify_ssl``,
``tls_server_name``, ``proxy``, ``api_key``/``api_key_prefix``/``refresh_api_key_hook``,
``client_session_kwargs``, ``trace_configs``), and :class:`ApiClient` sends a request the way
its REST layer did (the same TLS context, headers, JSON body encoding, proxy and
``server_hostname``), without a retry layer of its own: the retries are
:class:`kubescale.kube.transport.Transport`'s.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import aiohttp

__all__ = ["ApiClient", "Configuration"]

READ_BUFFER_BYTES = 2**21
"""aiohttp's read buffer: watch events can exceed its default (``kubernetes.aio``'s value)."""
DEFAULT_POOL_SIZE = 100
"""Connections open at once to the API server (``kubernetes.aio``'s default)."""


@dataclass(kw_only=True)
class Configuration:
    """Where the API server is and how to authenticate to it (see the module docstring)."""

    host: str = "http://localhost"
    ssl_ca_cert: str | None = None
    """A CA bundle file verifying the server."""
    ca_cert_data: str | None = None
    """A CA bundle, PEM text (a kubeconfig's ``certificate-authority-data``)."""
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    """A client certificate, PEM (``client-certificate-data``, an exec plugin's output)."""
    key_data: bytes | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    api_key: dict[str, str] = field(default_factory=dict)
    """``{"BearerToken": ...}``: the ``Authorization`` header's value (with its prefix below)."""
    api_key_prefix: dict[str, str] = field(default_factory=dict)
    refresh_api_key_hook: Callable[[Configuration], None] | None = None
    """Called before every request, to put a fresh token in :attr:`api_key`."""
    client_session_kwargs: dict[str, Any] | None = None
    trace_configs: list[aiohttp.TraceConfig] = field(default_factory=list)
    connection_pool_maxsize: int = DEFAULT_POOL_SIZE

    def authorization(self) -> str | None:
        """The ``Authorization`` header's value, or ``None``."""
        if self.refresh_api_key_hook is not None:
            self.refresh_api_key_hook(self)
        key = self.api_key.get("BearerToken") or self.api_key.get("authorization")
        if not key:
            return None
        prefix = self.api_key_prefix.get("BearerToken") or self.api_key_prefix.get("authorization")
        return f"{prefix} {key}" if prefix else key


def ssl_context(configuration: Configuration) -> ssl.SSLContext:
    """The TLS context: the CA file/data (else the system's), the client certificate, and no
    verification only when the configuration says ``insecure-skip-tls-verify``."""
    context = ssl.create_default_context(
        cafile=configuration.ssl_ca_cert, cadata=configuration.ca_cert_data
    )
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    elif configuration.cert_data:
        _load_cert_data(context, configuration.cert_data, configuration.key_data)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _load_cert_data(context: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """``ssl`` loads a key pair only from files: write them to a private directory, load them,
    remove them (nothing is left on disk once the context holds them)."""
    with tempfile.TemporaryDirectory(prefix="kubescale-client-cert-") as directory:
        cert_path = Path(directory) / "cert.pem"
        key_path = Path(directory) / "key.pem"
        for path, data in ((cert_path, cert), (key_path, key)):
            if data is not None:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
        context.load_cert_chain(str(cert_path), keyfile=str(key_path) if key else None)


def encode_body(body: Any, content_type: str) -> bytes | str | None:
    """A request body as sent: JSON for JSON content types (and apply-patch), as given when
    already serialised (``kubernetes.aio``'s rule)."""
    if body is None:
        return None
    if isinstance(body, bytes | str):
        return body
    if "json" in content_type.lower() or content_type == "application/apply-patch+yaml":
        return json.dumps(body)
    raise ValueError(f"cannot send a {type(body).__name__} body as {content_type}")


class ApiClient:
    """One aiohttp session to the API server (created on the first request, inside the running
    event loop), sending requests as :class:`Configuration` says."""

    def __init__(self, configuration: Configuration | None = None) -> None:
        self.configuration = configuration or Configuration()
        self.user_agent = "kubescale"
        self._context = (
            ssl_context(self.configuration) if self.configuration.host.startswith("https") else None
        )
        self._session: aiohttp.ClientSession | None = None

    def _session_now(self) -> aiohttp.ClientSession:
        if self._session is None:
            configuration = self.configuration
            kwargs: dict[str, Any] = {
                "connector": aiohttp.TCPConnector(
                    limit=configuration.connection_pool_maxsize,
                    ssl=self._context if self._context is not None else True,
                ),
                "trust_env": True,
                "read_bufsize": READ_BUFFER_BYTES,
                "trace_configs": list(configuration.trace_configs) or None,
            }
            kwargs.update(configuration.client_session_kwargs or {})
            self._session = aiohttp.ClientSession(**kwargs)
        return self._session

    async def send(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, str]],
        headers: dict[str, str],
        body: Any,
        client_timeout: aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        """Send one request; the response with its body unread (the caller reads and
        releases it)."""
        configuration = self.configuration
        url = configuration.host.rstrip("/") + path
        if query:
            # kubernetes.aio's encoding: the value quoted (``/`` kept), the name as given.
            url += "?" + "&".join(f"{name}={quote(str(value))}" for name, value in query)
        content_type = headers.get("Content-Type", "application/json")
        # kubernetes.aio's rule: a JSON patch is a list of operations; an object sent with
        # its content type is a strategic merge patch.
        json_patch = content_type == "application/json-patch+json"
        if method == "PATCH" and json_patch and not isinstance(body, list):
            content_type = "application/strategic-merge-patch+json"
        sent = {**headers, "Content-Type": content_type, "User-Agent": self.user_agent}
        authorization = configuration.authorization()
        if authorization:
            sent["Authorization"] = authorization
        args: dict[str, Any] = {"headers": sent, "timeout": client_timeout}
        if method in ("POST", "PUT", "PATCH", "OPTIONS", "DELETE"):
            args["data"] = encode_body(body, content_type)
        if configuration.tls_server_name:
            args["server_hostname"] = configuration.tls_server_name
        if configuration.proxy:
            args["proxy"] = configuration.proxy
        return await self._session_now().request(method, url, **args)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            # Let the connector's TLS transports finish closing (aiohttp's advice).
            await asyncio.sleep(0)
