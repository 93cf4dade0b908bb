"""What the two sides of validation share about warm starts (:mod:`.child.warm`, :mod:`.child.zygote`):
the environment names, the zygote's ready line and the note a warm worker writes to its log."""

from __future__ import annotations

from collections.abc import Mapping

SOCKET_ENV = "MIGRATE_WARM_SOCKET"
MEMORY_ENV = "MIGRATE_WARM_MEMORY"  # the run's per-child memory limit in bytes, applied in the fork
SWITCH_ENV = "MIGRATE_VALIDATE_WARM"  # "0": every child starts cold
READY = b"ready\n"
STARTED_NOTE = "migrate validate: warm start (forked from pid {zygote} after torch was imported)"


def enabled(env: Mapping[str, str]) -> bool:
    """Warm starts are on unless ``MIGRATE_VALIDATE_WARM`` says 0/off/no/false."""
    return env.get(SWITCH_ENV, "1").strip().lower() not in ("0", "off", "no", "false")
