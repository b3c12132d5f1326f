"""The pricing model the ``price`` expander and consolidation use (``cloudprovider.PricingModel``).

* A node's price is its group's ``price_per_hour`` (kubescale's annotation on the scalable
  resource) × hours; a group without a price is priced like upstream's GCE model prices an
  unknown machine type: ``cores × 0.033174 + memory GiB × 0.004446`` per hour.
* A pod's price is the GCE model's base price of its requests: cpu cores × 0.033174 + memory
  GiB × 0.004446 per hour (``gce_price_model.go``: ``cpuPricePerHour``,
  ``memoryPricePerHourPerGb``).
"""

from __future__ import annotations

from typing import Final

from kubescale.controllers.autoscaler.expander.expansion_option import regular_requests
from kubescale.objects.pod import Pod
from kubescale.scheduling.pod_resources import Amounts

__all__ = ["CPU_PRICE_PER_HOUR", "MEMORY_PRICE_PER_GIB_HOUR", "PricingModel"]

CPU_PRICE_PER_HOUR: Final = 0.033174
MEMORY_PRICE_PER_GIB_HOUR: Final = 0.004446
GIB: Final = 1024**3


class PricingModel:
    """Prices per hour of nodes (by group) and pods."""

    def node_price(self, *, price_per_hour: float | None, capacity: Amounts, hours: float) -> float:
        if price_per_hour is not None:
            return price_per_hour * hours
        return self.resources_price(capacity.get("cpu", 0), capacity.get("memory", 0), hours)

    def pod_price(self, pod: Pod, hours: float) -> float:
        cpu, memory = regular_requests(pod)
        return self.resources_price(cpu, memory, hours)

    @staticmethod
    def resources_price(milli_cpu: int, memory: int, hours: float) -> float:
        return (
            milli_cpu / 1000 * CPU_PRICE_PER_HOUR + memory / GIB * MEMORY_PRICE_PER_GIB_HOUR
        ) * hours
