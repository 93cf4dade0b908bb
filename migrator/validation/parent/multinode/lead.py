"""S2/S3 (and ``--bench``) across nodes: the rendezvous store between the nodes' ``migrate validate``
agents, node 0's side (parent side; torch only when a multi-node run starts).

Node 0 hosts a ``torch.distributed.TCPStore`` on the rendezvous endpoint. torchrun's c10d backend, started
on any node with that endpoint, finds the port taken and joins the same store as a client (its keys live
under its own run id), so one port serves the rendezvous and our handoff, with no shared file system:

* ``hello/K``: node K joined; ``hb/K``: a counter each node's agent bumps every 0.5 s (a node whose counter
  stops for :data:`LOST_SECONDS` is lost);
* ``launch/N``: node 0's N-th torchrun launch (its job, rank count and rendezvous id); every other node
  starts the same job on its own trees (:mod:`.multinode_follow`);
* ``shard/N/K``: node K's records of launch N (its ranks' status files and dumps, a tar), unpacked by
  node 0 into the launch's folder before the statuses are read, so the stage compares as on one node;
* ``done`` / ``bye/K``: node 0's verdict (its stages), which the other nodes take as theirs.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from migrator.ground import safe_write

from .node_spec import NodeSpec

HEARTBEAT_SECONDS = 0.5
LOST_SECONDS = float(os.environ.get("MIGRATE_NODE_LOST_SECONDS", "10"))  # no heartbeat this long: node lost
POLL_SECONDS = 0.2

_current: Leader | None = None


class NodeLost(Exception):
    """A node of the run stopped answering (its agent died or its network went)."""


def current() -> Leader | None:
    """Node 0's session while a multi-node run is in progress (the launcher announces through it)."""
    return _current


class Link:
    """This agent's connection to the rendezvous store (node 0 hosts it), with a heartbeat thread."""

    def __init__(self, spec: NodeSpec, timeout: float) -> None:
        from torch.distributed import TCPStore

        self.spec = spec
        wait = timedelta(seconds=timeout)
        try:
            self.store: Any = TCPStore(spec.host, spec.port, is_master=spec.node_rank == 0, timeout=wait,
                                  wait_for_workers=False)
            beat = TCPStore(spec.host, spec.port, is_master=False, timeout=timedelta(seconds=30))
        except (RuntimeError, ValueError, OSError) as exc:  # DistNetworkError / DistStoreError are RuntimeErrors
            raise NodeLost(self._no_store(exc)) from None
        self.broken: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(beat,), daemon=True, name="node-heartbeat")
        self._thread.start()

    def _no_store(self, exc: BaseException) -> str:
        if self.spec.node_rank == 0:
            return f"node 0 could not host the rendezvous store on {self.spec.endpoint}: {exc}"
        return f"lost node 0: no rendezvous store at {self.spec.endpoint} ({exc})"

    def _beat(self, store: Any) -> None:
        key = f"migrate/hb/{self.spec.node_rank}"
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                store.add(key, 1)
            except Exception as exc:  # noqa: BLE001 - the store (node 0) is gone: the main loop reports it
                self.broken = f"lost node 0: the rendezvous store at {self.spec.endpoint} stopped answering ({exc})"
                return

    def _guard(self, exc: BaseException) -> NodeLost:
        return NodeLost(self.broken or f"lost node 0: the rendezvous store at {self.spec.endpoint} stopped "
                                       f"answering ({exc})")

    def set(self, key: str, value: bytes) -> None:
        try:
            self.store.set(f"migrate/{key}", value)
        except Exception as exc:  # noqa: BLE001 - TCPStore raises RuntimeError subclasses on a lost peer
            raise self._guard(exc) from None

    def get(self, key: str) -> bytes:
        try:
            return bytes(self.store.get(f"migrate/{key}"))
        except Exception as exc:  # noqa: BLE001
            raise self._guard(exc) from None

    def has(self, key: str) -> bool:
        if self.broken:
            raise NodeLost(self.broken)
        try:
            return bool(self.store.check([f"migrate/{key}"]))
        except Exception as exc:  # noqa: BLE001
            raise self._guard(exc) from None

    def counter(self, key: str) -> int:
        try:
            return int(self.store.add(f"migrate/{key}", 0))
        except Exception as exc:  # noqa: BLE001
            raise self._guard(exc) from None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


@dataclass
class Liveness:
    """When each other node's heartbeat counter last moved (node 0's view)."""

    nodes: tuple[int, ...]
    seen: dict[int, tuple[int, float]] = field(default_factory=dict)

    def lost(self, link: Link) -> list[int]:
        now = time.monotonic()
        gone = []
        for node in self.nodes:
            count = link.counter(f"hb/{node}")
            last = self.seen.get(node)
            if last is None or last[0] != count:
                self.seen[node] = (count, now)
            elif now - last[1] > LOST_SECONDS:
                gone.append(node)
        return gone


def lost_text(nodes: list[int]) -> str:
    names = ", ".join(str(n) for n in nodes)
    return (f"lost node {names}: no heartbeat for {LOST_SECONDS:g} s (its agent died or its network went); "
            "the ranks' records are incomplete, nothing compared")


def pack(folder: str, skip: tuple[str, ...] = ("job.json",)) -> bytes:
    """The files under ``folder`` (this node's shard of a launch) as an uncompressed tar."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for root, _dirs, files in os.walk(folder):
            for name in sorted(files):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, folder)
                if rel in skip or not os.path.isfile(path) or os.path.islink(path):
                    continue
                tar.add(path, arcname=rel, recursive=False)
    return buf.getvalue()


def unpack(data: bytes, folder: str, node: int, rebase: dict[str, str]) -> None:
    """Node ``node``'s shard into ``folder``: regular files only, nothing outside it, nothing of ours
    overwritten (its log becomes ``log.nodeK.txt``); its status files' paths rebased to this node's."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        for member in tar.getmembers():
            target = os.path.normpath(os.path.join(folder, member.name))
            if not member.isfile() or not target.startswith(os.path.normpath(folder) + os.sep):
                continue
            if member.name == "log.txt":
                target = os.path.join(folder, f"log.node{node}.txt")
            if os.path.exists(target):
                continue
            source = tar.extractfile(member)
            if source is None:
                continue
            body = source.read()
            if os.path.basename(target).startswith("status") and target.endswith(".json"):
                body = json.dumps(rebased(json.loads(body), rebase)).encode()
            os.makedirs(os.path.dirname(target), exist_ok=True)
            safe_write.write_bytes(target, body)


def rebased(value: Any, prefixes: dict[str, str]) -> Any:
    """``value`` with every string that starts with one of ``prefixes`` (a folder) moved to its new folder."""
    if isinstance(value, str):
        for old, new in sorted(prefixes.items(), key=lambda kv: -len(kv[0])):
            if value == old or value.startswith(old + os.sep):
                return new + value[len(old):]
        return value
    if isinstance(value, list):
        return [rebased(v, prefixes) for v in value]
    if isinstance(value, dict):
        return {k: rebased(v, prefixes) for k, v in value.items()}
    return value


class Leader:
    """Node 0: announces each torchrun launch, watches the other nodes, gathers their shards."""

    def __init__(self, spec: NodeSpec, original: str, timeout: float) -> None:
        self.spec = spec
        self.original = original
        self.timeout = timeout
        self.link = Link(spec, timeout)
        self.live = Liveness(tuple(range(1, spec.nnodes)))
        self.launches = 0
        self.lost: list[int] = []

    def wait_joined(self) -> None:
        """Every other node said hello within the timeout, else NodeLost naming the missing ones."""
        deadline = time.monotonic() + self.timeout
        missing = list(self.live.nodes)
        while missing and time.monotonic() < deadline:
            missing = [n for n in missing if not self.link.has(f"hello/{n}")]
            time.sleep(POLL_SECONDS if missing else 0)
        if missing:
            raise NodeLost(f"node {', '.join(map(str, missing))} did not join within {self.timeout:g} s "
                           f"(each node runs the same migrate validate with its --node-rank and --rdzv-endpoint "
                           f"{self.spec.endpoint})")

    def announce(self, job: dict[str, Any], name: str, nproc_per_node: int, timeout: float) -> tuple[int, str]:
        """Publish a launch for the other nodes; (launch number, the rendezvous id all nodes use)."""
        seq = self.launches
        self.launches += 1
        rdzv_id = f"migrate-validate-{name}-{seq}"
        spec = {"name": name, "job": job, "nproc_per_node": nproc_per_node, "rdzv_id": rdzv_id,
                "timeout": timeout, "original": self.original}
        self.link.set(f"launch/{seq}", json.dumps(spec).encode())
        return seq, rdzv_id

    def wait(self, scope: Any, timeout: float) -> bool:
        """Wait for this node's torchrun; False on timeout or when another node is lost (then the caller
        ends the scope at once instead of waiting for ranks stuck on the lost node)."""
        deadline = time.monotonic() + timeout
        while not scope.wait(min(1.0, max(deadline - time.monotonic(), 0.1))):
            if self._check_lost() or time.monotonic() >= deadline:
                return False
        return True

    def _check_lost(self) -> bool:
        try:
            self.lost = sorted(set(self.lost) | set(self.live.lost(self.link)))
        except NodeLost:
            pass  # our own store answers in-process: this cannot be another node's loss
        return bool(self.lost)

    def gather(self, seq: int, out: str) -> str | None:
        """Every other node's shard of launch ``seq`` into ``out``; the lost-node message when one is missing."""
        pending = [n for n in self.live.nodes if n not in self.lost]
        deadline = time.monotonic() + self.timeout
        while pending and not self._check_lost() and time.monotonic() < deadline:
            for node in list(pending):
                if self.link.has(f"shard/{seq}/{node}"):
                    head = json.loads(self.link.get(f"shard/{seq}/{node}/head"))
                    unpack(self.link.get(f"shard/{seq}/{node}"), out, node, {head["out"]: out})
                    pending.remove(node)
            time.sleep(POLL_SECONDS if pending else 0)
        if self.lost:
            return lost_text(self.lost)
        if pending:
            return f"node {', '.join(map(str, pending))} sent no records of {out} within {self.timeout:g} s"
        return None

    def finish(self, stages: list[dict[str, Any]], exit_code: int) -> None:
        """Publish the verdict and give the other nodes a moment to read it before the store goes."""
        self.link.set("done", json.dumps({"stages": stages, "exit_code": exit_code}).encode())
        deadline = time.monotonic() + min(self.timeout, 3 * LOST_SECONDS)
        waiting = [n for n in self.live.nodes if n not in self.lost]
        while waiting and time.monotonic() < deadline:
            waiting = [n for n in waiting if not self.link.has(f"bye/{n}")]
            time.sleep(POLL_SECONDS if waiting else 0)

    def close(self) -> None:
        self.link.close()


def open_leader(spec: NodeSpec, original: str, timeout: float) -> Leader:
    global _current
    _current = Leader(spec, original, timeout)
    return _current


def close_leader() -> None:
    global _current
    if _current is not None:
        _current.close()
    _current = None


def guarded(cmd: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """A multi-node torchrun: under :mod:`.node_guard` (it dies with this agent, even by SIGKILL), and with
    the ranks' own store (their keys must not outlive one launch in the long-lived rendezvous store)."""
    import sys

    guard = [sys.executable, "-m", "migrator.validation.parent.multinode.node_guard"]
    return guard + cmd, {**env, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "MIGRATE_GUARD_PARENT": str(os.getpid())}
