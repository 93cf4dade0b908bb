"""New hostile environments beyond issue 38's list (mounts, permissions, races, odd names), for
`bench/fault_hunt.py`."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fault_hunt_kit import (
    END,
    MIG,
    NOBODY,
    TRAIN,
    Result,
    Run,
    Skip,
    fixed_once,
    fixed_or_unchanged,
    migrate,
    need,
    ns_runs,
    outside_unchanged,
    private_mount,
    sh,
    temps_left,
    tree,
)

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
