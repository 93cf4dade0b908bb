#!/usr/bin/env python3
"""Faults during `migrate fix` on a real tree (a copy of the bundled samples: gpt, moe, resnet).

    python3 bench/fault_bench.py              # all cases
    python3 bench/fault_bench.py --timed 24   # more timed kills

Cases, each on a fresh copy, each followed by what the next `fix` does first (stale temporary
files swept, `migrator.fix.journal.recover`) and a check, then a full `fix` and a check again:
- SIGKILL at every named point of the transaction (`MIGRATE_FAULT_AT`: journal, file:1..N, written,
  record), at evenly spread times over a measured fix (kill after t ms), and t ms after the journal
  appears (inside the short window where files are replaced);
- concurrent edits: a writer appends marker lines to a file while `fix` runs; every marker must be
  in the file afterwards (the user's edit survives), and a skipped file must be reported;
- disk full: the tree on a small tmpfs (`mount -t tmpfs`, needs root; skipped when refused), filled
  to leave k bytes free for a range of k.
The check: every file original or fixed (as an undisturbed fix leaves it), no journal, no temp
file, and the record lists exactly the fixed files with their hashes and the reference's edit
counts. Prints one line per case and the violations; exit 1 when there are any.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from migrator.fix import journal  # noqa: E402
from migrator.fix.writer import sweep_stale_temps  # noqa: E402

SAMPLES = ("gpt", "moe", "resnet")
RECORD = ".migrate/fix-record.json"


def make_tree(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "pyproject.toml").write_text('[project]\nname = "samples"\n')
    for name in SAMPLES:
        shutil.copytree(REPO / "samples" / name, dest / name)
    return dest


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".migrate" not in p.parts}


def fix_cmd(root: Path) -> list[str]:
    return [sys.executable, "-m", "migrator", "fix", str(root), "--no-cache", "-q"]


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}


def run_fix(root: Path, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(fix_cmd(root), cwd=root, env=env(**extra), capture_output=True, text=True, timeout=600)


class Reference:
    def __init__(self, work: Path):
        root = make_tree(work / "reference")
        self.original = snapshot(root)
        started = time.monotonic()
        run_fix(root)
        self.seconds = time.monotonic() - started
        self.fixed = snapshot(root)
        record = json.loads((root / RECORD).read_text())
        self.edits = {f["path"]: len(f["edits"]) for f in record["files"]}
        self.changed = sorted(rel for rel in self.fixed if self.fixed[rel] != self.original.get(rel))


def violations(root: Path, ref: Reference, appended: dict[str, list[bytes]] | None = None) -> list[str]:
    found = []
    now = snapshot(root)
    appended = appended or {}
    for rel in sorted(set(ref.original) | set(now)):
        data = now.get(rel)
        extra = b"".join(appended.get(rel, []))
        if data is None:
            found.append(f"{rel}: gone")
        elif rel.endswith(".migrate-tmp"):
            found.append(f"{rel}: temporary file left")
        elif rel not in ref.original:
            found.append(f"{rel}: a file the fix did not make")
        elif data not in (ref.original[rel] + extra, ref.fixed[rel] + extra) and not (extra and data.endswith(extra)):
            found.append(f"{rel}: neither original nor fixed")
    if (root / journal.JOURNAL_PATH).exists():
        found.append("journal left after recovery")
    try:
        record = json.loads((root / RECORD).read_text()) if (root / RECORD).exists() else {"files": []}
    except ValueError as exc:
        return [*found, f"record unreadable: {exc}"]
    entries = {f["path"]: f for f in record["files"]}
    for rel in ref.changed:
        data = now.get(rel)
        fixed = data is not None and data == ref.fixed[rel]
        if fixed and rel not in entries:
            found.append(f"{rel}: fixed but not recorded")
        elif fixed and (entries[rel]["sha256"] != hashlib.sha256(data).hexdigest()
                        or len(entries[rel]["edits"]) != ref.edits.get(rel, 0)):
            found.append(f"{rel}: record does not match the file")
        elif not fixed and rel in entries and data == ref.original[rel]:
            found.append(f"{rel}: original but recorded as fixed")
    return found


LEFT: list[str] = []  # what each fault left before recovery, for the summary


def left_by_fault(root: Path, ref: Reference) -> str:
    now = snapshot(root)
    fixed = sum(1 for rel in ref.changed if now.get(rel) == ref.fixed[rel])
    return f"{fixed}/{len(ref.changed)} fixed, {'journal' if (root / journal.JOURNAL_PATH).exists() else 'no journal'}"


def next_run_starts(root: Path) -> None:
    """What a writing `migrate fix` does first (api.fix): stale temporary files go, the journal is recovered."""
    sweep_stale_temps(root, tree_locked=True)
    journal.recover(root)


def after_fault(name: str, root: Path, ref: Reference, appended=None) -> list[str]:
    """Recover, check; then the next full run, check again (it must complete the migration)."""
    LEFT.append(left_by_fault(root, ref))
    next_run_starts(root)
    bad = [f"{name} after recovery: {v}" for v in violations(root, ref, appended)]
    run_fix(root)
    bad += [f"{name} after the next run: {v}" for v in violations(root, ref, appended)]
    if not appended and snapshot(root) != ref.fixed:
        bad.append(f"{name}: the next run did not finish the migration")
    return bad


def named_kills(work: Path, ref: Reference) -> tuple[int, list[str]]:
    points = ["journal", *(f"file:{n}" for n in range(1, len(ref.changed) + 1)), "written", "record"]
    bad = []
    for point in points:
        root = make_tree(work / f"named-{point.replace(':', '-')}")
        result = run_fix(root, MIGRATE_FAULT_AT=point)
        if result.returncode != -signal.SIGKILL:
            bad.append(f"kill at {point}: the run was not killed there (exit {result.returncode})")
        bad += after_fault(f"kill at {point}", root, ref)
    return len(points), bad


def timed_kills(work: Path, ref: Reference, count: int) -> tuple[int, list[str]]:
    bad = []
    for i in range(count):
        delay = ref.seconds * (i + 1) / (count + 1)
        root = make_tree(work / f"timed-{i}")
        proc = subprocess.Popen(fix_cmd(root), cwd=root, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        bad += after_fault(f"kill after {delay * 1000:.0f} ms", root, ref)
    return count, bad


def kills_in_the_write_phase(work: Path, ref: Reference, delays_ms: list[float]) -> tuple[int, list[str]]:
    """Killed t ms after the journal appears: inside the short window where files are being replaced."""
    bad = []
    for i, delay in enumerate(delays_ms):
        root = make_tree(work / f"write-phase-{i}")
        proc = subprocess.Popen(fix_cmd(root), cwd=root, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and not (root / journal.JOURNAL_PATH).exists():
            time.sleep(0.0005)
        time.sleep(delay / 1000)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        bad += after_fault(f"kill {delay} ms after the journal", root, ref)
    return len(delays_ms), bad


def concurrent_edits(work: Path, ref: Reference, rounds: int = 3) -> tuple[int, list[str]]:
    bad = []
    for i in range(rounds):
        root = make_tree(work / f"edit-{i}")
        target = ref.changed[i % len(ref.changed)]
        marks: list[bytes] = []
        stop = threading.Event()

        def writer(path=root / target, marks=marks, stop=stop):
            n = 0
            while not stop.is_set():
                line = f"# user edit {n}\n".encode()
                with open(path, "ab") as fh:  # as an editor's save would: the bytes change
                    fh.write(line)
                marks.append(line)
                n += 1
                time.sleep(0.005)

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        result = run_fix(root)
        stop.set()
        thread.join()
        data = (root / target).read_bytes()
        missing = [m for m in marks if m not in data]
        if missing:
            bad.append(f"edit {i}: {len(missing)} of the user's {len(marks)} lines in {target} lost")
        if data.startswith(ref.original[target]) and target not in result.stdout + result.stderr:
            bad.append(f"edit {i}: {target} was kept but not reported")
        next_run_starts(root)
        for v in violations(root, ref, {target: marks}):
            if not v.startswith(target):  # the edited file is neither by design
                bad.append(f"edit {i}: {v}")
    return rounds, bad


def disk_full(work: Path, ref: Reference, levels: list[int]) -> tuple[int, list[str]]:
    mount = Path(tempfile.mkdtemp(prefix="fault-tmpfs-"))
    size = sum(len(v) for v in ref.original.values()) * 3 + 2**20
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True)
    if proc.returncode != 0:
        print(f"disk full: skipped (mount -t tmpfs refused: {proc.stderr.decode().strip()})")
        mount.rmdir()
        return 0, []
    bad = []
    try:
        for free in levels:
            root = make_tree(mount / "t")
            ballast = mount / "ballast"
            stat = os.statvfs(mount)
            room = stat.f_bavail * stat.f_frsize
            fd = os.open(ballast, os.O_CREAT | os.O_WRONLY, 0o600)
            try:
                os.posix_fallocate(fd, 0, max(1, room - free))
            finally:
                os.close(fd)
            result = run_fix(root)
            ballast.unlink()  # the user frees space; the next run recovers
            bad += after_fault(f"disk full ({free} bytes free, exit {result.returncode})", root, ref)
            shutil.rmtree(root)
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True)
        mount.rmdir()
    return len(levels), bad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timed", type=int, default=12, help="timed kills spread over one fix (default 12)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fault-bench-") as tmp:
        work = Path(tmp)
        ref = Reference(work)
        print(f"tree: samples {', '.join(SAMPLES)}: {len(ref.original)} files, {len(ref.changed)} fixed, "
              f"{sum(ref.edits.values())} edits; one fix {ref.seconds:.2f} s")
        total = []
        for name, case in (("SIGKILL at named points", lambda: named_kills(work, ref)),
                           ("SIGKILL after t ms", lambda: timed_kills(work, ref, args.timed)),
                           ("SIGKILL t ms after the journal", lambda: kills_in_the_write_phase(
                               work, ref, [0, 0.5, 1, 2, 3, 5, 8, 12, 20, 40])),
                           ("concurrent edits", lambda: concurrent_edits(work, ref)),
                           ("disk full", lambda: disk_full(work, ref, [k * 4096 for k in (0, 1, 2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 64)]))):
            LEFT.clear()
            count, bad = case()
            print(f"{name}: {count} runs, {len(bad)} violations")
            if LEFT:
                tally = {state: LEFT.count(state) for state in dict.fromkeys(LEFT)}
                print("  left before recovery: " + "; ".join(f"{state} ×{n}" for state, n in tally.items()))
            for line in bad:
                print(f"  {line}")
            total += bad
    print(f"violations: {len(total)}")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
