"""``validate_<stage>.sh`` / ``.slurm`` beside the launch scripts: ``migrate validate`` S2/S3 at the stage's
node count, each node with its own flags (a plain per-node command, or ``srun``, whose environment
``migrate validate`` reads to join: docs in README, "across machines")."""

from __future__ import annotations

from pathlib import Path

from migrator.ground.safe_write import new_file_mode, write_text

PORT = 29400  # the rendezvous port node 0's `migrate validate` hosts (MIGRATE_RDZV_PORT overrides it)

COMMON = """#!/usr/bin/env bash
# Written by `migrate plan` ({stage}): validate the migrated program's S2/S3 at this stage's size
# ({nnodes} node(s) x {per_node} ranks) before the run. MIGRATE_VALIDATE_TREE: the original tree.
set -euo pipefail
TREE="${{MIGRATE_VALIDATE_TREE:-.}}"
"""

MACHINE = 'migrate validate "$TREE" --stages S0,S1,S2,S3 --nproc-per-node {per_node} "$@"\n'

PER_NODE = """# run on every node: NODE_RANK=0..{nnodes_1} MASTER_ADDR=<node 0 address>; node 0 prints the verdict
# (the others exit with it)
: "${{NODE_RANK:?set NODE_RANK (0..{nnodes_1})}}" "${{MASTER_ADDR:?set MASTER_ADDR}}"
migrate validate "$TREE" --stages S2,S3 --nproc-per-node {per_node} --nnodes {nnodes} --node-rank "$NODE_RANK" \\
  --rdzv-endpoint "$MASTER_ADDR:${{MIGRATE_RDZV_PORT:-{port}}}" "$@"
"""

SLURM = """#!/usr/bin/env bash
# Written by `migrate plan` ({stage}): `sbatch` this; one `migrate validate` per node joins from srun's
# environment (node 0 = the first host of the step; port MIGRATE_RDZV_PORT, default {port}).
#SBATCH --nodes={nnodes}
#SBATCH --ntasks-per-node=1
set -euo pipefail
TREE="${{MIGRATE_VALIDATE_TREE:-.}}"
srun --nodes={nnodes} --ntasks-per-node=1 migrate validate "$TREE" --stages S2,S3 --nproc-per-node {per_node} "$@"
"""


def write_validate(out: Path, stage: str, world: int, per_node: int) -> list[Path]:
    """The validate script(s) of one launch stage: none for one card (S2/S3 need ranks), one for a
    machine, a per-node script and a Slurm batch script across nodes."""
    if world <= 1:
        return []
    nnodes = -(-world // per_node)
    fields = {"stage": stage, "nnodes": nnodes, "nnodes_1": nnodes - 1, "port": PORT,
              "per_node": world if nnodes == 1 else per_node}
    texts = {f"validate_{stage}.sh": COMMON.format(**fields) + (MACHINE if nnodes == 1 else PER_NODE).format(**fields)}
    if nnodes > 1:
        texts[f"validate_{stage}.slurm"] = SLURM.format(**fields)
    written = []
    for name, text in texts.items():
        write_text(out / name, text, mode=new_file_mode(0o777))
        written.append(out / name)
    return written
