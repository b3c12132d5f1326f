"""PodDisruptionBudgets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubescale.objects.pdb import PodDisruptionBudget
from tests.builders.meta import manifest, metadata, typed_builder


def pdb(
    *,
    name: str = "web",
    namespace: str | None = "default",
    uid: str | None = None,
    match_labels: Mapping[str, str] | None = None,
    min_available: int | str | None = None,
    max_unavailable: int | str | None = None,
    spec: Mapping[str, Any] | None = None,
    disruptions_allowed: int | None = None,
    status: Mapping[str, Any] | None = None,
    api_version: str | None = "policy/v1",
) -> dict[str, Any]:
    """A PDB: ``spec`` = ``minAvailable``/``maxUnavailable``, ``selector.matchLabels`` (each
    when given), then ``spec``'s further fields; ``disruptions_allowed`` (and ``status``) make
    a status."""
    body: dict[str, Any] = {}
    if min_available is not None:
        body["minAvailable"] = min_available
    if max_unavailable is not None:
        body["maxUnavailable"] = max_unavailable
    if match_labels is not None:
        body["selector"] = {"matchLabels": dict(match_labels)}
    body.update(spec or {})
    status_body: dict[str, Any] | None = None
    if disruptions_allowed is not None:
        status_body = {"disruptionsAllowed": disruptions_allowed}
    if status is not None:
        status_body = {**(status_body or {}), **status}
    meta = metadata(name=name, namespace=namespace, uid=uid)
    spec_body = body if body or spec is not None else None
    return manifest(api_version, "PodDisruptionBudget", meta, spec=spec_body, status=status_body)


typed_pdb = typed_builder(pdb, PodDisruptionBudget)
"""``pdb()`` typed as :class:`kubescale.objects.pdb.PodDisruptionBudget`."""
