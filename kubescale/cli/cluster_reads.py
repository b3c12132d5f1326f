"""What the read-only commands (``kubescale report``, ``kubescale simulate --from-cluster``)
share: one way to connect to the cluster, to read the Prometheus bearer token, and to say in one
line why a read failed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Final

from kubescale.base.clock import Clock
from kubescale.controllers.vpa.recommender.prometheus_history_config import (
    read_bearer_token_file,
)
from kubescale.kube.client import ClientSettings, KubeClient, connect
from kubescale.kube.config_loading import ConfigError
from kubescale.kube.errors import KubeApiError, KubeError

__all__ = ["READ_ERRORS", "READ_SETTINGS", "connect_for_reads", "prometheus_token", "read_failure"]

READ_SETTINGS: Final = ClientSettings(request_timeout=30.0, connect_timeout=10.0, max_attempts=3)
"""A read-only command's client: 30 s per request, 10 s to connect, 3 attempts."""
READ_ERRORS: Final = (ConfigError, KubeError, OSError)
"""What the cluster reads raise for the user to see (:func:`read_failure` says it in a line)."""


async def connect_for_reads(args: argparse.Namespace, clock: Clock) -> KubeClient:
    """The client of ``--kubeconfig``/``--context`` (else ``$KUBECONFIG``, in-cluster,
    ``~/.kube/config``)."""
    return await connect(
        kubeconfig=Path(args.kubeconfig) if args.kubeconfig else None,
        context=args.context or None,
        clock=clock,
        settings=READ_SETTINGS,
    )


def prometheus_token(args: argparse.Namespace) -> str:
    """``--prometheus-bearer-token-file``'s token, ``""`` without one."""
    path: Path | None = args.prometheus_bearer_token_file
    return read_bearer_token_file(path) if path is not None else ""


def read_failure(err: ConfigError | KubeError | OSError) -> str:
    """One line for a failure of the cluster reads (one of :data:`READ_ERRORS`)."""
    if isinstance(err, KubeApiError):
        return f"the API server refused a read: {err}"
    if isinstance(err, KubeError):
        return f"cannot reach the API server: {err}"
    return str(err)
