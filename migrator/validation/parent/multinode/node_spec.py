"""Which node of a multi-node ``migrate validate`` this process is: from ``--nnodes/--node-rank/
--rdzv-endpoint``, or read from the launcher that started it (torchrun, Slurm ``srun``). No torch here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DEFAULT_PORT = 29400  # torchrun's own default c10d port
PORT_ENV = "MIGRATE_RDZV_PORT"  # the port our rendezvous uses when a launcher started us


class NodeSpecError(ValueError):
    """Flags or launcher environment that name no valid node (exit 2)."""


@dataclass(frozen=True)
class NodeSpec:
    nnodes: int
    node_rank: int
    endpoint: str | None  # HOST:PORT of node 0's rendezvous store; None on one node
    source: str = "flags"  # "flags", "torchrun" or "srun"

    @property
    def host(self) -> str:
        return split_endpoint(self.endpoint or "")[0]

    @property
    def port(self) -> int:
        return split_endpoint(self.endpoint or "")[1]


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) as (host, port); a clear error for anything else."""
    match = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([A-Za-z0-9_.-]+):(\d{1,5})", endpoint.strip())
    if match is None:
        raise NodeSpecError(f"--rdzv-endpoint {endpoint!r}: expected HOST:PORT (e.g. node0:29400)")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if not 0 < port < 65536:
        raise NodeSpecError(f"--rdzv-endpoint {endpoint!r}: port {port} is not between 1 and 65535")
    return host, port


def from_flags(nnodes: int, node_rank: int, endpoint: str | None) -> NodeSpec:
    """The node the flags name; exit-2 errors for a rank out of range or a missing/malformed endpoint."""
    if nnodes < 1:
        raise NodeSpecError(f"--nnodes {nnodes}: must be at least 1")
    if not 0 <= node_rank < nnodes:
        raise NodeSpecError(f"--node-rank {node_rank} is out of range for --nnodes {nnodes} (0..{nnodes - 1})")
    if nnodes > 1 and not endpoint:
        raise NodeSpecError("--nnodes > 1 needs --rdzv-endpoint HOST:PORT (node 0's address and a free port)")
    if endpoint:
        split_endpoint(endpoint)
    return NodeSpec(nnodes, node_rank, endpoint)


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list (``gpu[03-05,07],cpu1`` -> ``gpu03``)."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if match is None or not match.group(1):
        raise NodeSpecError(f"SLURM node list {nodelist!r}: no host in it")
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    return prefix + re.split(r"[-,]", ranges)[0]


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        raise NodeSpecError(f"{name}={env.get(name)!r}: expected an integer") from None


def _port(env: Mapping[str, str], fallback: int) -> int:
    return _int(env, PORT_ENV) if env.get(PORT_ENV) else fallback


def _from_torchrun(env: Mapping[str, str]) -> NodeSpec | None:
    if "GROUP_RANK" not in env or "LOCAL_WORLD_SIZE" not in env or "MASTER_ADDR" not in env:
        return None
    per_node = _int(env, "LOCAL_WORLD_SIZE")
    if per_node != 1 or _int(env, "LOCAL_RANK") != 0:
        raise NodeSpecError(f"started by torchrun with {per_node} process(es) per node: run one migrate validate "
                            "per node (torchrun --nproc-per-node 1 ...); it starts the ranks (--nproc-per-node) itself")
    nnodes = _int(env, "WORLD_SIZE")
    if nnodes == 1:
        return None
    # torchrun's own store holds MASTER_PORT while we run: ours takes the next port unless told
    endpoint = f"{env['MASTER_ADDR']}:{_port(env, _int(env, 'MASTER_PORT') + 1)}"
    return NodeSpec(nnodes, _int(env, "GROUP_RANK"), endpoint, "torchrun")


def _from_srun(env: Mapping[str, str]) -> NodeSpec | None:
    if "SLURM_NODEID" not in env or "SLURM_NNODES" not in env or "SLURM_STEP_ID" not in env:
        return None  # an allocation's shell (salloc/sbatch) is no srun step
    nnodes = _int(env, "SLURM_NNODES")
    if nnodes == 1:
        return None
    tasks = env.get("SLURM_STEP_TASKS_PER_NODE", env.get("SLURM_TASKS_PER_NODE", "1"))
    if _int(env, "SLURM_LOCALID") != 0 or not tasks.startswith("1(") and tasks != "1":
        raise NodeSpecError(f"started by srun with tasks per node {tasks!r}: run one migrate validate per node "
                            "(srun --ntasks-per-node 1 ...); it starts the ranks (--nproc-per-node) itself")
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or ""
    endpoint = f"{first_host(nodelist)}:{_port(env, DEFAULT_PORT)}"
    return NodeSpec(nnodes, _int(env, "SLURM_NODEID"), endpoint, "srun")


def resolve(nnodes: int, node_rank: int, endpoint: str | None, env: Mapping[str, str] | None) -> NodeSpec:
    """Flags first (any of them given); else the launcher we were started by (``env``), else one node."""
    if nnodes > 1 or node_rank or endpoint or env is None:
        return from_flags(nnodes, node_rank, endpoint)
    found = _from_torchrun(env) or _from_srun(env)
    if found is None:
        return NodeSpec(1, 0, None)
    split_endpoint(found.endpoint or "")
    return found
