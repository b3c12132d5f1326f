"""kube-scheduler's NodePorts filter: a pod's host ports must be free on the node.

``plugins/nodeports/node_ports.go`` and ``HostPortInfo`` (``framework/types.go``):

* the ports a pod wants are its containers' and its sidecars' (init containers with
  ``restartPolicy: Always``) ``ports`` with ``hostPort > 0`` (``GetHostPorts``); a pod with none
  skips the filter (PreFilter ``Skip``) — the fast path;
* a port is ``(hostIP, protocol, hostPort)``, an empty ``hostIP`` meaning ``0.0.0.0`` and an
  empty protocol ``TCP`` (``sanitize``);
* ``CheckConflict``: a wanted port on ``0.0.0.0`` conflicts with the same protocol and port on
  any IP; on a specific IP, with that IP or ``0.0.0.0``;
* a conflict rejects the node with ``node(s) didn't have free ports for the requested pod
  ports`` (``Unschedulable``: evicting the pod holding the port would free it). The pod's own
  ports are not checked against each other.

:class:`UsedPorts` is a node's ``UsedPorts``, kept as counts so that removing one of two pods
holding the same port leaves it in use.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from kubescale.objects.containers import Container
from kubescale.objects.pod import Pod
from kubescale.objects.views import spec_of

__all__ = ["BIND_ALL", "REASON_NODE_PORTS", "HostPort", "UsedPorts", "host_ports"]

REASON_NODE_PORTS: Final = "node(s) didn't have free ports for the requested pod ports"
BIND_ALL: Final = "0.0.0.0"  # DefaultBindAllHostIP
_DEFAULT_PROTOCOL: Final = "TCP"

HostPort = tuple[str, str, int]
"""``(hostIP, protocol, hostPort)``, sanitized."""


def _container_ports(container: Container) -> Iterable[HostPort]:
    for port in container.get("ports") or ():
        try:
            number = int(port.get("hostPort") or 0)
        except (TypeError, ValueError):
            continue
        if number <= 0:
            continue
        ip = str(port.get("hostIP") or "") or BIND_ALL
        protocol = str(port.get("protocol") or "") or _DEFAULT_PROTOCOL
        yield (ip, protocol, number)


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The host ports ``pod`` binds (``GetHostPorts``: containers, then sidecars)."""
    spec = spec_of(pod)
    found: list[HostPort] = []
    for container in spec.get("containers") or ():
        found.extend(_container_ports(container))
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == "Always":
            found.extend(_container_ports(container))
    return tuple(found)


class UsedPorts:
    """The host ports in use on one node: ``(protocol, port)`` → IP → how many pods hold it."""

    __slots__ = ("_used",)

    def __init__(self) -> None:
        self._used: dict[tuple[str, int], dict[str, int]] = {}

    def __bool__(self) -> bool:
        return bool(self._used)

    def copy(self) -> UsedPorts:
        clone = UsedPorts()
        clone._used = {key: dict(ips) for key, ips in self._used.items()}
        return clone

    def add(self, ports: Iterable[HostPort]) -> None:
        for ip, protocol, number in ports:
            ips = self._used.setdefault((protocol, number), {})
            ips[ip] = ips.get(ip, 0) + 1

    def remove(self, ports: Iterable[HostPort]) -> None:
        for ip, protocol, number in ports:
            ips = self._used.get((protocol, number))
            if ips is None or ip not in ips:
                continue
            if ips[ip] <= 1:
                del ips[ip]
                if not ips:
                    del self._used[(protocol, number)]
            else:
                ips[ip] -= 1

    def conflicts(self, wanted: Iterable[HostPort]) -> bool:
        """``fitsPorts`` negated: some wanted port is taken (``CheckConflict``)."""
        for ip, protocol, number in wanted:
            ips = self._used.get((protocol, number))
            if not ips:
                continue
            if ip == BIND_ALL or BIND_ALL in ips or ip in ips:
                return True
        return False
