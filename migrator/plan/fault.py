"""Fault domain: job MTBF, devices stopped per failure, and the Young/Daly checkpoint interval.

Default failure rate: Meta's Llama 3 report (Dubey et al. 2024, "The Llama 3 Herd of Models", §3.3.4):
419 unexpected interruptions in a 54-day snapshot on 16,384 H100 GPUs, i.e. 419 / (16384 x 54 x 24)
= 1.97e-5 failures per device-hour (figures also reported at
https://direct.datacenterdynamics.com/en/news/meta-report-details-hundreds-of-gpu-and-hbm3-related-interruptions-to-llama-3-training-run).
Users pass their own (`--failure-rate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .clusters import Cluster
from .cost import Layout

LLAMA3_FAILURES_PER_DEVICE_HOUR = 419 / (16384 * 54 * 24)


@dataclass(frozen=True)
class FaultPlan:
    failure_rate: float          # failures per device-hour
    devices: int
    mtbf_h: float                # job mean time between failures
    blast_devices: int           # devices stopped (and restarted) by one failure
    blast_reason: str
    checkpoint_write_s: float | None
    interval_h: float | None     # Young/Daly: sqrt(2 C MTBF)
    missing: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def mtbf_hours(failure_rate: float, devices: int) -> float:
    """Independent device failures: the job fails at devices x rate; 1e-4 per card-hour on 1,000 cards is
    one failure every 10 h, on 10,000 cards every hour."""
    return 1.0 / (failure_rate * devices)


def young_daly_hours(checkpoint_write_s: float, mtbf_h: float) -> float:
    return math.sqrt(2 * (checkpoint_write_s / 3600.0) * mtbf_h)


def blast_radius(layout: Layout, cluster: Cluster) -> tuple[int, str]:
    domain = int(cluster.need("domain_size"))
    span = layout.tp * layout.cp * layout.ep
    world = layout.world
    if span > 1 and span <= domain:
        return min(domain, world), (f"the failed device's model-parallel group (TP x CP x EP, {span} devices) "
                                    f"lies inside one {domain}-device high-bandwidth domain, which stops as a unit")
    if span > domain:
        return span, (f"the model-parallel group (TP x CP x EP, {span} devices) spans domains: every domain "
                      "it touches stops")
    node = cluster.figure("devices_per_node").value
    return int(node or 1), "data/pipeline parallel only: the failed device's machine is replaced"


def plan_faults(layout: Layout, cluster: Cluster, state_bytes_per_device: float,
                failure_rate: float = LLAMA3_FAILURES_PER_DEVICE_HOUR,
                checkpoint_write_s: float | None = None) -> FaultPlan:
    devices = layout.world
    mtbf = mtbf_hours(failure_rate, devices)
    blast, reason = blast_radius(layout, cluster)
    missing = ""
    if checkpoint_write_s is None:
        bw = cluster.figure("storage_write_GBps").value
        if bw:  # every device writes its own shard in parallel
            checkpoint_write_s = state_bytes_per_device / (bw * 1e9)
        else:
            missing = (f"checkpoint interval needs the checkpoint write time: pass --checkpoint-seconds or set "
                       f"[tool.migrate.clusters.{cluster.name}] storage_write_GBps")
    interval = young_daly_hours(checkpoint_write_s, mtbf) if checkpoint_write_s else None
    return FaultPlan(failure_rate, devices, mtbf, blast, reason, checkpoint_write_s, interval, missing)
