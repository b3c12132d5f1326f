"""Self-managed serving certificates: one Secret, created by whichever replica comes first.

``--tls-secret-name`` (empty: off) makes kubescale its own certificate authority, as upstream
VPA's admission controller is installed with generated certificates (``gencerts.sh`` writes
``caCert.pem``, ``caKey.pem``, ``serverCert.pem``, ``serverKey.pem`` into Secret
``vpa-tls-certs``; kubernetes/autoscaler#3816 asks for the generation to happen in the
process), so ``helm install`` with default values needs nothing made by hand.

The Secret is the one source of truth; no replica keeps a certificate of its own:

* At start, every replica reads the Secret. When it does not exist, the replica generates a CA
  and a serving certificate and *creates* the Secret; a create that loses the race (409
  AlreadyExists) is followed by a read, so all replicas serve the winner's certificate.
* Every ``--cert-reload-interval`` each replica reads the Secret again (:meth:`run_once`) and
  writes its content to the ``--tls-cert-file``/``--tls-private-key``/``--client-ca-file``
  paths; the certificate watcher (``--reload-cert``) swaps the listener's context, and webhook
  self-registration re-publishes ``caBundle`` from ``--client-ca-file``. The scheduler
  extender is served by the same listener, so its certificate and CA follow too.
* Rotation before expiry: when less than a third of a certificate's lifetime is left
  (cert-manager's default ``renewBefore``, 2/3 through the duration), the first replica to
  notice replaces it with an *update* carrying the ``resourceVersion`` it read; a concurrent
  rotation gets 409 Conflict, reads the Secret and serves the winner's. A serving certificate
  is re-issued by the same CA (``caBundle`` unchanged); a CA near its end is replaced and the
  old CA stays in ``caCert.pem`` after the new one until it expires, so a caller still holding
  the old bundle keeps verifying during the change.
* A write whose outcome is unknown (timeout, 5xx) is not repeated blindly: the Secret is read
  again and what it holds decides.

:func:`plan` is the pure decision; :class:`SelfManagedTLS` does the reads and writes.
"""

from __future__ import annotations

import base64
import binascii
import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding

from kubescale.base.clock import Clock
from kubescale.certs.authority import (
    CA_CERT_FILE,
    CA_KEY_FILE,
    SERVER_CERT_FILE,
    SERVER_KEY_FILE,
    CertificateError,
    KeyPair,
    generate_ca,
    issue_serving_certificate,
    validate_key_pair,
    write_atomically,
)
from kubescale.kube.client import KubeClient
from kubescale.kube.errors import KubeApiError, KubeError
from kubescale.kube.resources import SECRETS
from kubescale.objects.views import Meta

__all__ = [
    "CA_DAYS",
    "SERVING_DAYS",
    "Action",
    "SecretContent",
    "SelfManagedTLS",
    "TLSSecretError",
    "plan",
    "renew_at",
]

CA_DAYS: Final = 3650
"""Validity of a generated CA (10 years; upstream's gencerts.sh makes a 100000-day one)."""
SERVING_DAYS: Final = 365
"""Validity of a generated serving certificate."""
_MAX_ATTEMPTS: Final = 5
_CERT_MODE: Final = 0o644
_KEY_MODE: Final = 0o600
_KEYS: Final = (CA_CERT_FILE, CA_KEY_FILE, SERVER_CERT_FILE, SERVER_KEY_FILE)


class TLSSecretError(Exception):
    """The Secret could not be read or written after several attempts."""


class Action(enum.Enum):
    USE = "use"
    """The Secret holds a valid CA and serving certificate, neither due for renewal."""
    CREATE = "create"
    """No Secret: generate a CA and a serving certificate."""
    REPLACE = "replace"
    """The Secret is unusable (a key missing, not PEM, pair mismatch): generate both anew."""
    RENEW_SERVING = "renew-serving"
    """Re-issue the serving certificate with the same CA."""
    RENEW_CA = "renew-ca"
    """Generate a new CA (the old one kept in the bundle) and a serving certificate."""


@dataclass(frozen=True)
class SecretContent:
    """The four PEM blobs of the Secret (``caCert.pem`` may hold several CAs, newest first)."""

    ca_cert: bytes
    ca_key: bytes
    server_cert: bytes
    server_key: bytes

    def data(self) -> dict[str, str]:
        """The Secret's ``data`` (base64 values)."""
        blobs = (self.ca_cert, self.ca_key, self.server_cert, self.server_key)
        return {k: base64.b64encode(v).decode("ascii") for k, v in zip(_KEYS, blobs, strict=True)}

    @classmethod
    def from_secret(cls, secret: Mapping[str, Any]) -> SecretContent:
        """Decode a Secret; :class:`CertificateError` names the missing or broken key."""
        data = secret.get("data") or {}
        blobs: list[bytes] = []
        for key in _KEYS:
            raw = data.get(key)
            if not isinstance(raw, str) or not raw:
                raise CertificateError(f"data[{key!r}] is missing")
            try:
                blobs.append(base64.b64decode(raw, validate=True))
            except (binascii.Error, ValueError):
                raise CertificateError(f"data[{key!r}] is not base64") from None
        return cls(*blobs)


def renew_at(certificate: x509.Certificate) -> datetime:
    """When a certificate is due: two thirds through its validity (cert-manager's default
    ``renewBefore`` is a third of the duration). A 365-day certificate issued at T-5 min (the
    clock-skew allowance) is due at T-5min + 2/3 x (365 d + 5 min) = about T + 243 d 8 h."""
    start = certificate.not_valid_before_utc
    lifetime = certificate.not_valid_after_utc - start
    return start + lifetime * 2 / 3


def plan(content: SecretContent | None, now: datetime) -> Action:
    """What to do with the Secret's content at ``now`` (pure)."""
    if content is None:
        return Action.CREATE
    try:
        ca = validate_key_pair(content.ca_cert, content.ca_key, cert_source=CA_CERT_FILE)
        serving = validate_key_pair(
            content.server_cert, content.server_key, cert_source=SERVER_CERT_FILE
        )
        serving.certificate.verify_directly_issued_by(ca.certificate)
    except (CertificateError, ValueError, TypeError, InvalidSignature):
        return Action.REPLACE
    if now >= renew_at(ca.certificate):
        return Action.RENEW_CA
    if now >= renew_at(serving.certificate):
        return Action.RENEW_SERVING
    return Action.USE


def _still_valid_cas(bundle: bytes, now: datetime) -> bytes:
    """The CAs of a bundle that have not expired at ``now``, as PEM."""
    try:
        cas = x509.load_pem_x509_certificates(bundle)
    except ValueError:
        return b""
    return b"".join(
        ca.public_bytes(encoding=Encoding.PEM) for ca in cas if ca.not_valid_after_utc > now
    )


def generate(
    action: Action, content: SecretContent | None, *, names: Sequence[str], now: datetime
) -> SecretContent:
    """The content to write for ``action`` (not ``USE``)."""
    if action is Action.RENEW_SERVING and content is not None:
        ca = KeyPair(cert_pem=_first_pem(content.ca_cert), key_pem=content.ca_key)
        serving = issue_serving_certificate(
            ca=ca, names=names, now=now, days=SERVING_DAYS, key_type="ecdsa"
        )
        return SecretContent(content.ca_cert, content.ca_key, serving.cert_pem, serving.key_pem)
    ca = generate_ca(common_name="kubescale-ca", now=now, days=CA_DAYS, key_type="ecdsa")
    serving = issue_serving_certificate(
        ca=ca, names=names, now=now, days=SERVING_DAYS, key_type="ecdsa"
    )
    bundle = ca.cert_pem
    if action is Action.RENEW_CA and content is not None:
        bundle += _still_valid_cas(content.ca_cert, now)
    return SecretContent(bundle, ca.key_pem, serving.cert_pem, serving.key_pem)


class SelfManagedTLS:
    """Keeps the serving files equal to the Secret ``namespace/name``, creating and renewing it.

    :param names: the serving certificate's DNS names (the webhook Service's).
    """

    def __init__(
        self,
        *,
        client: KubeClient,
        clock: Clock,
        namespace: str,
        name: str,
        names: Sequence[str],
        cert_file: Path,
        key_file: Path,
        ca_file: Path,
        logger: logging.Logger | None = None,
    ) -> None:
        self._client = client
        self._clock = clock
        self._namespace = namespace
        self._name = name
        self._names = list(names)
        self._cert_file = cert_file
        self._key_file = key_file
        self._ca_file = ca_file
        self._logger = logger if logger is not None else logging.getLogger(__name__)
        self._written: SecretContent | None = None

    @property
    def name(self) -> str:
        return "tls-secret"

    @property
    def _ref(self) -> str:
        return f"{self._namespace}/{self._name}"

    @property
    def content(self) -> SecretContent | None:
        """What was last written to the files."""
        return self._written

    async def run_once(self, now: datetime) -> None:
        await self.sync()

    async def sync(self) -> SecretContent:
        """Read (create, renew) the Secret and write its content to the files."""
        last_error: BaseException | None = None
        for _ in range(_MAX_ATTEMPTS):
            secret = await self._read()
            content: SecretContent | None = None
            if secret is not None:
                try:
                    content = SecretContent.from_secret(secret)
                except CertificateError as exc:
                    self._logger.warning(
                        "Secret %s/%s is unusable, replacing it: %s",
                        self._namespace,
                        self._name,
                        exc,
                    )
            now = self._clock.now()
            action = plan(content, now) if secret is None or content is not None else Action.REPLACE
            if action is Action.USE:
                assert content is not None
                self._write_files(content)
                return content
            fresh = generate(action, content, names=self._names, now=now)
            try:
                if secret is None:
                    await self._client.create(
                        SECRETS, self._object(fresh), namespace=self._namespace
                    )
                else:
                    body = self._object(fresh, resource_version=Meta(secret).resource_version)
                    await self._client.update(SECRETS, body)
            except KubeApiError as exc:
                if exc.code not in (409,) and exc.code < 500:
                    raise TLSSecretError(
                        f"cannot write Secret {self._namespace}/{self._name}: {exc}"
                    ) from exc
                # 409: another replica won (AlreadyExists on create, Conflict on update); 5xx:
                # outcome unknown. Either way the Secret as it is now decides.
                last_error = exc
                continue
            except KubeError as exc:
                last_error = exc  # no answer: maybe written; read again
                continue
            self._logger.info(
                "Secret %s/%s: %s (serving certificate valid until %s)",
                self._namespace,
                self._name,
                action.value,
                x509.load_pem_x509_certificate(fresh.server_cert).not_valid_after_utc.isoformat(),
            )
            self._write_files(fresh)
            return fresh
        raise TLSSecretError(
            f"Secret {self._namespace}/{self._name}: no stable content after "
            f"{_MAX_ATTEMPTS} attempts: {last_error}"
        )

    async def _read(self) -> dict[str, Any] | None:
        try:
            return await self._client.get(SECRETS, self._name, namespace=self._namespace)
        except KubeApiError as exc:
            if exc.code == 404:
                return None
            raise TLSSecretError(
                f"cannot read Secret {self._namespace}/{self._name}: {exc}"
            ) from exc
        except KubeError as exc:
            raise TLSSecretError(
                f"cannot read Secret {self._namespace}/{self._name}: {exc}"
            ) from exc

    def _object(self, content: SecretContent, *, resource_version: str = "") -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "name": self._name,
            "namespace": self._namespace,
            "labels": {"app.kubernetes.io/name": "kubescale"},
        }
        if resource_version:  # an update replaces the version read
            metadata["resourceVersion"] = resource_version
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": "Opaque",
            "data": content.data(),
        }

    def _write_files(self, content: SecretContent) -> None:
        if content == self._written:
            return
        # The CA first (self-registration publishes it), then key, then certificate: the
        # watcher retries a key that does not match the certificate yet.
        for path in (self._ca_file, self._key_file, self._cert_file):
            path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self._ca_file, content.ca_cert, mode=_CERT_MODE)
        write_atomically(self._key_file, content.server_key, mode=_KEY_MODE)
        write_atomically(self._cert_file, content.server_cert, mode=_CERT_MODE)
        self._written = content


def _first_pem(bundle: bytes) -> bytes:
    return x509.load_pem_x509_certificates(bundle)[0].public_bytes(encoding=Encoding.PEM)
