"""What ``migrate validate`` should do (built by ``api.validate``; no torch here)."""

from __future__ import annotations

from dataclasses import dataclass

ALL_STAGES = ("S0", "S1", "S2", "S3")


@dataclass(frozen=True)
class Options:
    original: str
    migrated: str | None = None
    stages: tuple[str, ...] = ALL_STAGES
    force: bool = False
    entry: str | None = None
    seed: int = 0
    steps: tuple[int, ...] = (0, 1)          # S1 batches (gpt: step 0 dense Sq != Skv, step 1 varlen)
    parallel_steps: tuple[int, ...] = (0,)   # S2/S3 batches
    world_size: int = 2                      # S2/S3 processes per node
    nnodes: int = 1
    node_rank: int = 0                       # this node (0: gathers every node's records and compares)
    rdzv_endpoint: str | None = None         # HOST:PORT of node 0's rendezvous store (--nnodes > 1)
    plan_world_size: int = 8                 # S0: the real target world size (8, 64, 384, ...)
    plan_tp: int | None = None            # S0: tensor-parallel degree (default 2 when "tp" is declared)
    dp_variants: tuple[str, ...] = ("ddp", "fsdp2")
    mp_variants: tuple[str, ...] = ("tp", "ep")
    bf16_policy: str = "amp"                 # "amp": autocast over fp32 master weights; "pure": model.to(bf16)
    threads: int = 1
    timeout: float = 600.0
    work_dir: str | None = None
    keep_work_dir: bool = False
    record: str | None = None
    compare: str | None = None
    device: str | None = None                # --device of --record (cuda|cpu) / --compare (npu|cpu); None: what answers
    export_msprobe: str | None = None
    script: str | None = None
    script_args: tuple[str, ...] = ()
    pythonpath: tuple[str, ...] = ()         # folders of each tree (relative to its root) put on sys.path
    curve_steps: int = 5
    max_bytes: int = 1 << 30                 # full tensors per run; statistics only beyond
    bench: bool = False                      # --bench: stage benchmarks (off: nothing is timed or profiled)
    bench_steps: int = 5                     # timed steps per repeat (after warm-up)
    bench_warmup: int = 2
    bench_profile_steps: int = 2             # steps under torch.profiler for the communication share
    repeats: int = 2                         # repeats per stage and side (stability: crash / hang / NaN)
    peak_tflops: float | None = None      # overrides the sourced peak table (migrator/validation/parent/perf/peaks.py)
    bench_timeout: float = 300.0             # seconds per repeat before it counts as a hang
