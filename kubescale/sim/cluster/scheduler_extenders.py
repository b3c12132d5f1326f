"""Scheduler extenders: kube-scheduler's HTTP(S) callouts, configured and called as upstream.

An :class:`ExtenderConfig` is one ``KubeSchedulerConfiguration.extenders[]`` entry (its JSON
field names: ``urlPrefix``, ``filterVerb``, ``prioritizeVerb``, ``weight``, ``nodeCacheCapable``,
``ignorable``, ``httpTimeout``, ``managedResources``, ``enableHTTPS``, ``tlsConfig``). The
client follows ``pkg/scheduler/extender.go``:

* ``POST {urlPrefix without trailing "/"}/{verb}``, ``Content-Type: application/json``; any
  status but 200 is an error (``failed <verb> with extender at URL <url>, code <n>``); the
  timeout is ``httpTimeout`` (``5s`` when unset or zero);
* the body is ``ExtenderArgs`` with PascalCase keys: ``Pod``, and ``NodeNames`` when the extender
  is ``nodeCacheCapable`` else ``Nodes`` (a NodeList) — the other one is null;
* answers are decoded with Go's case-insensitive field matching. A filter answer's ``Error``
  makes the call an error; a nodeCacheCapable extender must only name input nodes; a missing
  node list means every node was filtered out. ``FailedNodes`` and
  ``FailedAndUnresolvableNodes`` (the latter wins) carry each rejected node's reason;
* ``IsInterested``: with ``managedResources``, only pods whose containers request or limit one.

TLS: ``tlsConfig.caData`` (base64 PEM, as ``[]byte`` fields are in JSON), ``caFile``,
``insecure`` (no verification), ``serverName``, and a client certificate from
``certData``/``keyData`` or ``certFile``/``keyFile``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from kubescale.base.go_time import parse_duration as parse_go_duration

__all__ = [
    "DEFAULT_EXTENDER_TIMEOUT",
    "MAX_EXTENDER_PRIORITY",
    "MAX_NODE_SCORE",
    "ExtenderClient",
    "ExtenderConfig",
    "ExtenderError",
    "FilterResult",
    "parse_duration",
]

DEFAULT_EXTENDER_TIMEOUT: Final = 5.0
MAX_NODE_SCORE: Final = 100
MAX_EXTENDER_PRIORITY: Final = 10


class ExtenderError(Exception):
    """A failed extender call; the message is what kube-scheduler would report."""


def parse_duration(value: object) -> float:
    """A ``metav1.Duration`` (Go ``time.ParseDuration`` text such as ``"1m30s"``, ``"500ms"``)
    in seconds; a bare number is taken as seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    if text == "":
        return 0.0
    try:
        return parse_go_duration(text)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None


def _get(mapping: Mapping[str, Any], key: str) -> Any:
    """Go ``encoding/json``'s case-insensitive field match."""
    if key in mapping:
        return mapping[key]
    lowered = key.lower()
    for name, value in mapping.items():
        if name.lower() == lowered:
            return value
    return None


@dataclass(frozen=True, kw_only=True)
class ExtenderConfig:
    """One ``extenders[]`` entry of a KubeSchedulerConfiguration."""

    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    node_cache_capable: bool = False
    ignorable: bool = False
    http_timeout: float = 0.0
    managed_resources: tuple[tuple[str, bool], ...] = ()
    """``(name, ignoredByScheduler)`` pairs."""
    tls: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ExtenderConfig:
        """From the configuration's JSON/YAML form (upstream field names)."""
        if not raw.get("urlPrefix"):
            raise ValueError("extender urlPrefix is required")
        weight = int(raw.get("weight") or 0)
        if raw.get("prioritizeVerb") and weight <= 0:
            raise ValueError("extender weight must be positive when prioritizeVerb is set")
        managed = tuple(
            (str(r["name"]), bool(r.get("ignoredByScheduler", False)))
            for r in raw.get("managedResources") or []
        )
        return cls(
            url_prefix=str(raw["urlPrefix"]),
            filter_verb=str(raw.get("filterVerb") or ""),
            prioritize_verb=str(raw.get("prioritizeVerb") or ""),
            weight=weight,
            node_cache_capable=bool(raw.get("nodeCacheCapable", False)),
            ignorable=bool(raw.get("ignorable", False)),
            http_timeout=parse_duration(raw.get("httpTimeout") or 0),
            managed_resources=managed,
            tls=dict(raw.get("tlsConfig") or {}),
        )

    @property
    def name(self) -> str:
        """``HTTPExtender.Name()``: the URL prefix."""
        return self.url_prefix

    @property
    def timeout(self) -> float:
        return self.http_timeout if self.http_timeout > 0 else DEFAULT_EXTENDER_TIMEOUT

    def ignored_resources(self) -> frozenset[str]:
        """Managed resources NodeResourcesFit leaves to this extender."""
        return frozenset(name for name, ignored in self.managed_resources if ignored)

    def is_interested(self, pod: Mapping[str, Any]) -> bool:
        if not self.managed_resources:
            return True
        managed = {name for name, _ in self.managed_resources}
        spec = pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            resources = container.get("resources") or {}
            for key in ("requests", "limits"):
                if managed & set(resources.get(key) or {}):
                    return True
        return False


@dataclass(frozen=True)
class FilterResult:
    """What one extender's filter left, and why it dropped the others."""

    passed: tuple[str, ...]
    failed: Mapping[str, str]
    failed_unresolvable: Mapping[str, str]


class ExtenderClient:
    """Calls one extender. Use :meth:`close` when done (it owns an HTTP session)."""

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool | None = None

    def _tls(self) -> ssl.SSLContext | bool:
        if self._ssl is not None:
            return self._ssl
        tls = self.config.tls
        if not self.config.url_prefix.startswith("https://"):
            self._ssl = False
            return False
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        if tls.get("insecure"):
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif tls.get("caData"):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.load_verify_locations(cadata=_pem(tls["caData"]))
        elif tls.get("caFile"):
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.load_verify_locations(cafile=str(tls["caFile"]))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if tls.get("certData") and tls.get("keyData"):
            with tempfile.TemporaryDirectory(prefix="kubescale-extender-") as tmp:
                cert, key = Path(tmp) / "cert.pem", Path(tmp) / "key.pem"
                cert.write_text(_pem(tls["certData"]))
                key.write_text(_pem(tls["keyData"]))
                context.load_cert_chain(cert, key)
        elif tls.get("certFile") and tls.get("keyFile"):
            context.load_cert_chain(str(tls["certFile"]), str(tls["keyFile"]))
        self._ssl = context
        return context

    def _url(self, verb: str) -> str:
        return f"{self.config.url_prefix.rstrip('/')}/{verb}"

    async def _post(self, verb: str, body: Mapping[str, Any]) -> Any:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
        url = self._url(verb)
        server_name = self.config.tls.get("serverName") or None
        try:
            async with asyncio.timeout(self.config.timeout):
                async with self._session.post(
                    url,
                    data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                    ssl=self._tls(),
                    server_hostname=server_name,
                ) as response:
                    payload = await response.read()
                    if response.status != 200:
                        raise ExtenderError(
                            f"failed {verb} with extender at URL {url}, code {response.status}"
                        )
        except TimeoutError as exc:
            raise ExtenderError(
                f'Post "{url}": context deadline exceeded '
                "(Client.Timeout exceeded while awaiting headers)"
            ) from exc
        except aiohttp.ClientError as exc:
            raise ExtenderError(f'Post "{url}": {exc}') from exc
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise ExtenderError(f"extender {self.config.name}: invalid JSON answer: {exc}") from exc

    def _args(self, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """``ExtenderArgs``: node names for a nodeCacheCapable extender, else the NodeList."""
        if self.config.node_cache_capable:
            names = [str(n["metadata"]["name"]) for n in nodes]
            return {"Pod": pod, "Nodes": None, "NodeNames": names}
        return {
            "Pod": pod,
            "Nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": nodes},
            "NodeNames": None,
        }

    async def filter(
        self, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]
    ) -> FilterResult:
        """``HTTPExtender.Filter``."""
        answer = await self._post(self.config.filter_verb, self._args(pod, nodes))
        if not isinstance(answer, Mapping):
            raise ExtenderError(f"extender {self.config.name}: filter answer is not an object")
        error = _get(answer, "Error")
        if error:
            raise ExtenderError(str(error))
        input_names = [str(n["metadata"]["name"]) for n in nodes]
        known = set(input_names)
        names = _get(answer, "NodeNames")
        passed: list[str] = []
        if self.config.node_cache_capable and names is not None:
            for name in names:
                if name not in known:
                    raise ExtenderError(
                        f'extender "{self.config.name}" claims a filtered node "{name}" '
                        "which is not found in the input node list"
                    )
                passed.append(str(name))
        else:
            node_list = _get(answer, "Nodes")
            items = _get(node_list, "Items") if isinstance(node_list, Mapping) else None
            for item in items or []:
                name = str(((item or {}).get("metadata") or {}).get("name", ""))
                if name in known:
                    passed.append(name)
        failed = _get(answer, "FailedNodes") or {}
        unresolvable = _get(answer, "FailedAndUnresolvableNodes") or {}
        return FilterResult(
            passed=tuple(passed),
            failed={str(k): str(v) for k, v in dict(failed).items()},
            failed_unresolvable={str(k): str(v) for k, v in dict(unresolvable).items()},
        )

    async def prioritize(
        self, pod: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]
    ) -> dict[str, int]:
        """``HTTPExtender.Prioritize``: host → score × weight × (100 / 10)."""
        answer = await self._post(self.config.prioritize_verb, self._args(pod, nodes))
        if not isinstance(answer, list):
            raise ExtenderError(f"extender {self.config.name}: prioritize answer is not a list")
        scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
        scores: dict[str, int] = {}
        for entry in answer:
            if not isinstance(entry, Mapping):
                continue
            host, score = _get(entry, "Host"), _get(entry, "Score")
            if isinstance(host, str) and isinstance(score, int):
                scores[host] = score * self.config.weight * scale
        return scores

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _pem(data: object) -> str:
    """A ``[]byte`` TLS field: base64 in JSON; PEM text is accepted as it is."""
    text = data.decode() if isinstance(data, bytes) else str(data)
    if "-----BEGIN" in text:
        return text
    return base64.b64decode(text).decode("ascii")
