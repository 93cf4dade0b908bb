"""Warm starts, the client side: a worker child forked from the run's zygote (:mod:`.zygote`).

The process the parent (or torchrun) starts is still ``python -m migrator.validation.child.worker JOB``,
in its own :class:`migrator.ground.process_scope.Scope`. With ``MIGRATE_WARM_SOCKET`` set it is a *client*: it
sends its argv, working directory, ``sys.path``, environment and standard streams to the zygote, forwards
SIGTERM/SIGINT/SIGHUP to the forked worker and exits as the worker did (the same code, or the same
signal). When the zygote cannot serve it (no socket, no answer, a refusal) it returns None and the worker
runs cold, in this process. Also the wire both ends speak: length-prefixed JSON, descriptors alongside.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from collections.abc import Mapping

from ..warm_contract import SOCKET_ENV, enabled

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


# ------------------------------------------------------------------------------ wire: length-prefixed JSON
def send(conn: socket.socket, message: Mapping[str, object], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    payload = struct.pack("!I", len(data)) + data
    if fds:
        socket.send_fds(conn, [payload], fds)
    else:
        conn.sendall(payload)


def receive(conn: socket.socket, with_fds: int = 0) -> tuple[dict[str, object] | None, list[int]]:
    """One message (None: the other end closed) and the descriptors that came with it."""
    fds: list[int] = []
    if with_fds:
        head, fds, _flags, _addr = socket.recv_fds(conn, 4, with_fds)
    else:
        head = conn.recv(4)
    while head and len(head) < 4:
        more = conn.recv(4 - len(head))
        if not more:
            break
        head += more
    if len(head) < 4:
        for fd in fds:
            os.close(fd)
        return None, []
    (size,) = struct.unpack("!I", head)
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            return None, fds
        data += chunk
    message = json.loads(data)
    return (message if isinstance(message, dict) else None), fds


# ------------------------------------------------------------------------------ client (the started process)
def delegate(argv: list[str], module: str | None = None) -> int | None:
    """Run ``argv`` in a worker forked by the zygote and return its exit code; None: run cold here. ``module``:
    a child program other than the worker (the census), whose ``main(argv)`` the fork runs."""
    path = os.environ.get(SOCKET_ENV)
    if not path or not enabled(os.environ):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        send(conn, {"argv": [sys.argv[0], *argv], "cwd": os.getcwd(), "path": sys.path, "env": dict(os.environ),
                    **({"module": module} if module else {})}, [0, 1, 2])
        answer, _ = receive(conn)
    except OSError:
        conn.close()
        return None
    if not answer or not isinstance(answer.get("pid"), int):
        conn.close()
        return None  # refused (answer["cold"] says why) or the zygote is gone before forking
    pid = answer["pid"]
    assert isinstance(pid, int)

    def forward(signum: int, _frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    while True:
        try:
            ended, _ = receive(conn)
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries recv after a handled signal
            continue
    conn.close()
    status = ended.get("status") if ended else None
    if not isinstance(status, int):
        return 2  # the zygote died with the worker unreported (its own scope ended it)
    if os.WIFSIGNALED(status):  # end as the worker did, so torchrun and the parent see the same signal
        died_of = os.WTERMSIG(status)
        signal.signal(died_of, signal.SIG_DFL)
        os.kill(os.getpid(), died_of)
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1
