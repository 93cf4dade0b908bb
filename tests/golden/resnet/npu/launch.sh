#!/usr/bin/env bash
# Multi-GPU training on one node with apex DDP + SyncBatchNorm.
set -euo pipefail

export ASCEND_RT_VISIBLE_DEVICES=${ASCEND_RT_VISIBLE_DEVICES:-0,1,2,3}
export NCCL_DEBUG=${NCCL_DEBUG:-INFO}
export NCCL_P2P_DISABLE=${NCCL_P2P_DISABLE:-0}

# Build the fused kernel once (optional: the model falls back to PyTorch without it).
python setup.py build_ext --inplace >/dev/null 2>&1 || echo "fused kernel not built; using fallback"

NGPUS=$(echo "${ASCEND_RT_VISIBLE_DEVICES}" | tr ',' '\n' | wc -l)
torchrun --nproc_per_node="${NGPUS}" train.py -b 128 --opt-level O1 --sync_bn "$@"
