"""What the two sides of validation share about warm starts (:mod:`.child.warm`, :mod:`.child.zygote`):
the environment names, the zygote's ready line and the note a warm worker writes to its log."""

from __future__ import annotations

from collections.abc import Mapping

from migrator.ground.process_scope import SCOPE_ENV

SOCKET_ENV = "MIGRATE_WARM_SOCKET"
MEMORY_ENV = "MIGRATE_WARM_MEMORY"  # the run's per-child memory limit in bytes, applied in the fork
SWITCH_ENV = "MIGRATE_VALIDATE_WARM"  # "0": every child starts cold
READY = b"ready\n"
STARTED_NOTE = "migrate validate: warm start (forked from pid {zygote} after torch was imported)"


def enabled(env: Mapping[str, str]) -> bool:
    """Warm starts are on unless ``MIGRATE_VALIDATE_WARM`` says 0/off/no/false."""
    return env.get(SWITCH_ENV, "1").strip().lower() not in ("0", "off", "no", "false")


# what torchrun sets per rank (or the scope per child, a multi-node launch) after the zygote started: read at
# run time, not at import, so a client whose environment differs from the zygote's only in these is served
# (and the parent keeps one zygote for environments that differ only in these: a census's single-rank MASTER_PORT)
PER_CHILD_KEYS = frozenset({
    SOCKET_ENV, MEMORY_ENV, SCOPE_ENV, "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
    "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "CUDA_MODULE_LOADING",
    # a multi-node launch's own (`multinode.lead.guarded`): torchrun's agent reads it when it rendezvouses
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"})
PER_CHILD_PREFIXES = ("TORCHELASTIC_", "TORCH_NCCL_", "NCCL_")


def per_child(key: str) -> bool:
    return key in PER_CHILD_KEYS or key.startswith(PER_CHILD_PREFIXES)


def zygote_key(env: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """What decides which zygote serves ``env``: everything but the per-child keys."""
    return frozenset((k, v) for k, v in env.items() if not per_child(k))
