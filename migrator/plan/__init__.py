"""`migrate plan`: propose a parallel layout for a model on a cluster (docs/plan.md).

model (the model's shape) -> clusters (sourced hardware figures) -> cost (memory / FLOPs / collective
formulas) -> search (valid layouts ranked by step time) -> fault (MTBF, blast radius, checkpoint interval)
-> launch (per-stage torchrun + HCCL scripts). No torch in this package except in the probe child.
"""
