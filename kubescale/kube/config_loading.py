"""Where the client's connection settings come from: a kubeconfig file or the pod's service account.

Order (controller-runtime's ``config.GetConfig``): an explicit kubeconfig path, else
``$KUBECONFIG``, else in-cluster (``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT`` plus
the mounted service-account token and ``ca.crt``), else ``~/.kube/config``.

In-cluster tokens are *bound* service-account tokens that the kubelet rotates in place, so the
token file is re-read periodically rather than once: client-go's in-cluster config wraps it in
``transport.NewCachedFileTokenSource``, which re-reads it when its cached copy is older than one
minute and keeps the last good token if a read fails. :class:`ServiceAccountToken` does the same,
timed by the injected clock, and is installed as the configuration's ``refresh_api_key_hook``
(called before every request, :meth:`kubescale.kube.connection.Configuration.authorization`).

A kubeconfig is read by :mod:`kubescale.kube.kubeconfig` (no ``kubernetes`` library: issue 29).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubescale.base.clock import Clock
from kubescale.base.logs import component_logger
from kubescale.kube.connection import Configuration
from kubescale.kube.kubeconfig import KubeconfigError, configuration_from_kubeconfig
from kubescale.kube.kubeconfig import load as load_kubeconfig_file

log = component_logger("kube.config")

SERVICE_HOST_ENV = "KUBERNETES_SERVICE_HOST"
SERVICE_PORT_ENV = "KUBERNETES_SERVICE_PORT"
TOKEN_REFRESH_PERIOD = 60.0
"""Seconds a read token is trusted before the file is read again (client-go: 1 minute)."""


class ConfigError(ValueError):
    """No usable cluster configuration (missing file, environment or token)."""


@dataclass(frozen=True, kw_only=True)
class InClusterPaths:
    """Where the kubelet mounts the service account (overridable for tests)."""

    token: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
    ca_cert: Path = Path("/var/run/secrets/kubernetes.io/serviceaccount/ca.crt")


class ServiceAccountToken:
    """The bearer token from a file, re-read when older than ``refresh_period`` seconds."""

    def __init__(self, path: Path, *, clock: Clock, refresh_period: float = TOKEN_REFRESH_PERIOD):
        self.path = path
        self._clock = clock
        self._refresh_period = refresh_period
        self._token = self._read()
        self._read_at = clock.monotonic()
        self.reads = 1
        """How many times the file has been read successfully (for tests and debugging)."""

    def _read(self) -> str:
        token = self.path.read_text(encoding="utf-8").strip()
        if not token:
            raise ConfigError(f"service-account token file {self.path} is empty")
        return token

    def current(self) -> str:
        """The token, re-reading the file if the cached copy is stale."""
        now = self._clock.monotonic()
        if now - self._read_at >= self._refresh_period:
            try:
                self._token = self._read()
                self.reads += 1
            except (OSError, ConfigError) as err:
                # client-go's cachingTokenSource keeps serving the previous token on error.
                log.warning(
                    "re-reading the service-account token failed; keeping the old one",
                    extra={"fields": {"path": str(self.path), "error": str(err)}},
                )
            self._read_at = now
        return self._token

    def refresh_hook(self, configuration: Configuration) -> None:
        """``Configuration.refresh_api_key_hook``: put the current token in place."""
        configuration.api_key["BearerToken"] = self.current()
        configuration.api_key_prefix["BearerToken"] = "Bearer"


def _join_host_port(host: str, port: str) -> str:
    # Go's net.JoinHostPort: IPv6 literals are bracketed.
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


def load_in_cluster(
    *,
    clock: Clock,
    environ: Mapping[str, str] | None = None,
    paths: InClusterPaths | None = None,
    refresh_period: float = TOKEN_REFRESH_PERIOD,
) -> Configuration:
    """A configuration for the API server of the cluster this pod runs in."""
    env = os.environ if environ is None else environ
    paths = paths or InClusterPaths()
    host, port = env.get(SERVICE_HOST_ENV, ""), env.get(SERVICE_PORT_ENV, "")
    if not host or not port:
        raise ConfigError(f"{SERVICE_HOST_ENV} and {SERVICE_PORT_ENV} must be set in a pod")
    if not paths.ca_cert.is_file() or not paths.ca_cert.read_bytes().strip():
        raise ConfigError(f"in-cluster CA certificate {paths.ca_cert} is missing or empty")
    try:
        token = ServiceAccountToken(paths.token, clock=clock, refresh_period=refresh_period)
    except OSError as err:
        raise ConfigError(f"service-account token {paths.token} unreadable: {err}") from err
    configuration = Configuration(host=f"https://{_join_host_port(host, port)}")
    configuration.ssl_ca_cert = str(paths.ca_cert)
    token.refresh_hook(configuration)
    configuration.refresh_api_key_hook = token.refresh_hook  # before every request
    return configuration


def _is_file(path: Path) -> bool:
    return path.is_file()


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        problem = "is not a file" if path.exists() else "does not exist"
        raise ConfigError(f"{what} {path} {problem}")


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 300 else line[:299] + "…"


def check_server_url(host: str, *, source: str) -> None:
    """The server URL must be ``http(s)://host[:port][/path]``: anything else is a
    configuration error now rather than a connection error retried forever."""
    try:
        parsed = urlsplit(host)
        port = parsed.port
    except ValueError as err:
        raise ConfigError(f"{source}: invalid server URL {host!r}: {err}") from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"{source}: invalid server URL {host!r} (want https://host[:port])")
    del port


def _read_kubeconfig(path: Path) -> tuple[Mapping[str, Any], Path]:
    """The parsed file and the directory its relative paths start from."""
    return load_kubeconfig_file(path), path.absolute().parent


async def load_kubeconfig(path: Path, *, context: str | None = None) -> Configuration:
    """A configuration from a kubeconfig file (``context`` None → its current-context).

    Every problem with the file — unreadable, not YAML, no such context, no cluster, a bad
    server URL or credentials file — is one :class:`ConfigError` naming the file.
    """
    _require_file(path, "kubeconfig")
    try:
        parsed, base = _read_kubeconfig(path)
        configuration = await configuration_from_kubeconfig(parsed, base=base, context=context)
    except KubeconfigError as err:
        raise ConfigError(f"kubeconfig {path}: {_one_line(str(err))}") from None
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as err:
        # a shape the reader did not expect (a list where a map belongs ...)
        detail = _one_line(str(err)) or type(err).__name__
        raise ConfigError(f"kubeconfig {path}: unusable: {detail}") from None
    check_server_url(str(configuration.host or ""), source=f"kubeconfig {path}")
    return configuration


async def load_configuration(
    *,
    kubeconfig: Path | None,
    context: str | None,
    clock: Clock,
    environ: Mapping[str, str] | None = None,
    in_cluster_paths: InClusterPaths | None = None,
) -> Configuration:
    """Resolve the configuration in controller-runtime's order (see the module docstring)."""
    env = os.environ if environ is None else environ
    if kubeconfig is not None:
        return await load_kubeconfig(kubeconfig, context=context)
    from_env = env.get("KUBECONFIG", "")
    if from_env:
        # Only the first entry of a path list: merging several files is out of scope.
        return await load_kubeconfig(Path(from_env.split(os.pathsep)[0]), context=context)
    if env.get(SERVICE_HOST_ENV) and env.get(SERVICE_PORT_ENV):
        return load_in_cluster(clock=clock, environ=env, paths=in_cluster_paths)
    home = env.get("HOME")
    default = Path(home) / ".kube" / "config" if home else None
    if default is not None and _is_file(default):
        return await load_kubeconfig(default, context=context)
    raise ConfigError("no kubeconfig given, $KUBECONFIG unset, not in a pod, no ~/.kube/config")
