#!/usr/bin/env bash
# Multi-node launch: 8 GPUs per node, TP=2 inside each node, experts spread over the
# data-parallel ranks. Run on every node with NODE_RANK set; MASTER_ADDR = node 0.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 bash launch.sh --model small
# Profile with the NVTX ranges:  MOE_NVTX=1 nsys profile -t cuda,nvtx -o moe bash launch.sh
set -euo pipefail

export ASCEND_RT_VISIBLE_DEVICES=${ASCEND_RT_VISIBLE_DEVICES:-0,1,2,3,4,5,6,7}
export CUDA_DEVICE_MAX_CONNECTIONS=1        # keep TP all-reduces ordered with compute
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-ib0}
export NCCL_IB_HCA=${NCCL_IB_HCA:-mlx5}
export TORCH_NCCL_ASYNC_ERROR_HANDLING=1

NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}

torchrun --nnodes="${NNODES}" --node_rank="${NODE_RANK}" --nproc_per_node=8 \
    --master_addr="${MASTER_ADDR}" --master_port=29500 \
    train.py --tp 2 "$@"
