"""A kubeconfig for the in-process API server: one cluster, one bearer-token user, one context.

The same file works for ``kubectl --kubeconfig`` and for ``kubernetes.aio.config.load_kube_config``.
Over HTTPS the cluster carries ``certificate-authority-data`` (the server's own CA); over plain
HTTP it carries nothing but the server URL.
"""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = ["DEFAULT_TOKEN", "NAME", "build_kubeconfig", "write_kubeconfig_file"]

NAME: Final = "kubescale"
DEFAULT_TOKEN: Final = "kubescale-apiserver-token"


def build_kubeconfig(
    *,
    server: str,
    ca_cert_pem: bytes | None,
    token: str = DEFAULT_TOKEN,
    namespace: str = "default",
) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_cert_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_cert_pem).decode("ascii")
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": [{"name": NAME, "cluster": cluster}],
        "users": [{"name": NAME, "user": {"token": token}}],
        "contexts": [
            {"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": namespace}}
        ],
        "current-context": NAME,
    }


def write_kubeconfig_file(path: Path, config: dict[str, Any]) -> None:
    """Write atomically (a reader never sees half a file), mode 0600 like kubectl's."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
