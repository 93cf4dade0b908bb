"""Comparison of two recorded runs: per-tensor graders against the numerics.md thresholds, the
training-step updates, precision policy, dropout and phase facts, fused-away notes."""
