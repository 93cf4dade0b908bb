#!/usr/bin/env bash
# Single-node pretraining launch: one process per GPU via torchrun.
#   bash launch.sh                 # all 8 GPUs
#   CUDA_VISIBLE_DEVICES=0,1 bash launch.sh --model 125m --steps 2000
set -euo pipefail

export ASCEND_RT_VISIBLE_DEVICES=${ASCEND_RT_VISIBLE_DEVICES:-0,1,2,3,4,5,6,7}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export NCCL_IB_DISABLE=1            # single node: NVLink/PCIe only, skip InfiniBand probing
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-eth0}
export OMP_NUM_THREADS=8

NGPUS=$(echo "${ASCEND_RT_VISIBLE_DEVICES}" | tr ',' '\n' | wc -l)

torchrun --standalone --nproc_per_node="${NGPUS}" train.py \
    --model 350m --dtype bfloat16 --doc-masking "$@"
