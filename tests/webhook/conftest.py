"""Every test here runs its informers under the projection audit (issue 29): a read of a field
the projected cache would drop fails the test (``tests/kube/projection_audit.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kube.projection_audit import ProjectionAudit, audit_projection


@pytest.fixture(autouse=True)
def projection_audit(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProjectionAudit]:
    audit = audit_projection(monkeypatch)
    yield audit
    audit.check()
