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
