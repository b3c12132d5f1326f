"""Client-certificate authentication for one route: the scheduler extender's verbs.

Why (issue 27, item 11): the extender's filter is CPU work any client that reaches the TLS port
could request, with no authentication by default. kube-scheduler can present a client
certificate to an extender — its ``KubeSchedulerConfiguration.extenders[].tlsConfig`` has
``certFile``/``keyFile`` (or ``certData``/``keyData``) next to ``caFile``/``caData``
(``k8s.io/kube-scheduler/config/v1`` ``ExtenderTLSConfig``, turned into a ``rest.TLSClientConfig``
by ``pkg/scheduler/extender.go``'s ``makeTransport``). With ``--extender-client-ca-file`` the TLS
server asks every client for a certificate (``CERT_OPTIONAL``: kube-apiserver, which calls the
webhook on the same port and presents none by default, is still accepted; a certificate that is
presented must verify, or the handshake fails), and the extender's routes refuse a request
whose connection presented none, or one not issued by a CA in that bundle, with ``403``.

:class:`ClientCertificateCheck` is the route's half: the TLS handshake has verified the chain
(signature, validity dates) against every trusted CA; this checks that the leaf was issued
directly by one of the CAs of *this* bundle (the TLS trust store may also hold
``--client-ca-file``'s CA when ``--require-client-cert`` is on). Leaves signed through an
intermediate are not accepted by the route (kubeadm's and cert-manager's client CAs sign leaves
directly). The bundle is re-read when the file changes (``stat`` on each request, cheap); a
bundle that no longer parses keeps the last good one, with a warning.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from kubescale.certs.authority import CertificateError

__all__ = ["ClientCertificateCheck"]


class ClientCertificateCheck:
    """Accepts a peer certificate issued directly by a CA of ``ca_file`` (module docstring)."""

    def __init__(self, ca_file: Path, *, logger: logging.Logger | None = None) -> None:
        self.ca_file = ca_file
        self._log = logger if logger is not None else logging.getLogger(__name__)
        self._stamp: tuple[int, int] | None = None
        self._authorities: list[x509.Certificate] = []
        self._load()  # raises CertificateError naming the file: a bad flag at start

    def _file_stamp(self) -> tuple[int, int]:
        stat = self.ca_file.stat()
        return stat.st_mtime_ns, stat.st_size

    def _load(self) -> None:
        try:
            stamp = self._file_stamp()
            pem = self.ca_file.read_bytes()
        except OSError as exc:
            raise CertificateError(
                f"{self.ca_file}: cannot read the extender client CA: {exc.strerror or exc}"
            ) from exc
        try:
            authorities = x509.load_pem_x509_certificates(pem)
        except ValueError as exc:
            raise CertificateError(
                f"{self.ca_file}: not a PEM CA certificate bundle: {exc}"
            ) from exc
        self._authorities = authorities
        self._stamp = stamp

    def _refresh(self) -> None:
        try:
            if self._file_stamp() == self._stamp:
                return
            self._load()
        except (OSError, CertificateError) as exc:
            self._log.warning(
                "keeping the previous extender client CA bundle: %s", exc, extra={"fields": {}}
            )

    def refusal(self, peer_der: bytes | None) -> str | None:
        """``None`` when ``peer_der`` (the connection's verified leaf, DER) was issued by a CA
        of the bundle; else the reason, for the ``403`` answer."""
        if not peer_der:
            return (
                "client certificate required: the scheduler extender accepts only clients with "
                f"a certificate issued by the CA in --extender-client-ca-file ({self.ca_file})"
            )
        self._refresh()
        try:
            leaf = x509.load_der_x509_certificate(peer_der)
        except ValueError:
            return "client certificate could not be parsed"
        for authority in self._authorities:
            try:
                leaf.verify_directly_issued_by(authority)
            except (ValueError, TypeError, InvalidSignature):
                continue
            return None
        return (
            "client certificate not issued by a CA in --extender-client-ca-file "
            f"({self.ca_file}); subject {leaf.subject.rfc4514_string()}"
        )
