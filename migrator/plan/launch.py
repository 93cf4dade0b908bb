"""Per-stage launch scripts: 1 card, 1 machine, the supernode, with torchrun and the HCCL environment.

Environment variables and their meaning: /work/shared/docs/ascend-facts.md (torch_npu env table):
HCCL_CONNECT_TIMEOUT (torch_npu warns below 300 s with a rank table), HCCL_EXEC_TIMEOUT (default 1800 s),
HCCL_IF_IP (local IP per node for multi-node), ASCEND_RT_VISIBLE_DEVICES (CUDA_VISIBLE_DEVICES' twin),
TASK_QUEUE_ENABLE=2 (recommended dispatch queue; may raise peak memory), CUDA_DEVICE_MAX_CONNECTIONS=1
(kept by MindSpeed's launch scripts), PYTORCH_NPU_ALLOC_CONF=expandable_segments:True.
"""

from __future__ import annotations

from pathlib import Path

from migrator.ground.safe_write import new_file_mode, write_text

from .cost import Layout
from .launch_validate import write_validate

HEADER = """#!/usr/bin/env bash
# Written by `migrate plan` ({stage}): {label}
# Layout on {world} device(s): TP {tp} x PP {pp} x DP {dp}{ep}. The MIGRATE_PLAN_* variables carry it to the
# program; read them where it builds its process groups. Edit the script path and arguments below.
set -euo pipefail
source "${{ASCEND_TOOLKIT_HOME:-/usr/local/Ascend/ascend-toolkit/latest}}/../set_env.sh" 2>/dev/null || \\
  source /usr/local/Ascend/ascend-toolkit/set_env.sh
export MIGRATE_PLAN_TP={tp} MIGRATE_PLAN_PP={pp} MIGRATE_PLAN_DP={dp} MIGRATE_PLAN_EP={ep_n}
export MIGRATE_PLAN_ZERO={zero} MIGRATE_PLAN_RECOMPUTE={recompute} MIGRATE_PLAN_MICRO_BATCH={mb}
export HCCL_CONNECT_TIMEOUT=${{HCCL_CONNECT_TIMEOUT:-600}}
export HCCL_EXEC_TIMEOUT=${{HCCL_EXEC_TIMEOUT:-1800}}
export TASK_QUEUE_ENABLE=${{TASK_QUEUE_ENABLE:-2}}
export CUDA_DEVICE_MAX_CONNECTIONS=1
export PYTORCH_NPU_ALLOC_CONF=${{PYTORCH_NPU_ALLOC_CONF:-expandable_segments:True}}
"""

SINGLE = 'export ASCEND_RT_VISIBLE_DEVICES=${{ASCEND_RT_VISIBLE_DEVICES:-0}}\n' \
         'torchrun --standalone --nproc-per-node 1 {script} "$@"\n'
MACHINE = 'export ASCEND_RT_VISIBLE_DEVICES=${{ASCEND_RT_VISIBLE_DEVICES:-{devices}}}\n' \
          'torchrun --standalone --nproc-per-node {per_node} {script} "$@"\n'
MULTI = """# run on every node: NODE_RANK=0..{nnodes_1} MASTER_ADDR=<node 0 address> HCCL_IF_IP=<this node's address>
: "${{NODE_RANK:?set NODE_RANK (0..{nnodes_1})}}" "${{MASTER_ADDR:?set MASTER_ADDR}}" "${{HCCL_IF_IP:?set HCCL_IF_IP}}"
export GLOO_SOCKET_IFNAME=${{GLOO_SOCKET_IFNAME:-}}
torchrun --nnodes {nnodes} --node-rank "$NODE_RANK" --nproc-per-node {per_node} \\
  --rdzv-backend c10d --rdzv-endpoint "$MASTER_ADDR:${{MASTER_PORT:-29500}}" {script} "$@"
"""


def _script(stage: str, layout: Layout, label: str, body: str) -> str:
    return HEADER.format(stage=stage, label=label, world=layout.world, tp=layout.tp, pp=layout.pp, dp=layout.dp,
                         ep=f", EP {layout.ep}" if layout.ep > 1 else "", ep_n=layout.ep, zero=layout.zero,
                         recompute=layout.recompute, mb=layout.micro_batch) + body


def write_launch(out: str | Path, stages: dict[str, Layout], per_node: int, script: str = "train.py",
                 notes: dict[str, str] | None = None) -> list[Path]:
    """`stages`: {"1card": layout, "1machine": layout, "supernode": layout}. Writes each as run_<stage>.sh
    and its `migrate validate` as validate_<stage>.sh (.slurm across nodes; :mod:`.launch_validate`); an
    existing file is replaced only after the new one is written in full."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stage, layout in stages.items():
        if stage == "1card":
            body = SINGLE.format(script=script)
        elif layout.world <= per_node:
            body = MACHINE.format(devices=",".join(map(str, range(layout.world))), per_node=layout.world,
                                  script=script)
        else:
            nnodes = -(-layout.world // per_node)
            body = MULTI.format(nnodes=nnodes, nnodes_1=nnodes - 1, per_node=per_node, script=script)
        path = out / f"run_{stage}.sh"
        note = (notes or {}).get(stage)
        text = _script(stage, layout, layout.label(), body)
        if note:
            text = text.replace("set -euo pipefail\n", f"# NOTE: {note}\nset -euo pipefail\n", 1)
        write_text(path, text, mode=new_file_mode(0o777))
        written.append(path)
        written += write_validate(out, stage, layout.world, per_node)
    return written
