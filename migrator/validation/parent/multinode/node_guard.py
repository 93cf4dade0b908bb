"""``python -m migrator.validation.parent.multinode.node_guard CMD...``: run CMD in a :class:`process_scope.Scope`
and end it (CMD and everything it started) as soon as the process that started the guard is gone.

A node agent of a multi-node ``migrate validate`` runs torchrun through this guard: a SIGKILLed agent
runs no ``atexit`` and cannot end its scopes, and its torchrun and ranks would otherwise keep running
(and keep the other nodes' ranks waiting on them). The guard's parent is polled; when it changes (the
agent died and the guard was re-parented), the scope is ended and the guard exits 137.
"""

from __future__ import annotations

import os
import sys

from migrator.ground import process_scope

POLL_SECONDS = 0.2


def guard(cmd: list[str], parent: int) -> int:
    env = {k: v for k, v in os.environ.items() if k != "MIGRATE_GUARD_PARENT"}
    scope = process_scope.Scope(cmd, env=env, cwd=os.getcwd(), stdout=None, stderr=None)
    try:
        while not scope.wait(POLL_SECONDS):
            if os.getppid() != parent:
                return 137
        return scope.proc.returncode or 0
    finally:
        scope.end()


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m migrator.validation.parent.multinode.node_guard CMD [ARGS...]", file=sys.stderr)
        return 2
    parent = os.environ.get("MIGRATE_GUARD_PARENT", "")  # the agent, should it be gone before we got here
    return guard(argv, int(parent) if parent.isdigit() else os.getppid())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
