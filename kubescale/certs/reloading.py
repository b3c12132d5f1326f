"""The serving TLS context for the webhook/extender listener, with certificate hot reload.

Why: serving certificates are rotated underneath a running process (cert-manager renews them,
kubelet swaps the Secret volume's ``..data`` symlink, or our own rotation rewrites the files).
Upstream VPA's ``KeypairReloader`` (``pkg/admission-controller/certs.go``) re-reads the pair on
change, keeps the old one if the new one does not load, and serves the newest through
``tls.Config.GetCertificate``. aiohttp has no built-in for this (aio-libs/aiohttp#10626), so this
module does the Python equivalent:

* The listening socket gets one *listener* context (:meth:`ServerTLS.listener_context`) whose
  ``sni_callback`` runs on every ClientHello (OpenSSL calls the servername callback with or
  without SNI; CPython passes ``None`` then) and points the connection at the *current* context
  (``ssl_object.context = current``). New handshakes therefore use the newest certificate and key;
  established connections keep the ones they were made with.
* :meth:`ServerTLS.reload_if_changed` polls: it hashes the certificate, key and client-CA bytes
  and, when they changed, builds a *fresh* :class:`ssl.SSLContext` (``load_cert_chain`` refuses a
  key that does not match) and swaps the reference. A new context that fails to build (corrupt
  file, key and certificate caught mid-rotation) is never swapped in: the old one keeps serving,
  a warning names the file and the reason, the failure is counted, and the next poll tries again.
* :meth:`ServerTLS.watch` is the polling loop, driven by an injected
  :class:`~kubescale.base.clock.Clock` so tests run it on virtual time.

Every context built carries the same protocol floor and client-certificate settings, because a
switched connection keeps some settings from the listener context (OpenSSL copies the verify
mode and protocol bounds when the connection is created) while taking the certificate, key and
trust store from the context it is switched to. Swapping therefore also rotates the client CA.

The files are small and read synchronously, in the event loop, once per poll.

Metrics (on the registry passed in): ``kubescale_certificate_reloads_total{result}`` counts every
attempt to build a context (the first :meth:`~ServerTLS.load` included) as ``success`` or
``failure``; ``kubescale_certificate_expiry_timestamp_seconds`` is the served leaf's
``notAfter`` in Unix seconds.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from prometheus_client import CollectorRegistry, Counter, Gauge

from kubescale.base.clock import Clock, sleep_or_stop
from kubescale.certs.authority import CertificateError, validate_key_pair

__all__ = ["ServerTLS"]

_LOWEST_ALLOWED_VERSION: Final = ssl.TLSVersion.TLSv1_2


@dataclass(frozen=True)
class _Loaded:
    """One successfully built context and what it was built from."""

    context: ssl.SSLContext
    certificate: x509.Certificate
    digest: bytes


class ServerTLS:
    """Serving certificate + key (and optionally a client CA) from files, reloaded on change.

    :param cert_file: PEM serving certificate, optionally followed by intermediates.
    :param key_file: PEM private key for ``cert_file``.
    :param client_ca_file: PEM CA certificate(s) that client certificates are verified against.
    :param require_client_cert: refuse clients without a certificate signed by
        ``client_ca_file`` (``CERT_REQUIRED``); otherwise client certificates are not requested
        (``CERT_NONE``). Needs ``client_ca_file``.
    :param optional_client_ca_file: PEM CA bundle of client certificates that are asked for but
        not required (``CERT_OPTIONAL``, unless ``require_client_cert``): a client may present
        none, one it presents must verify against this bundle (or ``client_ca_file``). The
        routes that need one check it themselves (:mod:`kubescale.certs.client_identity`).
    :param min_version: lowest TLS version accepted; never lower than TLS 1.2, whatever is asked.
    :param ciphers: OpenSSL cipher string for TLS 1.2 (TLS 1.3 suites are not configurable);
        ``None`` keeps OpenSSL's defaults.
    :param registry: where the reload counter and expiry gauge are registered.
    :param logger: defaults to this module's logger.
    """

    def __init__(
        self,
        *,
        cert_file: Path,
        key_file: Path,
        client_ca_file: Path | None = None,
        require_client_cert: bool = False,
        optional_client_ca_file: Path | None = None,
        min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2,
        ciphers: str | None = None,
        registry: CollectorRegistry,
        logger: logging.Logger | None = None,
    ) -> None:
        if require_client_cert and client_ca_file is None:
            raise ValueError("require_client_cert=True needs a client_ca_file to verify against")
        self._cert_file = cert_file
        self._key_file = key_file
        self._client_ca_file = client_ca_file
        self._require_client_cert = require_client_cert
        self._optional_client_ca_file = optional_client_ca_file
        self._min_version = _effective_min_version(min_version)
        if ciphers is not None:
            try:
                ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(ciphers)
            except ssl.SSLError:
                raise ValueError(f"no usable cipher in {ciphers!r}") from None
        self._ciphers = ciphers
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._current: _Loaded | None = None
        self._listener: ssl.SSLContext | None = None
        self._reloads = Counter(
            "kubescale_certificate_reloads",
            "Attempts to load the serving certificate and key, by result.",
            ["result"],
            registry=registry,
        )
        self._reload_success = self._reloads.labels(result="success")
        self._reload_failure = self._reloads.labels(result="failure")
        self._expiry = Gauge(
            "kubescale_certificate_expiry_timestamp_seconds",
            "notAfter of the serving certificate currently served, in Unix seconds.",
            registry=registry,
        )

    def load(self) -> None:
        """Load the files for the first time (or again, unconditionally).

        Raises :class:`~kubescale.certs.authority.CertificateError` naming the file if anything is
        wrong; the previously loaded context, if any, stays in place in that case.
        """
        try:
            self._swap_in()
        except CertificateError:
            self._reload_failure.inc()
            raise

    @property
    def loaded(self) -> bool:
        """Whether a context has been loaded successfully."""
        return self._current is not None

    @property
    def certificate(self) -> x509.Certificate:
        """The leaf certificate new connections are served."""
        return self._require_loaded().certificate

    def listener_context(self) -> ssl.SSLContext:
        """The context for the listening socket (e.g. aiohttp ``TCPSite(ssl_context=...)``).

        It carries the protocol floor and client-verification settings and switches every
        handshake to the newest loaded context. The same object is returned on every call: the
        context of the first successful load, with the switching ``sni_callback`` installed.
        """
        if self._listener is None:
            listener = self._require_loaded().context
            listener.sni_callback = self._on_client_hello
            self._listener = listener
        return self._listener

    def reload_if_changed(self) -> bool:
        """Swap in a freshly built context if the files changed since the last successful load.

        Returns ``True`` when a new context was swapped in. A failure to read or build is logged
        as a warning naming the file, counted, and retried on the next call; it never raises.
        """
        if self._current is None:
            raise RuntimeError("ServerTLS.load() must succeed before reload_if_changed()")
        try:
            if self._digest() == self._current.digest:
                return False
            self._swap_in()
        except CertificateError as exc:
            self._reload_failure.inc()
            self._logger.warning(
                "Not reloading the serving certificate, still serving serial %x: %s",
                self._current.certificate.serial_number,
                exc,
            )
            return False
        self._logger.info(
            "Reloaded the serving certificate from %s: serial %x, valid until %s",
            self._cert_file,
            self.certificate.serial_number,
            self.certificate.not_valid_after_utc.isoformat(),
        )
        return True

    async def watch(self, *, clock: Clock, interval: float, stop: asyncio.Event) -> None:
        """Call :meth:`reload_if_changed` every ``interval`` seconds of ``clock`` until ``stop``.

        Returns promptly once ``stop`` is set; never raises (an unexpected error is logged and
        counted as a failed reload); cancelling the task cancels its pending sleep.
        """
        if interval <= 0:
            raise ValueError(f"interval must be positive, got {interval}")
        while not stop.is_set():
            if await sleep_or_stop(clock, interval, stop):
                return
            try:
                self.reload_if_changed()
            except Exception:
                self._reload_failure.inc()
                self._logger.exception("Unexpected error while checking the serving certificate")

    def _on_client_hello(
        self, ssl_object: ssl.SSLObject, server_name: str | None, listener: ssl.SSLContext
    ) -> None:
        current = self._current
        if current is not None and ssl_object.context is not current.context:
            ssl_object.context = current.context

    def _require_loaded(self) -> _Loaded:
        if self._current is None:
            raise RuntimeError("ServerTLS.load() has not succeeded yet")
        return self._current

    def _swap_in(self) -> None:
        loaded = self._build()
        self._current = loaded
        self._reload_success.inc()
        self._expiry.set(loaded.certificate.not_valid_after_utc.timestamp())

    def _build(self) -> _Loaded:
        cert_pem = _read(self._cert_file, what="certificate")
        key_pem = _read(self._key_file, what="private key")
        client_ca_pem = self._read_client_ca()
        digest = _digest(cert_pem, key_pem, client_ca_pem)
        pair = validate_key_pair(
            cert_pem, key_pem, cert_source=str(self._cert_file), key_source=str(self._key_file)
        )
        context = self._build_context(client_ca_pem=client_ca_pem)
        try:
            context.load_cert_chain(self._cert_file, self._key_file)
        except (ssl.SSLError, OSError) as exc:
            raise CertificateError(
                f"{self._cert_file} / {self._key_file}: OpenSSL refused the pair: {exc}"
            ) from exc
        # load_cert_chain re-opened the files: make sure it saw the bytes that were validated.
        if self._digest() != digest:
            raise CertificateError(
                f"{self._cert_file}: files changed while being loaded (mid-rotation?)"
            )
        return _Loaded(context=context, certificate=pair.certificate, digest=digest)

    def _build_context(self, *, client_ca_pem: bytes | None) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = self._min_version
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
        if self._ciphers is not None:
            context.set_ciphers(self._ciphers)
        if client_ca_pem is not None:
            try:
                context.load_verify_locations(cadata=client_ca_pem.decode("ascii"))
            except (ssl.SSLError, UnicodeDecodeError) as exc:
                files = [f for f in (self._client_ca_file, self._optional_client_ca_file) if f]
                raise CertificateError(
                    f"{' / '.join(map(str, files))}: not a PEM CA certificate bundle: {exc}"
                ) from exc
        if self._require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
        elif self._optional_client_ca_file is not None:
            context.verify_mode = ssl.CERT_OPTIONAL
        else:
            context.verify_mode = ssl.CERT_NONE
        return context

    def _read_client_ca(self) -> bytes | None:
        parts: list[bytes] = []
        if self._client_ca_file is not None:
            parts.append(_read(self._client_ca_file, what="client CA"))
        if self._optional_client_ca_file is not None:
            parts.append(_read(self._optional_client_ca_file, what="extender client CA"))
        return b"\n".join(parts) if parts else None

    def _digest(self) -> bytes:
        return _digest(
            _read(self._cert_file, what="certificate"),
            _read(self._key_file, what="private key"),
            self._read_client_ca(),
        )


def _effective_min_version(requested: ssl.TLSVersion) -> ssl.TLSVersion:
    if requested is ssl.TLSVersion.MAXIMUM_SUPPORTED:
        return ssl.TLSVersion.TLSv1_3
    return max(requested, _LOWEST_ALLOWED_VERSION)


def _read(path: Path, *, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise CertificateError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from exc


def _digest(cert_pem: bytes, key_pem: bytes, client_ca_pem: bytes | None) -> bytes:
    hasher = hashlib.sha256()
    for part in (cert_pem, key_pem, client_ca_pem if client_ca_pem is not None else b""):
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.digest()
