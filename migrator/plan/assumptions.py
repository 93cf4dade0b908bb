"""The cost model's assumptions: one frozen record, each field with its default's source (`--explain`).

`--assume KEY=VALUE` sets any of them; a fitted constant's default comes from `calibration.py`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from . import calibration

SCHEDULES = ("1f1b", "interleaved", "zero-bubble", "dualpipe")


class AssumptionError(ValueError):
    """A malformed or unknown --assume KEY=VALUE (a usage error)."""


@dataclass(frozen=True)
class Assumptions:
    """Global assumptions: the same for every model, layout and cluster unless the user sets one."""

    gemm_efficiency: float = calibration.GEMM_EFFICIENCY_MAX  # large-GEMM achieved / peak dense TFLOP/s
    gemm_overhead_s: float = calibration.GEMM_OVERHEAD_S      # fixed time lost per GEMM call
    gemm_model: str = "curve"         # "curve": size-dependent roofline; "constant": every GEMM at gemm_efficiency
    attention: str = "flash"          # "flash": no s x s scores kept; "eager": Korthikanti's a s / h terms
    attention_efficiency: float = 0.5  # flash-attention kernel: achieved / peak of its FLOPs
    nongemm_passes: float = 1.0       # HBM passes over a layer's activation bytes per forward-equivalent
    link_efficiency: float = 0.8      # achieved / nominal link bandwidth of a ring collective
    latency_s: float = 0.0            # alpha per collective step
    dp_overlap: float = 1.0           # share of the last micro-batch's backward (and next forward) that
                                      # hides the data-parallel gradient reduce (and parameter all-gather)
    tp_overlap: float = 0.0           # share of TP all-gather / reduce-scatter hidden behind its GEMMs
    ep_overlap: float = 0.0           # share of the EP all-to-all hidden (DualPipe hides it: 1.0)
    pp_overlap: float = 1.0           # share of pipeline send/recv hidden (Megatron overlaps P2P)
    grad_dtype: str = "bf16"          # gradient buffer: bf16 (16 bytes/param with Adam) or fp32 (18)
    dropout: float = 0.0              # > 0 keeps 1-byte dropout masks (Korthikanti's 34 counts them)
    schedule: str = "1f1b"            # pipeline schedule when vpp = 1 (vpp > 1 is interleaved)
    capacity_factor: float = 1.0      # MoE: expert capacity / balanced load (the GEMMs run this many x tokens)
    moe_domains: int = 0              # MoE: a token's experts lie in at most this many domains (0 = any)
    memory_headroom: float = 0.9      # share of HBM the plan may fill (allocator, workspace, fragmentation)
    cp_min_tokens: int = 4096         # context parallelism only down to this many tokens per device
    cp_comm: str = "allgather"        # context parallel exchange: "allgather" (K/V, Megatron / Llama 3) or
                                      # "ulysses" (all-to-all of Q, K, V and the output over the heads)
    moe_imbalance: float = 1.0        # MoE: tokens on the busiest expert device / the balanced share
    moe_permute_passes: float = 4.0   # MoE: HBM passes over the routed tokens' hidden vectors (permute + unpermute)
    fp8_cast_bytes: float = 4.0       # FP8: HBM bytes per operand element to quantize (read 2, write 1) and
                                      # write the transposed copy the backward GEMM reads (1); amax is folded in
    comm_sm_share: float = 0.0        # share of the compute units a collective hidden behind compute occupies
    mc2_overlap: float = 0.75         # Ascend MC2: share of a TP collective hidden inside its fused matmul
    moe_dispatch_s: float = calibration.MOE_DISPATCH_S["nvidia"][0]  # MoE: fixed seconds per dispatch or
                                      # combine (sync + host-bound kernel chain); an Ascend cluster takes its own
    optimizer_shard: str = "zero"     # what the data-parallel sharding keeps as slices: "zero" (the layout's stage),
                                      # "mindspore" (optimizer parallel: weights too; gradients unless accumulated),
                                      # "mindspore+grads" (also gradient_accumulation_shard)
    norm_mla_recompute: str = "off"   # "on": norms and MLA up-projections recomputed in the backward (DeepSeek-V3)

    def to_json(self) -> dict:
        return asdict(self)

    @property
    def grad_bytes(self) -> int:
        return 4 if self.grad_dtype == "fp32" else 2


SOURCES = {
    "gemm_efficiency": f"fitted: {calibration.FITTED_TO} (migrator/plan/calibration.py)",
    "gemm_overhead_s": f"fitted: {calibration.FITTED_TO} (migrator/plan/calibration.py)",
    "gemm_model": "modelling choice: roofline (HBM bytes of A, B, C) with a fixed per-call overhead",
    "attention": "FlashAttention (Dao et al. 2022) is the default of Megatron-Core / HF today; 2021 Megatron "
                 "kept the scores (Korthikanti et al. 2022 Sec. 4)",
    "attention_efficiency": "FlashAttention-2 paper (Dao 2023): 50-73% of A100 peak forward, less backward; "
                            "the low end, not fitted",
    "nongemm_passes": "modelling choice: one HBM read+write per stored activation byte",
    "link_efficiency": "modelling choice: NCCL busbw reaches about 80% of nominal on large messages "
                       "(nccl-tests reports); not fitted",
    "latency_s": "no sourced per-step latency: bandwidth only",
    "dp_overlap": "Megatron-LM --overlap-grad-reduce / --overlap-param-gather (distributed optimizer) and "
                  "FSDP overlap the DP collectives with the last backward / first forward; 0 for 2021 Megatron",
    "tp_overlap": "off: TP comm overlap needs TE userbuffers (--tp-comm-overlap), not on by default",
    "ep_overlap": "off: MoE all-to-all is on the critical path unless the schedule overlaps it (DualPipe, "
                  "DeepSeek-V3 report Sec. 3.2.1)",
    "pp_overlap": "Megatron-LM overlaps pipeline P2P with compute (--overlap-p2p-communication)",
    "grad_dtype": "bf16: 2 + 2 + 12 = 16 bytes per parameter (Rajbhandari et al. 2020; DeepSpeed bf16, FSDP with a "
                  "bf16 reduce dtype). Megatron-LM with --bf16 keeps an fp32 main-grad buffer and reduces in fp32 "
                  "unless --grad-reduce-in-bf16 (megatron/training/arguments.py: 'accumulate and all-reduce "
                  "gradients in fp32 for bfloat16 data type'): set grad_dtype=fp32 for it (18 bytes)",
    "dropout": "modern LLMs train with dropout 0 (Llama, Mistral, DeepSeek configs); GPT-3/Megatron 2021 used 0.1",
    "schedule": "1F1B (Narayanan et al. 2021); interleaved with vpp > 1; zero-bubble (Qi et al. 2023, ZB-H1: "
                "1/3 of the 1F1B bubble); dualpipe (DeepSeek-V3 report: (p/2-1) x (F&B + B - 3W))",
    "capacity_factor": "Megatron-Core default: no token dropping (1.0, balanced routing assumed)",
    "moe_domains": "DeepSeek-V3 node-limited routing: at most 4 nodes per token; 0 = unrestricted",
    "memory_headroom": "modelling choice: allocator fragmentation and workspace",
    "cp_min_tokens": "modelling choice: context parallelism only while each device keeps 4096 tokens",
    "cp_comm": "Megatron-Core / Llama 3 (Dubey et al. 2024 Sec. 3.3.2) exchange K and V (all-gather volume); "
               "DeepSpeed-Ulysses (Jacobs et al. 2023) all-to-alls Q, K, V and the output over the heads",
    "moe_imbalance": "1.0: the Megatron-Bridge performance summary force-balances tokens among experts; real "
                     "routing (aux-loss balanced) is above 1, e.g. Pangu Pro MoE (arXiv:2505.21411) Fig. 2 "
                     "imbalance scores: set it for your router",
    "moe_permute_passes": "modelling choice: permute reads and writes the top-k copies of each token, unpermute "
                          "reads and writes them back (Megatron-Core moe_utils.permute / unpermute): 4 passes",
    "fp8_cast_bytes": "modelling choice after Transformer Engine's FP8 recipe (cast + transpose of each GEMM "
                      "operand, amax history): read bf16 2 bytes, write fp8 1 byte and its transpose 1 byte",
    "comm_sm_share": "0: hidden collectives cost no compute; DeepSeek-V3 (arXiv:2412.19437 Sec. 3.2.2) gives 20 of "
                     "the H800's 132 SMs to its overlapped all-to-all (0.15): compute beside a hidden collective "
                     "then runs that much slower",
    "moe_dispatch_s": "fitted: " + "; ".join(f"{family}: {value * 1e3:.2f} ms from {run}" for family, (value, run)
                                             in calibration.MOE_DISPATCH_S.items())
                      + " (migrator/plan/calibration.py; an Ascend cluster takes the ascend value)",
    "optimizer_shard": "zero: ZeRO stages as the layout says (Rajbhandari et al. 2020). mindspore: MindSpore / "
                       "MindFormers optimizer parallel (enable_parallel_optimizer) 'saves the parameters as minimal "
                       "slices' over data parallel (MindSpore docs, features/parallel/optimizer_parallel.md; MindFormers "
                       "config docs: 'slice model weight parameters by parallel_config.data_parallel'), gradients are "
                       "reduce-scattered to slices, but an accumulated gradient (pipeline or gradient accumulation) "
                       "stays whole unless parallel_optimizer_config.gradient_accumulation_shard (mindspore+grads); "
                       "memory only: the collectives stay the layout's ZeRO stage's",
    "norm_mla_recompute": "off; DeepSeek-V3 (arXiv:2412.19437 Sec. 3.2.3) recomputes all RMSNorms and the MLA "
                          "up-projections in the backward instead of storing their outputs",
    "mc2_overlap": "modelling choice: MindSpeed MC2 (docs/en/pytorch/features/mcore/mc2.md) splits the matmul and "
                   "its all-gather / reduce-scatter into pipelined sub-tasks; 0.75 = all but the first of 4 "
                   "sub-tasks hidden (the sub-task count is not published); never more than the fused GEMMs' time",
}

_CHOICES = {"gemm_model": ("curve", "constant"), "attention": ("flash", "eager"),
            "grad_dtype": ("bf16", "fp32"), "schedule": SCHEDULES, "cp_comm": ("allgather", "ulysses"),
            "optimizer_shard": ("zero", "mindspore", "mindspore+grads"), "norm_mla_recompute": ("off", "on")}


def parse_assume(pairs: list[str] | tuple[str, ...], base: Assumptions | None = None) -> Assumptions:
    """`KEY=VALUE` pairs over `base` (the defaults). Unknown keys, bad numbers and bad choices raise
    AssumptionError naming the pair and what is allowed."""
    kinds = {f.name: f.type for f in fields(Assumptions)}
    changes: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key, raw = key.strip().replace("-", "_"), raw.strip()
        if not sep or not raw:
            raise AssumptionError(f"--assume {pair!r}: expected KEY=VALUE")
        if key not in kinds:
            raise AssumptionError(f"--assume {pair!r}: unknown assumption {key!r} (known: {', '.join(kinds)})")
        kind = str(kinds[key])
        if key in _CHOICES:
            if raw not in _CHOICES[key]:
                raise AssumptionError(f"--assume {pair!r}: {key} is one of {', '.join(_CHOICES[key])}")
            changes[key] = raw
            continue
        try:
            value: float = int(raw) if kind == "int" else float(raw)
        except ValueError:
            raise AssumptionError(f"--assume {pair!r}: {key} takes a number") from None
        if value < 0 or (key in ("gemm_efficiency", "attention_efficiency", "link_efficiency", "memory_headroom")
                         and not 0 < value <= 1) or (key.endswith("_overlap") and value > 1) \
                or (key in ("capacity_factor", "moe_imbalance") and value < 1) \
                or (key in ("mc2_overlap", "comm_sm_share") and value > 1):
            raise AssumptionError(f"--assume {pair!r}: {key} is out of range")
        changes[key] = value
    return replace(base or Assumptions(), **changes)


def explain_lines(assumptions: Assumptions) -> list[str]:
    """One line per assumption: its value, the default when it differs, and the default's source."""
    default = Assumptions()
    out = []
    for f in fields(Assumptions):
        value, base = getattr(assumptions, f.name), getattr(default, f.name)
        changed = "" if value == base else f" (set; default {base})"
        out.append(f"{f.name} = {value}{changed}: {SOURCES[f.name]}")
    return out
