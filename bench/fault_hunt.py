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
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fault_hunt_issue import (
    acl_xattr_setgid_root,
    acl_xattr_setgid_user,
    clean_env,
    ctrl_c_early,
    fifo_excludes,
    fifo_git_head,
    fifo_git_index,
    fifo_journal,
    fix_out_the_tree,
    hard_link_outside,
    hook_dash_name,
    lone_cr,
    no_record_live_temp,
    non_utf8_name,
    record_nul_path,
    scan_out_onto_record,
    scan_out_onto_source,
    shm_fix_out_twice,
    shm_fix_twice,
    shm_scan_out_twice,
    validate_markdown_script,
)
from fault_hunt_kit import Result, Skip
from fault_hunt_new import (
    bind_mount,
    case_collision,
    fat_image,
    file_becomes_folder,
    full_tmpfs,
    long_name,
    long_path,
    readonly_folder_root,
    readonly_folder_user,
    readonly_mount,
    socket_in_tree,
    symlink_swapped,
    tmpdir_shm_validate_copy,
    tmpfs_mount,
    unreadable_file_user,
)


@dataclass
class Case:
    name: str
    item: str  # the issue's item, or "new"
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
