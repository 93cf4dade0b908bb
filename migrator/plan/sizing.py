"""Default world size: the smallest device count that fits the model and splits the target batch.

Without `--devices` a plan takes the fewest devices at which some layout fits in memory (the planner's own
memory model, `estimate`) and divides the global batch (`--global-batch`: dp | batch, micro-batch | batch per
replica), not the whole cluster: a 3B model spread over 768 dies mostly waits in the pipeline bubble.
Sizes go in steps a cluster can be allocated in: powers of two inside a machine, then whole machines in
powers of two, then the whole cluster.
"""

from __future__ import annotations

from .clusters import Cluster


def candidate_sizes(cluster: Cluster) -> list[int]:
    total = int(cluster.need("devices"))
    node = int(cluster.figure("devices_per_node").value or 0) or None
    sizes, size = [], 1
    while size < min(node or total, total):  # inside one machine (or no machine size known): powers of two
        sizes.append(size)
        size *= 2
    if node:
        machines = 1
        while node * machines < total:
            sizes.append(node * machines)
            machines *= 2
    return [*sizes, total]


def reason(world: int, cluster: Cluster, global_batch: int, smaller: tuple[int, float | None] | None) -> str:
    """Why the default world is `world`: the size below it that failed, and how to ask for more."""
    total = int(cluster.need("devices"))
    head = (f"uses {world} of {total} devices: the smallest size (powers of two inside a machine, then whole "
            f"machines) at which a layout fits in memory and splits the global batch of {global_batch}")
    if smaller:
        size, need = smaller
        head += (f"; on {size} the smallest layout needs {need / 1e9:.1f} GB per device" if need is not None
                 else f"; no layout on {size} divides the model and the batch")
    return head + (f"; give --devices up to {total} to spread wider" if world < total else "")
