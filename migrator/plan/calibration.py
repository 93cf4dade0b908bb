"""Every fitted constant of `migrate plan`'s cost model, and the one published table it was fitted to.

Fitted to: Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, arXiv:2104.04473, Table 1 (10 GPT runs, 1.7B-1T, A100 80GB on Selene, full
recomputation, 2021 Megatron: eager attention, dropout 0.1, no gradient-reduce overlap). The fit is
`python bench/plan_megatron_table.py --fit` (a grid over the two GEMM constants, minimising the largest
relative error of the table's achieved TFLOP/s).

One table per hardware family, one run per constant (`python bench/plan_published.py --fit`; those rows of
`bench/data/published_runs.yaml` carry `fit:` and are printed as fit, not held out):
* A100 (Ampere): Narayanan et al. Table 1 (the GEMM constants above).
* H100 / H800 (Hopper): the Megatron-Bridge performance summary (25.11, DGX-H100), its Qwen3-30B-A3B row
  (MOE_DISPATCH_S["nvidia"]; NVIDIA profiles without a fit of their own use it).
* Ascend 910B: the MindFormers model library table, its Llama 2 7B row (the a2-8x derived peak) and its
  DeepSeek-V2 row (MOE_DISPATCH_S["ascend"]; every Ascend profile uses it).
Every other run in that file is held out: it tests these numbers and never sets them.

The other assumptions (`migrator.plan.assumptions`) are framework or hardware facts with their own
sources, or plain modelling choices; `migrate plan --explain` lists each with its default and source.
"""

from __future__ import annotations

FITTED_TO = "Narayanan et al. 2021 (arXiv:2104.04473) Table 1, all 10 rows"  # the GEMM constants

# GEMM time = max(roofline memory time, FLOPs / (peak x GEMM_EFFICIENCY_MAX) + GEMM_OVERHEAD_S): the
# efficiency of one matrix multiply is GEMM_EFFICIENCY_MAX x F / (F + F_half), F_half = peak x overhead,
# so a small GEMM (few tokens per expert, a thin TP shard) loses a fixed time per call.
GEMM_EFFICIENCY_MAX = 0.65
GEMM_OVERHEAD_S = 4e-6

FITTED = {"gemm_efficiency": GEMM_EFFICIENCY_MAX, "gemm_overhead_s": GEMM_OVERHEAD_S}

# MoE dispatch: fixed seconds per token dispatch or combine (forward and backward; compute.py). One value per
# hardware family, each fitted to ONE published MoE run (`python bench/plan_published.py --fit`, the run's
# row printed as "fit", never as held out); every other MoE row tests it.
MOE_DISPATCH_S: dict[str, tuple[float, str]] = {
    "nvidia": (5.37e-3, "bridge-qwen3-30b-a3b-fp8 (Megatron-Bridge performance summary 25.11, DGX-H100: "
                    "Qwen3_30B_a3B, 16 GPUs, 5275 tokens/s/GPU)"),
    "ascend": (11.9e-3, "mindformers-deepseek-v2 (MindFormers model library: DeepSeekV2 236B, 36 tokens/s/p, "
                    "Atlas 900 A2 PoDc)"),
}


# Defaults for figures no first-party source gives, derived from published figures: used only where a
# shipped profile's figure is null, flagged `derived` in the plan and `--explain`, refused by `--strict`.
# Each entry: (value, derivation). A measured or user figure always replaces them.
_910C_PAPER = ("Zuo et al. 2025 (Huawei), 'Serving Large Language Models on Huawei CloudMatrix384', "
               "arXiv:2506.12708, Sec. 3")
_ASCEND_ROADMAP = ("Huawei Connect 2025 keynote (Eric Xu), as reported by deeptechbytes.com and msquantum.pro: "
                   "'Ascend 960 ... twice the computing power, memory bandwidth, memory capacity and interconnect "
                   "ports of the 950'")
_FP8_TWICE_BF16 = ("every dense tensor-core part with a published FP8 and BF16 rate runs FP8 at 2x BF16 "
                   "(H100 datasheet: 1,979 vs 989 TFLOPS; clusters/profiles.yaml h100-dgx)")

DERIVED_FIGURES: dict[str, dict[str, tuple[float, str]]] = {
    "a2-8x": {
        # A 910C is two dies of the 910B's generation (the supernode-384 profile's one rank per die); the
        # paper's per-package figures / 2 stand in for one 910B until a measured profile replaces them.
        # Fitted (session 12, `python bench/plan_published.py --fit`) to ONE run: mindformers-llama2-7b, the
        # MindFormers model library's Llama 2 7B 4K row (4160 tokens/s/p, Atlas 800T A2, DP 8, no TP/PP/CP), with
        # the Narayanan GEMM constants above, so it is an effective peak that also carries the 910B's own GEMM
        # efficiency. Before: 376 (the 910C paper's 752 TFLOPS per dual-die package / 2), which put every dense
        # MindFormers row 11-39 % too fast. The other MindFormers rows are held out.
        "peak_tflops_bf16": (295.0, "derived: fitted to one published run, MindFormers model library (mindspore-ai/"
                                    "docs models.md) Llama 2 7B 4K, 4160 tokens/s/p on an Atlas 800T A2 "
                                    "(pretrain_llama2_7b_bf16.yaml: DP 8), through this cost model; effective "
                                    "peak (the 910C paper, arXiv:2506.12708: 752 / 2 dies = 376, is the nominal one)"),
        "peak_tflops_fp16": (295.0, "derived: as peak_tflops_bf16"),
        "hbm_GBps": (1600.0, f"derived: {_910C_PAPER}: 3.2 TB/s per 910C package / 2 dies, taken for one "
                             "910B-class die (no consistent public 910B figure)"),
        "domain_GBps": (196.0, "derived: the 910C's per-die scale-up figure (196 GB/s, supernode-384 profile) "
                               "taken for the 910B's in-server HCCS; no per-device HCCS figure is published: "
                               "the weakest default here: measure it"),
    },
    "atlas-950-superpod": {
        "peak_tflops_bf16": (500.0, f"derived: announced 1,000 TFLOPS FP8 / 2 ({_FP8_TWICE_BF16})"),
    },
    "atlas-960-superpod": {
        "peak_tflops_bf16": (968.5, f"derived: 1,937 TFLOPS FP8 (profile) / 2 ({_FP8_TWICE_BF16})"),
        "domain_GBps": (4000.0, f"derived: 2 x the Ascend 950's announced 2 TB/s interconnect ({_ASCEND_ROADMAP})"),
        "hbm_GB": (288.0, f"derived: 2 x the 950DT's 144 GB ({_ASCEND_ROADMAP})"),
        "hbm_GBps": (8000.0, f"derived: 2 x the 950DT's 4 TB/s ({_ASCEND_ROADMAP})"),
    },
}
