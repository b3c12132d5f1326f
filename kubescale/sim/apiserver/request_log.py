"""Which requests the server answered: verb, resource, subresource, namespace and name.

What kube-apiserver's audit log and RBAC authorizer see of a request (``RequestInfo``), counted
per distinct request so the log stays as small as the set of distinct requests however long a
simulation runs. Tests read it to prove what a client did — one watch per collection, every
request allowed by the shipped RBAC rules, no rule unused.

Every request that reaches the server at all — discovery, unknown paths, refused ones — is
also counted by method and raw path (with its query string, as received):
:meth:`RequestLog.paths`. That is what proves a client never sent a path it should not have.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

__all__ = ["RequestLog", "RequestRecord"]


@dataclass(frozen=True, order=True)
class RequestRecord:
    """One distinct request, as the RBAC authorizer sees it."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    user: str = ""
    """The bearer token presented (the in-process server's notion of a user)."""


class RequestLog:
    """Distinct requests and how often each came (see the module docstring)."""

    def __init__(self) -> None:
        self._counts: Counter[RequestRecord] = Counter()
        self._paths: Counter[tuple[str, str]] = Counter()

    def record(self, record: RequestRecord) -> None:
        self._counts[record] += 1

    def record_path(self, method: str, raw_path: str) -> None:
        """Any request received: its method and raw path (query string included)."""
        self._paths[(method, raw_path)] += 1

    def paths(self) -> dict[tuple[str, str], int]:
        """``(method, raw path)`` of every request received, and how often each came."""
        return dict(self._paths)

    def counts(self) -> dict[RequestRecord, int]:
        return dict(self._counts)

    def count(
        self, *, verb: str | None = None, resource: str | None = None, subresource: str = ""
    ) -> int:
        """Requests with this verb and resource (``None``: any), and exactly ``subresource``."""
        return sum(
            n
            for r, n in self._counts.items()
            if (verb is None or r.verb == verb)
            and (resource is None or r.resource == resource)
            and r.subresource == subresource
        )

    def clear(self) -> None:
        self._counts.clear()
        self._paths.clear()
