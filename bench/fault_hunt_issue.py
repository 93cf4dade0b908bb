"""The cases of issue 38's numbered items, for `bench/fault_hunt.py`."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import yaml
from fault_hunt_kit import (
    KILL_AFTER,
    NOBODY,
    REPO,
    TRAIN,
    Result,
    Run,
    Skip,
    env,
    fixed_once,
    fixed_or_unchanged,
    migrate,
    need,
    outside_unchanged,
    sh,
    tree,
)

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
                                env=env(tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                # a bench started in the background (`cmd &`) has SIGINT ignored, and the
                                # child would keep that: the case would test nothing
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
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
