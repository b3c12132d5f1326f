"""Every test here runs its informers under the projection audit (issue 29): a read of a field
the projected cache would drop fails the test (``tests/kube/projection_audit.py``). Of the
workload controllers, the webhook reads only what the controller lookups read
(:data:`kubescale.kube.controller_lookups.LOOKUP_READS`: a webhook-only process caches no more
of them), so a read of any other field of theirs fails too; of VPAs and HPAs, what
:data:`~kubescale.controllers.vpa.admission.admission_caches.ADMISSION_READS` declares (their
TypedDicts' fields: a webhook-only process caches them projected)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubescale.controllers.vpa.admission.admission_caches import ADMISSION_READS
from kubescale.kube.controller_lookups import LOOKUP_READS
from tests.kube.projection_audit import DECLARED, ProjectionAudit, audit_projection

WEBHOOK_READS = {
    **DECLARED,
    **{kind: reads for (_, kind), reads in {**LOOKUP_READS, **ADMISSION_READS}.items()},
}
"""What a webhook-only process caches, by kind."""


@pytest.fixture(autouse=True)
def projection_audit(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProjectionAudit]:
    audit = audit_projection(monkeypatch)
    yield audit
    audit.check()
    dropped = sorted(".".join(path) for path in audit.dropped(WEBHOOK_READS))
    assert not dropped, f"reads of fields a webhook-only process drops: {dropped}"
