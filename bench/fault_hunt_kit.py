"""What every case of `bench/fault_hunt.py` uses: running `migrate` under limits (as root or `nobody`),
building trees, reading outcomes."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECONDS, KILL_AFTER, ADDRESS_SPACE = 10.0, 30.0, 4 << 30
TRAIN = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"
NOBODY = 65534


class Skip(Exception):
    """The machine lacks what the case needs."""


@dataclass
class Run:
    code: int | None
    out: str
    seconds: float


@dataclass
class Result:
    violations: list[str] = field(default_factory=list)
    note: str = ""

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.violations.append(what)

    def check(self, run: Run, codes: tuple[int, ...] = (0, 1), names: str = "", label: str = "") -> None:
        """The common checks of one migrate run."""
        pre = f"{label}: " if label else ""
        self.expect(run.code in codes, f"{pre}exit {run.code} (expected {'/'.join(map(str, codes))})")
        self.expect("Traceback" not in run.out and "internal error" not in run.out.lower(),
                    f"{pre}a traceback or internal error")
        self.expect(run.seconds <= SECONDS, f"{pre}took {run.seconds:.1f} s")
        if names:
            self.expect(names in run.out, f"{pre}the output does not name {names!r}")
        self.note = self.note or f"exit {run.code}, {run.seconds:.2f} s"


# --- helpers ---------------------------------------------------------------------------------------

def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def env(tmp: Path, **extra: str) -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(REPO), "MIGRATE_CACHE_DIR": str(tmp / "cache"), **extra}
    out.pop("FORCE_COLOR", None)
    return out


# The interpreter may live under a 0700 /root (pyenv): in a private mount namespace, a 0755 tmpfs goes over
# /root with the interpreter's folder bound back in, then setpriv drops to the user. Nothing outside changes.
AS_USER = """set -e
real=$(readlink -f "$1"); hold=$(mktemp -d)
case "$real" in /root/*) top=${real%%/bin/*}; top=${top%/versions/*}
  mount --bind "$top" "$hold"; mount -t tmpfs -o mode=755 none /root; mkdir -p "$top"; mount --bind "$hold" "$top";;
esac
exec setpriv --reuid=$UID_TO --regid=$UID_TO --clear-groups "$@"
"""


def as_user(cmd: list[str], uid: int | None) -> list[str]:
    if uid is None:
        return cmd
    need("setpriv", "unshare")
    return ["env", f"UID_TO={uid}", "unshare", "-m", "--propagation", "private", "bash", "-c", AS_USER, "bash", *cmd]


def migrate(tmp: Path, *args: str | Path, cwd: Path | None = None, uid: int | None = None,
            limit: bool = True, timeout: float = KILL_AFTER, **extra: str) -> Run:
    cmd = as_user([sys.executable, "-m", "migrator", *map(str, args)], uid)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd or tmp, env=env(tmp, **extra), capture_output=True, text=True,
                              errors="replace", timeout=timeout, stdin=subprocess.DEVNULL,
                              preexec_fn=_limit if limit else None)
        return Run(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        return Run(None, out.decode(errors="replace") if isinstance(out, bytes) else out, time.monotonic() - t0)


def tree(base: Path, files: dict[str, str | bytes] | None = None) -> Path:
    root = base / "tree"
    root.mkdir(parents=True, exist_ok=True)
    for rel, body in (files or {"train.py": TRAIN}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body if isinstance(body, bytes) else body.encode())
    if not (root / "pyproject.toml").exists():
        (root / "pyproject.toml").write_text("[project]\nname = 't'\n")
    return root


def fixed_once(data: bytes) -> bool:
    return b".cuda()" not in data and data.count(b".npu()") == 1 and data.count(b"import torch_npu") <= 1


def fixed_or_unchanged(res: Result, path: Path, before: bytes, label: str = "") -> bool:
    """True when fixed; a violation when neither the original nor fixed once."""
    data = path.read_bytes() if path.is_file() else None
    if data is None:
        res.violations.append(f"{label or path.name}: gone or not a file")
        return False
    res.expect(data == before or fixed_once(data), f"{label or path.name}: neither unchanged nor fixed once")
    return data != before


def outside_unchanged(res: Result, sentinel: Path, before: bytes) -> None:
    res.expect(sentinel.read_bytes() == before, f"{sentinel.name} outside the root was written")


def temps_left(root: Path) -> list[str]:
    return [p.name for p in root.rglob("*.migrate-tmp")]


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def need(*tools: str) -> None:
    for tool in tools:
        if not shutil.which(tool):
            raise Skip(f"{tool} is not installed")


def private_mount(tmp: Path, script: str) -> subprocess.CompletedProcess:
    """Run a bash script in a private mount namespace (unshare -m): its mounts vanish with it. $PY runs migrate."""
    need("unshare", "mount")
    probe = sh(["unshare", "-m", "--propagation", "private", "true"])
    if probe.returncode:
        raise Skip(f"unshare -m refused: {probe.stderr.strip()[:80]}")
    return subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", script], capture_output=True,
                          text=True, errors="replace", env=env(tmp, PY=sys.executable), cwd=tmp, timeout=120)


def ns_runs(proc: subprocess.CompletedProcess) -> list[Run]:
    """The `exit=N seconds=S` lines a private_mount script printed after each migrate call."""
    runs, chunk = [], []
    for line in proc.stdout.splitlines():
        if line.startswith("exit=") and " seconds=" in line:
            code, secs = line[5:].split(" seconds=")
            runs.append(Run(int(code), "\n".join(chunk) + proc.stderr, float(secs)))
            chunk = []
        else:
            chunk.append(line)
    return runs


MIG = 'S=$(date +%s%N); "$PY" -m migrator'
END = '; echo "exit=$? seconds=$(( ($(date +%s%N) - S) / 1000000 ))e-3"'
