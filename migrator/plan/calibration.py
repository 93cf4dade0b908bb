"""Every fitted constant of `migrate plan`'s cost model, and the one published table it was fitted to.

Fitted to: Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
Megatron-LM", SC'21, arXiv:2104.04473, Table 1 (10 GPT runs, 1.7B-1T, A100 80GB on Selene, full
recomputation, 2021 Megatron: eager attention, dropout 0.1, no gradient-reduce overlap). The fit is
`python bench/plan_megatron_table.py --fit` (a grid over the two GEMM constants, minimising the largest
relative error of the table's achieved TFLOP/s); nothing else was fitted. The runs in
`bench/data/published_runs.yaml` (Korthikanti et al. 2022, Llama 3, BLOOM, DeepSeek-V2/V3) are held out:
they test these numbers and never set them.

The other assumptions (`migrator.plan.assumptions`) are framework or hardware facts with their own
sources, or plain modelling choices; `migrate plan --explain` lists each with its default and source.
"""

from __future__ import annotations

FITTED_TO = "Narayanan et al. 2021 (arXiv:2104.04473) Table 1, all 10 rows"

# GEMM time = max(roofline memory time, FLOPs / (peak x GEMM_EFFICIENCY_MAX) + GEMM_OVERHEAD_S): the
# efficiency of one matrix multiply is GEMM_EFFICIENCY_MAX x F / (F + F_half), F_half = peak x overhead,
# so a small GEMM (few tokens per expert, a thin TP shard) loses a fixed time per call.
GEMM_EFFICIENCY_MAX = 0.65
GEMM_OVERHEAD_S = 4e-6

FITTED = {"gemm_efficiency": GEMM_EFFICIENCY_MAX, "gemm_overhead_s": GEMM_OVERHEAD_S}


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
        "peak_tflops_bf16": (376.0, f"derived: {_910C_PAPER}: 752 TFLOPS dense BF16 per dual-die 910C / 2 dies, "
                                    "taken for one 910B-class die (no first-party 910B figure)"),
        "peak_tflops_fp16": (376.0, "derived: as peak_tflops_bf16"),
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
