#!/usr/bin/env python3
"""Hostile or unusual environments (issue 38): every numbered case of the issue plus new ones.

    python3 bench/fault_hunt.py            # every case; one line per case, then cases, violations, time
    python3 bench/fault_hunt.py -k fifo    # the cases whose name holds "fifo"

Each case builds a small tree in a temporary folder (under /dev/shm where the case is about it) and
runs `python -m migrator ...` on it in a subprocess (4 GiB address-space limit, killed after 30 s),
as root or, where it matters, as the unprivileged user `nobody` (`setpriv`). A case is a violation
when a file is neither unchanged nor fixed once, the exit code is not the expected one, the output
holds a traceback or "internal error", a file that was not fixed is not named, a run takes over 10 s,
or anything outside the root is written. Cases that need what this machine lacks (a private mount
namespace, a loop device, mkfs.vfat, setfacl) print SKIP with the reason. Figures are printed, never
asserted; exit 0 always.
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

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


# --- the numbered cases --------------------------------------------------------------------

def shm_fix_twice(tmp: Path) -> Result:
    """1: a tree under /dev/shm fixed twice: fixed once, the second run changes nothing."""
    res = Result()
    root = tree(tmp)
    before = (root / "train.py").read_bytes()
    res.check(migrate(tmp, "fix", root, "--no-cache", "-q"), label="first fix")
    first = (root / "train.py").read_bytes()
    res.expect(fixed_once(first), "train.py not fixed once by the first fix")
    res.check(migrate(tmp, "fix", root, "--no-cache", "-q"), label="second fix")
    res.expect((root / "train.py").read_bytes() == first, "the second fix changed train.py")
    res.expect(first != before, "train.py unchanged")
    return res


def shm_scan_out_twice(tmp: Path) -> Result:
    """1: `scan -o` to a file under /dev/shm twice: the same bytes, not appended."""
    res = Result()
    root, out = tree(tmp), tmp / "scan.json"
    res.check(migrate(tmp, "scan", root, "--no-cache", "-o", out), label="first scan")
    size = out.stat().st_size
    res.check(migrate(tmp, "scan", root, "--no-cache", "-o", out), label="second scan")
    res.expect(out.stat().st_size == size, f"scan.json grew {size} -> {out.stat().st_size} bytes")
    return res


def shm_fix_out_twice(tmp: Path) -> Result:
    """1: `fix --out` into /dev/shm twice: the copy fixed once."""
    res = Result()
    root = tree(tmp / "src")
    for label in ("first", "second"):
        shutil.rmtree(tmp / "out", ignore_errors=True)
        res.check(migrate(tmp, "fix", root, "--no-cache", "-q", "--out", tmp / "out"), label=f"{label} fix --out")
        res.expect(fixed_once((tmp / "out/train.py").read_bytes()), f"{label}: out/train.py not fixed once")
    return res


def _acl_xattr_setgid(tmp: Path, uid: int | None) -> Result:
    """2: ACL + xattr + setgid (another owner) kept after fix."""
    need("setfacl", "getfacl", "setfattr", "getfattr")
    res = Result()
    tmp.chmod(0o755)
    root = tree(tmp)
    path = root / "train.py"
    owner = NOBODY if uid is not None else 1
    os.chown(path, owner, NOBODY)
    os.chown(root, NOBODY if uid is not None else 0, NOBODY)
    path.chmod(0o2755)
    if sh(["setfacl", "-m", "u:daemon:---,u:bin:r--", str(path)]).returncode:
        raise Skip("setfacl refused on this filesystem")
    if sh(["setfattr", "-n", "user.note", "-v", "keep", str(path)]).returncode:
        raise Skip("user xattrs refused on this filesystem")
    acl = sh(["getfacl", "-cp", str(path)]).stdout
    (tmp / "cache").mkdir(mode=0o777)
    run = migrate(tmp, "fix", root, "--no-cache", uid=uid, cwd=root)
    fixed = fixed_or_unchanged(res, path, TRAIN.encode())
    res.check(run, codes=(0, 1, 2), names="" if fixed else "train.py")
    res.note += ", train.py " + ("fixed" if fixed else "refused")
    st = path.stat()
    res.expect(stat.S_IMODE(st.st_mode) == 0o2755, f"mode {oct(stat.S_IMODE(st.st_mode))} (was 0o2755)")
    res.expect((st.st_uid, st.st_gid) == (owner, NOBODY), f"owner {st.st_uid}:{st.st_gid}")
    res.expect(sh(["getfacl", "-cp", str(path)]).stdout == acl, "the ACL changed")
    res.expect(sh(["getfattr", "--only-values", "-n", "user.note", str(path)]).stdout == "keep", "xattr lost")
    return res


def acl_xattr_setgid_root(tmp: Path) -> Result:
    return _acl_xattr_setgid(tmp, None)


def acl_xattr_setgid_user(tmp: Path) -> Result:
    return _acl_xattr_setgid(tmp, NOBODY)


def hard_link_outside(tmp: Path) -> Result:
    """2: a file hard-linked to one outside the root: refused per file (named), both names unchanged."""
    res = Result()
    root = tree(tmp, {"train.py": TRAIN, "other.py": TRAIN})
    outside = tmp / "outside.py"
    os.link(root / "train.py", outside)
    before = outside.read_bytes()
    res.check(migrate(tmp, "fix", root, "--no-cache"), codes=(0, 1, 2), names="train.py")  # refused per file
    outside_unchanged(res, outside, before)
    res.expect(fixed_once((root / "other.py").read_bytes()), "other.py not fixed (one file stopped the others)")
    return res


def non_utf8_name(tmp: Path) -> Result:
    """3: a file name that is not UTF-8: both files fixed, the run goes on."""
    res = Result()
    root = tree(tmp)
    odd = os.path.join(os.fsencode(root), b"caf\xe9.py")
    with open(odd, "wb") as fh:
        fh.write(TRAIN.encode())
    res.check(migrate(tmp, "fix", root, "--no-cache", "-q"))
    with open(odd, "rb") as fh:
        res.expect(fixed_once(fh.read()), "caf\\xe9.py not fixed")
    res.expect(fixed_once((root / "train.py").read_bytes()), "train.py not fixed")
    res.check(migrate(tmp, "report", root, "--no-cache", "-o", tmp / "r.md"), label="report")
    return res


def _fifo_git(tmp: Path, where: str) -> Result:
    res = Result()
    root = tree(tmp)
    sh(["git", "init", "-q", str(root)])
    sh(["git", "-C", str(root), "add", "."])
    target = root / where
    if where == "excludes":
        sh(["git", "-C", str(root), "config", "core.excludesFile", str(tmp / "excludes")])
        target = tmp / "excludes"
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    res.check(migrate(tmp, "scan", root, "--no-cache"), names="train.py")
    return res


def fifo_git_index(tmp: Path) -> Result:
    """4: a FIFO at .git/index: scan ends in seconds."""
    return _fifo_git(tmp, ".git/index")


def fifo_git_head(tmp: Path) -> Result:
    """4: a FIFO at .git/HEAD."""
    return _fifo_git(tmp, ".git/HEAD")


def fifo_excludes(tmp: Path) -> Result:
    """4: a FIFO named by core.excludesFile."""
    return _fifo_git(tmp, "excludes")


def fifo_journal(tmp: Path) -> Result:
    """4: a FIFO at .migrate/fix-journal.json: fix ends (exit 2 naming it, or goes on), never hangs."""
    res = Result()
    root = tree(tmp)
    (root / ".migrate").mkdir()
    os.mkfifo(root / ".migrate/fix-journal.json")
    before = (root / "train.py").read_bytes()
    res.check(migrate(tmp, "fix", root, "--no-cache"), codes=(0, 1, 2), names="fix-journal.json")
    fixed_or_unchanged(res, root / "train.py", before)
    return res


def scan_out_onto_source(tmp: Path) -> Result:
    """5: `scan -o` onto a scanned source: exit 2, the source unchanged."""
    res = Result()
    root = tree(tmp)
    before = (root / "train.py").read_bytes()
    res.check(migrate(tmp, "scan", root, "--no-cache", "-o", root / "train.py"), codes=(2,), names="train.py")
    res.expect((root / "train.py").read_bytes() == before, "train.py overwritten")
    return res


def scan_out_onto_record(tmp: Path) -> Result:
    """5: `scan -o .migrate/fix-record.json`: exit 2, the record unchanged."""
    res = Result()
    root = tree(tmp)
    migrate(tmp, "fix", root, "--no-cache", "-q")
    record = root / ".migrate/fix-record.json"
    before = record.read_bytes()
    res.check(migrate(tmp, "scan", root, "--no-cache", "-o", record), codes=(2,), names="fix-record.json")
    res.expect(record.read_bytes() == before, "the fix record overwritten")
    return res


def _hook(hook_id: str) -> list[str]:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    return [*shlex.split(hooks[hook_id]["entry"])[1:], *hooks[hook_id].get("args", [])]


def hook_dash_name(tmp: Path) -> Result:
    """6: a staged file named `-osetup.py` (and `--out=x.py`) through both hook commands."""
    res = Result()
    setup = "from setuptools import setup\nsetup()\n"
    root = tree(tmp, {"setup.py": setup, "-osetup.py": TRAIN, "--out=x.py": TRAIN})
    res.check(migrate(tmp, *_hook("migrate-scan"), "-osetup.py", "setup.py", cwd=root), names="-osetup.py",
              label="scan hook")
    res.expect((root / "setup.py").read_text() == setup, "setup.py overwritten by the scan hook")
    res.check(migrate(tmp, *_hook("migrate-fix"), "--out=x.py", "-osetup.py", cwd=root), label="fix hook")
    res.expect(not (root / "x.py").exists(), "the fix hook wrote x.py")
    res.expect(fixed_once((root / "-osetup.py").read_bytes()), "-osetup.py not fixed")
    return res


def no_record_live_temp(tmp: Path) -> Result:
    """7: `fix --no-record` next to another writer's live temp (pid-stamped, flocked): the temp survives."""
    res = Result()
    root = tree(tmp)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl,os,sys,time\n"
        f"p=os.path.join({str(root)!r}, '.train.py.%d-abcd1234.migrate-tmp' % os.getpid())\n"
        "fd=os.open(p,os.O_CREAT|os.O_WRONLY,0o600); fcntl.flock(fd,fcntl.LOCK_EX); print(p,flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        live = Path(holder.stdout.readline().strip())
        res.check(migrate(tmp, "fix", root, "--no-cache", "-q", "--no-record"))
        res.expect(live.exists(), "the live temp of another writer was swept")
        res.expect(fixed_once((root / "train.py").read_bytes()), "train.py not fixed")
    finally:
        holder.kill()
        holder.wait()
    return res


def validate_markdown_script(tmp: Path) -> Result:
    """8: `validate --markdown` of a program whose error holds `<script>`: escaped, exit 1/2."""
    res = Result()
    root = tree(tmp, {"train.py": "import torch\nraise RuntimeError('boom <script>alert(1)</script>')\n"})
    md = tmp / "v.md"
    run = migrate(tmp, "validate", root, "--script", "train.py", "--stages", "S1", "--markdown", md, limit=False,
                  timeout=180)
    res.check(run, codes=(1, 2))
    text = md.read_text() if md.exists() else ""
    res.expect("<script>" not in text, "raw <script> in the markdown")
    res.expect("script" in text, "the error text is not in the markdown")
    res.violations = [v for v in res.violations if not v.startswith("took")]  # torch in two children
    return res


def lone_cr(tmp: Path) -> Result:
    """8: a file ending in a lone CR: fixed, the CR kept."""
    res = Result()
    root = tree(tmp, {"train.py": TRAIN.rstrip("\n").encode() + b"\r"})
    res.check(migrate(tmp, "fix", root, "--no-cache", "-q"))
    data = (root / "train.py").read_bytes()
    res.expect(fixed_once(data), "train.py not fixed")
    res.expect(data.endswith(b"\r"), "the final CR dropped")
    return res


def fix_out_the_tree(tmp: Path) -> Result:
    """8: `fix --out <the tree>` and `--out <inside the tree>`: usage error (2), nothing written."""
    res = Result()
    root = tree(tmp)
    before = (root / "train.py").read_bytes()
    res.check(migrate(tmp, "fix", root, "--no-cache", "--out", root), codes=(2,), names="--out", label="onto")
    res.check(migrate(tmp, "fix", root, "--no-cache", "--out", root / "sub"), codes=(2,), names="--out",
              label="into")
    res.expect((root / "train.py").read_bytes() == before, "train.py changed")
    res.expect(not (root / "sub").exists(), "sub/ made inside the tree")
    return res


def ctrl_c_early(tmp: Path) -> Result:
    """8: Ctrl-C (SIGINT) 0.05 s after start: "interrupted", exit 130, no traceback."""
    res = Result()
    root = tree(tmp)
    codes = []
    for delay in (0.05, 0.05, 0.1):
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "migrator", "fix", str(root), "--no-cache"], cwd=tmp,
                                env=env(tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out = proc.communicate(timeout=KILL_AFTER)[0]
        run = Run(proc.returncode, out, time.monotonic() - t0)
        codes.append(str(run.code))
        if run.code != 0:  # a run that finished before the signal is fine
            res.check(run, codes=(130,), names="interrupted", label=f"SIGINT at {delay} s")
        fixed_or_unchanged(res, root / "train.py", TRAIN.encode())
    res.note = f"exits {','.join(codes)}"
    return res


def record_nul_path(tmp: Path) -> Result:
    """8: a fix record whose path holds a NUL byte: exit 2 before any file is written."""
    res = Result()
    root = tree(tmp)
    (root / ".migrate").mkdir()
    (root / ".migrate/fix-record.json").write_text(
        '{"version": 1, "files": [{"path": "a\\u0000b.py", "sha256": "00", "edits": []}]}')
    res.check(migrate(tmp, "fix", root, "--no-cache"), codes=(2,), names="fix-record.json")
    res.expect((root / "train.py").read_bytes() == TRAIN.encode(), "train.py written before the refusal")
    return res


def clean_env(tmp: Path) -> Result:
    """9: `validate --clean-env`: a token in our environment is not in the program's."""
    res = Result()
    seen = tmp / "seen.txt"
    seen.touch(mode=0o666)
    prog = f"import os\nopen({str(seen)!r}, 'a').write(os.environ.get('AWS_SECRET_ACCESS_KEY', '-') + '\\n')\n"
    root = tree(tmp, {"train.py": prog + "import torch\n"})
    run = migrate(tmp, "validate", root, "--script", "train.py", "--stages", "S1", "--clean-env", limit=False,
                  timeout=180, AWS_SECRET_ACCESS_KEY="SECRET-38")
    res.check(run, codes=(0, 1, 2))
    res.violations = [v for v in res.violations if not v.startswith("took")]
    res.expect("SECRET-38" not in seen.read_text(), "the program saw AWS_SECRET_ACCESS_KEY")
    res.expect(bool(seen.read_text().strip()), "the program never ran")
    return res


# --- new cases -------------------------------------------------------------------------------------

def _ns_fix_twice(tmp: Path, mount: str, label: str) -> Result:
    """Mount in a private namespace, copy the tree in, fix twice, copy it back out."""
    res = Result()
    src = tree(tmp / "src")
    (tmp / "mnt").mkdir()
    proc = private_mount(tmp, f"set -u; {mount} || exit 77; cp -a {src} {tmp}/mnt/tree; "
                              f"{MIG} fix {tmp}/mnt/tree --no-cache -q{END}; {MIG} fix {tmp}/mnt/tree --no-cache -q{END}; "
                              f"cp -a {tmp}/mnt/tree {tmp}/back")
    if proc.returncode == 77:
        raise Skip(f"{label} mount refused: {proc.stderr.strip()[:80]}")
    runs = ns_runs(proc)
    res.expect(len(runs) == 2, f"the namespace script ran {len(runs)} fix(es): {proc.stderr[-200:]}")
    for i, run in enumerate(runs):
        res.check(run, label=f"fix {i + 1}")
    if (tmp / "back/train.py").exists():
        res.expect(fixed_once((tmp / "back/train.py").read_bytes()), "train.py not fixed once")
    return res


def tmpfs_mount(tmp: Path) -> Result:
    """Another tmpfs (mount -t tmpfs in a private namespace): fixed once over two runs."""
    return _ns_fix_twice(tmp, f"mount -t tmpfs none {tmp}/mnt", "tmpfs")


def bind_mount(tmp: Path) -> Result:
    """A bind mount of the tree: fixed once, through the bind, in the real folder."""
    res = Result()
    src = tree(tmp / "src")
    (tmp / "mnt").mkdir()
    proc = private_mount(tmp, f"mount --bind {src} {tmp}/mnt || exit 77; "
                              f"{MIG} fix {tmp}/mnt --no-cache -q{END}; {MIG} fix {tmp}/mnt --no-cache -q{END}")
    if proc.returncode == 77:
        raise Skip(f"bind mount refused: {proc.stderr.strip()[:80]}")
    for i, run in enumerate(ns_runs(proc)):
        res.check(run, label=f"fix {i + 1}")
    res.expect(fixed_once((src / "train.py").read_bytes()), "train.py not fixed once")
    return res


def readonly_mount(tmp: Path) -> Result:
    """A read-only bind mount: fix exits 0/1/2 naming the file, nothing changed, no temp."""
    res = Result()
    src = tree(tmp / "src")
    (tmp / "mnt").mkdir()
    proc = private_mount(tmp, f"mount --bind {src} {tmp}/mnt && mount -o remount,bind,ro {tmp}/mnt || exit 77; "
                              f"{MIG} fix {tmp}/mnt --no-cache{END}")
    if proc.returncode == 77:
        raise Skip(f"read-only remount refused: {proc.stderr.strip()[:80]}")
    runs = ns_runs(proc)
    res.expect(len(runs) == 1, "fix did not run")
    for run in runs:
        res.check(run, codes=(0, 1, 2), names=f"{tmp}/mnt")  # the tree (its .migrate/) or the file
    res.expect((src / "train.py").read_bytes() == TRAIN.encode(), "train.py changed on a read-only mount")
    return res


def full_tmpfs(tmp: Path) -> Result:
    """A small full tmpfs (size=): each file unchanged or fixed, no temp left, the unfixed file named."""
    res = Result()
    big = TRAIN + "# pad\n" * 9000  # ~54 kB: the temp copy does not fit beside it
    src = tree(tmp / "src", {"train.py": big, "small.py": TRAIN})
    (tmp / "mnt").mkdir()
    proc = private_mount(tmp, f"mount -t tmpfs -o size=96k none {tmp}/mnt || exit 77; cp -a {src} {tmp}/mnt/tree "
                              f"|| exit 78; {MIG} fix {tmp}/mnt/tree --no-cache{END}; "
                              f"df -k {tmp}/mnt | tail -1; cp -a {tmp}/mnt/tree {tmp}/back")
    if proc.returncode in (77, 78):
        raise Skip(f"tmpfs size= mount or copy refused: {proc.stderr.strip()[:80]}")
    runs = ns_runs(proc)
    res.expect(len(runs) == 1, "fix did not run")
    back = tmp / "back"
    for run in runs:
        unfixed = not fixed_once((back / "train.py").read_bytes())
        res.check(run, codes=(0, 1, 2), names="train.py" if unfixed else "")
        res.note += ", train.py " + ("unchanged" if unfixed else "fixed")
    fixed_or_unchanged(res, back / "train.py", big.encode())
    fixed_or_unchanged(res, back / "small.py", TRAIN.encode())
    res.expect(not temps_left(back), f"temp files left: {temps_left(back)}")
    return res


def fat_image(tmp: Path) -> Result:
    """A tree on a FAT image (case-insensitive, no modes/owners): fixed once over two runs."""
    need("mkfs.vfat")
    img = tmp / "fat.img"
    with open(img, "wb") as fh:
        fh.truncate(8 << 20)
    if sh(["mkfs.vfat", str(img)]).returncode:
        raise Skip("mkfs.vfat failed")
    return _ns_fix_twice(tmp, f"mount -o loop {img} {tmp}/mnt", "FAT loop")


def readonly_folder_user(tmp: Path) -> Result:
    """As nobody, a folder nobody may write (root's, 0755): unchanged, named, exit 0/1/2, no traceback."""
    res = Result()
    tmp.chmod(0o755)
    root = tree(tmp)
    (tmp / "cache").mkdir(mode=0o777)
    res.check(migrate(tmp, "fix", root, "--no-cache", uid=NOBODY, cwd=tmp), codes=(0, 1, 2), names=str(root))
    res.expect((root / "train.py").read_bytes() == TRAIN.encode(), "train.py changed")
    return res


def readonly_folder_root(tmp: Path) -> Result:
    """As root, a chmod 555 folder and a 444 file: written (root may), the modes kept."""
    res = Result()
    root = tree(tmp)
    (root / "train.py").chmod(0o444)
    root.chmod(0o555)
    try:
        res.check(migrate(tmp, "fix", root, "--no-cache", "-q"))
        mode = stat.S_IMODE((root / "train.py").stat().st_mode)
        res.expect(mode == 0o444, f"file mode {oct(mode)} (was 0o444)")
        res.expect(stat.S_IMODE(root.stat().st_mode) == 0o555, "folder mode changed")
        fixed_or_unchanged(res, root / "train.py", TRAIN.encode())
    finally:
        root.chmod(0o755)
    return res


def unreadable_file_user(tmp: Path) -> Result:
    """As nobody, a file with mode 000 in a tree: scan and fix name it, the other file fixed."""
    res = Result()
    tmp.chmod(0o755)
    root = tree(tmp, {"train.py": TRAIN, "secret.py": TRAIN})
    os.chown(root, NOBODY, NOBODY)
    for p in root.iterdir():
        os.chown(p, NOBODY, NOBODY)
    (root / "secret.py").chmod(0)
    (tmp / "cache").mkdir(mode=0o777)
    res.check(migrate(tmp, "scan", root, "--no-cache", uid=NOBODY), names="secret.py", label="scan")
    res.check(migrate(tmp, "fix", root, "--no-cache", uid=NOBODY, cwd=root), codes=(0, 1, 2), names="secret.py",
              label="fix")
    res.expect((root / "secret.py").read_bytes() == TRAIN.encode(), "secret.py changed")
    res.expect(fixed_once((root / "train.py").read_bytes()), "train.py not fixed")
    return res


RACER = """
import os, sys, time
path, stop, mode = sys.argv[1], sys.argv[2], sys.argv[3]
aside = path + ".aside"
while not os.path.exists(stop):
    if mode == "dir":  # the file becomes a folder for a moment
        os.rename(path, aside); os.mkdir(path); time.sleep(0.0005); os.rmdir(path); os.rename(aside, path)
    else:  # a symlink swapped between an in-root target and one outside
        tmp = path + ".new"; os.symlink(sys.argv[4], tmp); os.replace(tmp, path)
        time.sleep(0.0005)
        tmp = path + ".new"; os.symlink(sys.argv[5], tmp); os.replace(tmp, path)
    time.sleep(0.0005)
"""


def _race(tmp: Path, root: Path, argv: list[str], tries: int) -> list[Run]:
    runs = []
    for i in range(tries):
        stop = tmp / f"stop{i}"
        racer = subprocess.Popen([sys.executable, "-c", RACER, *argv[:1], str(stop), *argv[1:]])
        time.sleep(0.05 * i)
        runs.append(migrate(tmp, "fix", root, "--no-cache"))
        stop.touch()
        racer.wait(timeout=10)
    return runs


def file_becomes_folder(tmp: Path) -> Result:
    """A file replaced by a folder (and back) while fix runs, raced by a subprocess: fixed or unchanged."""
    res = Result()
    root = tree(tmp, {"train.py": TRAIN, "other.py": TRAIN})
    runs = _race(tmp, root, [str(root / "train.py"), "dir"], tries=4)
    for i, run in enumerate(runs):
        res.check(run, codes=(0, 1, 2), label=f"try {i}")
    fixed_or_unchanged(res, root / "train.py", TRAIN.encode())
    res.expect(fixed_once((root / "other.py").read_bytes()), "other.py not fixed")
    res.expect(not temps_left(root), f"temp files left: {temps_left(root)}")
    res.note = f"exits {','.join(str(r.code) for r in runs)}"
    return res


def symlink_swapped(tmp: Path) -> Result:
    """An in-root symlink swapped between an in-root file and one outside while fix runs: outside untouched."""
    res = Result()
    root = tree(tmp, {"a.py": TRAIN})
    outside = tmp / "outside.py"
    outside.write_text(TRAIN)
    os.symlink("a.py", root / "link.py")
    runs = _race(tmp, root, [str(root / "link.py"), "link", "a.py", str(outside)], tries=4)
    for i, run in enumerate(runs):
        res.check(run, codes=(0, 1, 2), label=f"try {i}")
    outside_unchanged(res, outside, TRAIN.encode())
    fixed_or_unchanged(res, root / "a.py", TRAIN.encode())
    res.expect(not temps_left(root), f"temp files left: {temps_left(root)}")
    res.note = f"exits {','.join(str(r.code) for r in runs)}"
    return res


def case_collision(tmp: Path) -> Result:
    """Two names differing only in case (Train.py, train.py): each fixed once, neither takes the other's text."""
    res = Result()
    root = tree(tmp, {"train.py": TRAIN, "Train.py": "# upper\n" + TRAIN})
    res.check(migrate(tmp, "fix", root, "--no-cache", "-q"))
    upper, lower = (root / "Train.py").read_bytes(), (root / "train.py").read_bytes()
    res.expect(fixed_once(upper) and upper.startswith(b"# upper"), "Train.py not fixed once or lost its text")
    res.expect(fixed_once(lower) and b"# upper" not in lower, "train.py not fixed once or took Train.py's text")
    return res


def long_name(tmp: Path) -> Result:
    """A 250-byte file name (its temp name passes NAME_MAX): fixed, or refused naming it."""
    res = Result()
    name = "m" * 247 + ".py"
    root = tree(tmp, {name: TRAIN, "train.py": TRAIN})
    run = migrate(tmp, "fix", root, "--no-cache")
    fixed = fixed_or_unchanged(res, root / name, TRAIN.encode(), "the 250-byte name")
    res.check(run, codes=(0, 1, 2), names="" if fixed else "m" * 40)
    res.expect(fixed_once((root / "train.py").read_bytes()), "train.py not fixed")
    res.note += ", long name " + ("fixed" if fixed else "unchanged")
    return res


def long_path(tmp: Path) -> Result:
    """A path of ~4000 bytes (near PATH_MAX): fixed, or refused naming it; the run goes on."""
    res = Result()
    depth = (3990 - len(str(tmp))) // 201
    rel = "/".join(["d" * 200] * depth) + "/deep.py"
    root = tree(tmp, {rel: TRAIN, "train.py": TRAIN})
    run = migrate(tmp, "fix", root, "--no-cache")
    fixed = fixed_or_unchanged(res, root / rel, TRAIN.encode(), "deep.py")
    res.check(run, codes=(0, 1, 2), names="" if fixed else "deep.py")
    res.expect(fixed_once((root / "train.py").read_bytes()), "train.py not fixed")
    res.note += f", {len(str(root / rel))}-byte path " + ("fixed" if fixed else "unchanged")
    return res


def socket_in_tree(tmp: Path) -> Result:
    """A UNIX socket named train2.py and one at .migrate/fix-record.json: scan and fix end, no hang."""
    res = Result()
    root = tree(tmp)
    (root / ".migrate").mkdir()
    socks = []
    for rel in ("train2.py", ".migrate/fix-record.json"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(root / rel))
        s.listen()
        socks.append(s)
    try:
        res.check(migrate(tmp, "scan", root, "--no-cache"), names="train.py", label="scan")
        run = migrate(tmp, "fix", root, "--no-cache")
        res.check(run, codes=(0, 1, 2), label="fix")
        res.expect(stat.S_ISSOCK((root / ".migrate/fix-record.json").lstat().st_mode), "the socket replaced")
        fixed_or_unchanged(res, root / "train.py", TRAIN.encode())
    finally:
        for s in socks:
            s.close()
    return res


def tmpdir_shm_validate_copy(tmp: Path) -> Result:
    """`fix --out` under TMPDIR=/dev/shm with a second tree copied in between: each copy fixed once."""
    res = Result()
    root = tree(tmp / "src", {"train.py": TRAIN, "pkg/mod.py": TRAIN})
    out = Path(tempfile.mkdtemp(dir="/dev/shm", prefix="hunt-out-")) / "o"
    try:
        for i in range(2):
            shutil.rmtree(out, ignore_errors=True)
            res.check(migrate(tmp, "fix", root, "--no-cache", "-q", "--out", out, TMPDIR="/dev/shm"), label=f"{i}")
            for rel in ("train.py", "pkg/mod.py"):
                res.expect(fixed_once((out / rel).read_bytes()), f"{rel} not fixed once in the copy")
        res.expect((root / "train.py").read_bytes() == TRAIN.encode(), "the source changed")
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)
    return res


@dataclass
class Case:
    name: str
    item: str  # the item, or "new"
    run: Callable[[Path], Result]
    shm: bool = False  # the temp folder under /dev/shm


CASES = [
    Case("shm-fix-twice", "1", shm_fix_twice, shm=True),
    Case("shm-scan-out-twice", "1", shm_scan_out_twice, shm=True),
    Case("shm-fix-out-twice", "1", shm_fix_out_twice, shm=True),
    Case("acl-xattr-setgid-root", "2", acl_xattr_setgid_root),
    Case("acl-xattr-setgid-user", "2", acl_xattr_setgid_user),
    Case("hard-link-outside", "2", hard_link_outside),
    Case("non-utf8-name", "3", non_utf8_name),
    Case("fifo-git-index", "4", fifo_git_index),
    Case("fifo-git-head", "4", fifo_git_head),
    Case("fifo-excludes", "4", fifo_excludes),
    Case("fifo-journal", "4", fifo_journal),
    Case("scan-out-onto-source", "5", scan_out_onto_source),
    Case("scan-out-onto-record", "5", scan_out_onto_record),
    Case("hook-dash-name", "6", hook_dash_name),
    Case("no-record-live-temp", "7", no_record_live_temp),
    Case("validate-markdown-script", "8", validate_markdown_script),
    Case("lone-cr", "8", lone_cr),
    Case("fix-out-the-tree", "8", fix_out_the_tree),
    Case("ctrl-c-early", "8", ctrl_c_early),
    Case("record-nul-path", "8", record_nul_path),
    Case("clean-env", "9", clean_env),
    Case("tmpfs-mount", "new", tmpfs_mount),
    Case("bind-mount", "new", bind_mount),
    Case("readonly-mount", "new", readonly_mount),
    Case("full-tmpfs", "new", full_tmpfs),
    Case("fat-image", "new", fat_image),
    Case("readonly-folder-user", "new", readonly_folder_user),
    Case("readonly-folder-root", "new", readonly_folder_root),
    Case("unreadable-file-user", "new", unreadable_file_user),
    Case("file-becomes-folder", "new", file_becomes_folder),
    Case("symlink-swapped", "new", symlink_swapped),
    Case("case-collision", "new", case_collision),
    Case("long-name", "new", long_name),
    Case("long-path", "new", long_path),
    Case("socket-in-tree", "new", socket_in_tree),
    Case("tmpdir-shm-fix-out", "new", tmpdir_shm_validate_copy),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only the cases whose name holds this")
    args = parser.parse_args()
    t0 = time.monotonic()
    ran = bad = skipped = 0
    for case in CASES:
        if args.k not in case.name:
            continue
        tmp = Path(tempfile.mkdtemp(prefix="fault-hunt-", dir="/dev/shm" if case.shm else None))
        started = time.monotonic()
        try:
            res = case.run(tmp)
            line = "OK" if not res.violations else "VIOLATION: " + "; ".join(res.violations)
            ran += 1
            bad += bool(res.violations)
        except Skip as exc:
            res, line = Result(), f"SKIP: {exc}"
            skipped += 1
        except Exception as exc:  # the bench's own failure is a finding too, not a crash
            res, line = Result(), f"VIOLATION: bench error {type(exc).__name__}: {exc}"
            ran += 1
            bad += 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{case.name:26} {case.item:>3} {time.monotonic() - started:6.2f} s  {line}"
              + (f"  [{res.note}]" if res.note else ""), flush=True)
    print(f"{ran} case(s) run, {skipped} skipped, {bad} with violations, {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
