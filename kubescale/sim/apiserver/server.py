"""ApiServer: the in-process Kubernetes API server, over HTTPS (own CA) and plain HTTP.

The real ``kubernetes.aio`` client and kubectl talk to it unchanged. It serves every kind of
``served_kinds.SERVED`` plus the kinds of registered CRDs (preloaded from
``manifests/crds`` by default), the metrics APIs, discovery and ``/version``; see the sibling
modules for the semantics of each part. At start it creates the namespaces every cluster has:
default, kube-system, kube-public and kube-node-lease.

Reproducibility: ``ApiServer(seed=N)`` seeds the random sources (uids and ``generateName``
suffixes in the store; watch-timeout jitter in the REST layer — two separate streams, so the
real-time moments at which clients open watches cannot shift the uids) so that a simulation run
with a fixed seed produces the same objects. In-process writers that must see the admission
chain (the simulated cluster's controllers creating pods) use :meth:`ApiServer.create_admitted`.

Time: object timestamps come from the injected clock; bookmarks, watch timeouts and fault
delays use real (event-loop) time; the serving certificate is made against the machine's
clock because TLS peers verify it against theirs.

Controllers that Kubernetes runs next to the API server (garbage collector, disruption
controller, kubelet...) are not here: a PodDisruptionBudget's status is what its writer last
set, pods on nodes wait for a ``gracePeriodSeconds=0`` delete after a graceful delete, and
owner references are not followed.
"""

from __future__ import annotations

import random
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from aiohttp import web

from kubescale.base.clock import Clock, RealClock
from kubescale.base.logs import component_logger
from kubescale.certs.authority import KeyPair, generate_ca, issue_serving_certificate
from kubescale.kube.resources import HORIZONTAL_POD_AUTOSCALERS, PODS

from . import discovery, errors, openapi
from .admission import AdmissionChain
from .crds import CrdController, load_crd_files
from .faults import FaultInjector
from .hpa_validation import hpa_causes
from .http_bodies import error_response, json_response
from .kubeconfig import DEFAULT_TOKEN, build_kubeconfig, write_kubeconfig_file
from .metrics_apis import MetricsValues, add_metrics_routes, metrics_discovery_groups
from .registry import ResourceRegistry
from .request_log import RequestLog
from .rest import RestHandlers
from .store import ObjectStore
from .writes import ApiContext, create_object

__all__ = ["DEFAULT_CRD_DIR", "INITIAL_NAMESPACES", "ApiServer"]

log = component_logger("apiserver")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

DEFAULT_CRD_DIR: Final = Path(str(resources.files("kubescale") / "crds"))
"""kubescale's CRDs, shipped in the package (``manifests/crds`` in a checkout)."""
INITIAL_NAMESPACES: Final = ("default", "kube-system", "kube-public", "kube-node-lease")
MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
"""kube-apiserver's ``--max-request-bytes``-style limit on request bodies (3 MiB)."""
_SHUTDOWN_TIMEOUT: Final = 2.0


def _not_found() -> web.Response:
    return error_response(
        errors.status_error(code=404, message="the server could not find the requested resource")
    )


class ApiServer:
    """An API server on 127.0.0.1; use as ``async with ApiServer() as server: ...``."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        history_window: int = 1000,
        bookmark_interval: float = 60.0,
        crd_dirs: Sequence[Path] | None = None,
        seed: int | None = None,
    ) -> None:
        self.clock: Clock = clock if clock is not None else RealClock()
        self.seed = seed
        self._rng = _seeded_random(seed, "rest")
        self.registry = ResourceRegistry()
        self.store = ObjectStore(
            clock=self.clock,
            registry=self.registry,
            history_window=history_window,
            rng=_seeded_random(seed, "store"),
        )
        self.faults = FaultInjector(store=self.store)
        self.metrics = MetricsValues(clock=self.clock)
        self.metrics.pods_source = lambda namespace: self.store.list(PODS, namespace=namespace)
        self._services: dict[tuple[str, str, int], tuple[str, int]] = {}
        self.admission = AdmissionChain(resolver=self._resolve_service)
        self.context = ApiContext(
            store=self.store, admission=self.admission, bookmark_interval=bookmark_interval
        )
        self._crds = CrdController(self.store)
        self.hpa_scale_to_zero = False
        """kube-apiserver's ``HPAScaleToZero`` gate (alpha, off): ``minReplicas: 0`` allowed."""
        self.store.validators[HORIZONTAL_POD_AUTOSCALERS.key] = self._validate_hpa
        for name in INITIAL_NAMESPACES:
            self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        dirs = list(crd_dirs) if crd_dirs is not None else [DEFAULT_CRD_DIR]
        self.loaded_crds = load_crd_files(self.store, dirs)
        self._runner: web.AppRunner | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.https_url = ""
        self.http_url = ""
        self.ca_cert_pem = b""
        self._ca: KeyPair | None = None

    # ------------------------------------------------------------------------- lifecycle

    @property
    def requests(self) -> RequestLog:
        """Every resource request answered, counted (:mod:`.request_log`)."""
        return self.context.requests

    @property
    def tokens(self) -> list[str]:
        """Bearer tokens presented so far (any is accepted)."""
        return self.context.tokens

    def register_service(
        self, *, namespace: str, name: str, port: int = 443, address: tuple[str, int]
    ) -> None:
        """Where a webhook's ``clientConfig.service`` is really listening."""
        self._services[(namespace, name, port)] = address

    async def create_admitted(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj`` in-process through the path a REST POST takes, admission included.

        The type comes from ``apiVersion``/``kind`` and the namespace from
        ``metadata.namespace``; mutating then validating webhooks run exactly as for a POST
        (so e.g. a VPA webhook sets a pod's requests). A denial, like any other refusal of the
        write, raises :class:`~.errors.ApiError`. Returns the stored object (a copy).
        """
        rt = self.store.type_of(obj)
        namespace = (obj.get("metadata") or {}).get("namespace") if rt.namespaced else None
        return await create_object(
            self.context,
            rt,
            obj,
            namespace=str(namespace) if namespace else None,
            dry_run=False,
        )

    def bookmark_watches(self) -> int:
        """Send a BOOKMARK at the current resourceVersion on every open watch allowing them.

        Each goes out behind the events already queued on its watch, so an informer that has
        processed it reflects the store as of now (:meth:`kubescale.kube.informer.Informer.
        wait_for_resource_version`); the simulator does this before running kubescale's loops.
        Returns the number of open watches reached.
        """
        return self.store.events.bookmark(self.store.resource_version)

    def _validate_hpa(self, hpa: dict[str, Any]) -> None:
        """``ValidateHorizontalPodAutoscaler`` (:mod:`.hpa_validation`): 422 Invalid."""
        causes = hpa_causes(hpa, scale_to_zero=self.hpa_scale_to_zero)
        if causes:
            name = str((hpa.get("metadata") or {}).get("name") or "")
            raise errors.invalid(HORIZONTAL_POD_AUTOSCALERS, name, causes)

    def _resolve_service(self, namespace: str, name: str, port: int) -> tuple[str, int] | None:
        return self._services.get((namespace, name, port))

    def _tls_context(self) -> ssl.SSLContext:
        now = RealClock().now()  # peers verify the certificate against their own clocks
        self._ca = generate_ca(
            common_name="kubescale-apiserver-ca", now=now, days=3650, key_type="ecdsa"
        )
        serving = issue_serving_certificate(
            ca=self._ca, names=["localhost", "127.0.0.1"], now=now, days=365, key_type="ecdsa"
        )
        self.ca_cert_pem = self._ca.cert_pem
        self._tmp = tempfile.TemporaryDirectory(prefix="kubescale-apiserver-")
        cert_file = Path(self._tmp.name) / "serverCert.pem"
        key_file = Path(self._tmp.name) / "serverKey.pem"
        cert_file.write_bytes(serving.cert_pem + self._ca.cert_pem)
        key_file.write_bytes(serving.key_pem)
        key_file.chmod(0o600)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(cert_file, key_file)
        return context

    def build_app(self) -> web.Application:
        """The aiohttp application (routes only; :meth:`start` serves it)."""
        app = web.Application(client_max_size=MAX_REQUEST_BYTES, middlewares=[self._authenticate])
        handlers = RestHandlers(ctx=self.context, faults=self.faults, rng=self._rng)
        add_metrics_routes(app, self.metrics, self.context.requests, self.faults)
        router = app.router
        for probe in ("/healthz", "/livez", "/readyz"):
            router.add_get(probe, self._ok)
        # Discovery paths answer with and without a trailing slash (the generated client
        # asks for "/api/v1/", kubectl for "/api/v1").
        for path, handler in (
            ("/version", self._version),
            ("/api", self._api),
            ("/api/v1", self._core_resources),
            ("/apis", self._apis),
            ("/apis/{group}", self._group),
            ("/apis/{group}/{version}", self._group_resources),
        ):
            router.add_get(path, handler)
            router.add_get(path + "/", handler)
        router.add_route("*", "/api/v1/{tail:.+}", handlers.core)
        router.add_route("*", "/apis/{group}/{version}/{tail:.+}", handlers.grouped)
        router.add_get("/openapi/v2", self._openapi_v2)
        router.add_get("/openapi/v3", self._openapi_index)
        router.add_get("/openapi/v3/api/{version}", self._openapi_core)
        router.add_get("/openapi/v3/apis/{group}/{version}", self._openapi_group)
        router.add_route("*", "/{tail:.*}", self._fallback)
        return app

    async def start(self, *, host: str = "127.0.0.1", port: int = 0, http_port: int = 0) -> None:
        if self._runner is not None:
            raise RuntimeError("the API server is already running")
        tls = self._tls_context()
        runner = web.AppRunner(
            self.build_app(), access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT
        )
        await runner.setup()
        https_site = web.TCPSite(runner, host, port, ssl_context=tls)
        await https_site.start()
        https_port = _last_port(runner)
        http_site = web.TCPSite(runner, host, http_port)
        await http_site.start()
        plain_port = _last_port(runner)
        self._runner = runner
        self.https_url = f"https://{host}:{https_port}"
        self.http_url = f"http://{host}:{plain_port}"
        log.info(
            "API server listening",
            extra={"fields": {"https": self.https_url, "http": self.http_url}},
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            self.store.events.close_all()
            self.faults.release()  # held requests end now, not at the shutdown timeout
            await runner.cleanup()
        await self.admission.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    async def __aenter__(self) -> ApiServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------------ kubeconfig

    def kubeconfig(self, *, tls: bool = True) -> dict[str, Any]:
        if not self.https_url:
            raise RuntimeError("start the API server before asking for its kubeconfig")
        if tls:
            return build_kubeconfig(server=self.https_url, ca_cert_pem=self.ca_cert_pem)
        return build_kubeconfig(server=self.http_url, ca_cert_pem=None)

    def write_kubeconfig(self, path: Path, *, tls: bool = True, token: str | None = None) -> None:
        """A kubeconfig for this server; ``token`` gives the client its own bearer token (the
        request log then tells its requests apart)."""
        config = self.kubeconfig(tls=tls)
        if token is not None:
            for user in config.get("users") or []:
                user.setdefault("user", {})["token"] = token
        write_kubeconfig_file(path, config)

    @property
    def token(self) -> str:
        """The bearer token the kubeconfig hands out."""
        return DEFAULT_TOKEN

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Any bearer token is accepted (and recorded once); anonymous requests too. No
        authorization."""
        self.context.requests.record_path(request.method, request.raw_path)
        header = request.headers.get("Authorization", "")
        if header[:7].lower() == "bearer ":
            token = header[7:].strip()
            if token not in self.context.tokens:
                self.context.tokens.append(token)
        return await handler(request)

    # ------------------------------------------------------------------------- discovery

    async def _version(self, _: web.Request) -> web.Response:
        return json_response(dict(discovery.version_info()))

    async def _ok(self, _: web.Request) -> web.Response:
        return web.Response(text="ok", content_type="text/plain")

    async def _api(self, request: web.Request) -> web.Response:
        return json_response(discovery.api_versions(request.host))

    async def _core_resources(self, _: web.Request) -> web.Response:
        document = discovery.api_resource_list(self.registry, "", "v1")
        return json_response(document) if document is not None else _not_found()

    async def _apis(self, _: web.Request) -> web.Response:
        return json_response(discovery.api_group_list(self.registry, metrics_discovery_groups()))

    async def _group(self, request: web.Request) -> web.Response:
        document = discovery.api_group(self.registry, request.match_info["group"])
        return json_response(document) if document is not None else _not_found()

    async def _group_resources(self, request: web.Request) -> web.Response:
        info = request.match_info
        document = discovery.api_resource_list(self.registry, info["group"], info["version"])
        return json_response(document) if document is not None else _not_found()

    async def _openapi_v2(self, request: web.Request) -> web.Response:
        if "protobuf" in request.headers.get("Accept", ""):
            # kube-openapi answers the protobuf form as octet-stream: the Accept type's "@" is
            # not a valid media type for Go's mime.ParseMediaType, which client-go runs on it.
            return web.Response(
                body=openapi.openapi_v2_protobuf(), content_type="application/octet-stream"
            )
        return json_response(openapi.openapi_v2_json())

    async def _openapi_index(self, _: web.Request) -> web.Response:
        return json_response(openapi.openapi_index(self.registry))

    async def _openapi_core(self, request: web.Request) -> web.Response:
        version = request.match_info["version"]
        document = openapi.group_version_document(self.registry, "", version)
        return json_response(document) if document is not None else _not_found()

    async def _openapi_group(self, request: web.Request) -> web.Response:
        info = request.match_info
        document = openapi.group_version_document(self.registry, info["group"], info["version"])
        return json_response(document) if document is not None else _not_found()

    async def _fallback(self, _: web.Request) -> web.Response:
        return _not_found()


def _seeded_random(seed: int | None, stream: str) -> random.Random:
    """A ``random.Random`` for one named stream: reproducible from ``seed``, else OS-seeded."""
    return random.Random(f"{stream}:{seed}") if seed is not None else random.Random()


def _last_port(runner: web.AppRunner) -> int:
    address = runner.addresses[-1]
    return int(address[1])
