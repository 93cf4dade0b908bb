#!/usr/bin/env python3
"""Hostile inputs and forking programs: every case must end in a per-file finding or exit 2 naming the
file, within 10 s and 1 GB, and leave no process behind.

    python3 bench/fault_inputs.py            # every case; prints one line per case and the violations
    python3 bench/fault_inputs.py -k fifo    # the cases whose name holds "fifo"

Each case builds a small tree in a temporary folder and runs `python -m migrator ...` on it in a
subprocess (under a 4 GiB address-space limit, so a bomb cannot take the machine down), timing it and
reading its peak memory from `wait4`. A case is a violation when it runs past 10 s, peaks over 1 GiB,
exits with a code other than 0/1/2, prints a traceback or "internal error", does not name the file,
or (the root cases) shows what it must not have read. Figures are printed, never asserted; the cheap
cases also run as tests (tests/engine/test_hostile_inputs.py).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SECONDS, MEMORY = 10.0, 1 << 30
ADDRESS_SPACE = 4 << 30

# 633 bytes: nine levels of nine aliases, "cuda" at the bottom (2^28 strings when expanded)
ALIAS_BOMB = "\n".join(
    ['a: &a ["cuda","cuda","cuda","cuda","cuda","cuda","cuda","cuda","cuda"]']
    + [f"{n}: &{n} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]" for p, n in zip("abcdefgh", "bcdefghi")]
) + "\n"
GLOB_BOMB = "a*" * 20 + "b"  # against a 40-character name of a's: exponential with a backtracking regex
DEEP = 100_000


@dataclass
class Case:
    name: str
    build: Callable[[Path], list[str]]  # makes the tree under the folder, returns migrate's arguments
    names: str  # what the output must name
    forbidden: str = ""  # what the output must never show (a file outside the root was read)
    cheap: bool = True  # also a test
    codes: tuple[int, ...] = (0, 1, 2)
    forks: bool = False  # the program writes the pids it forked to $FORK_PIDS: none may be left


@dataclass
class Outcome:
    case: str
    code: int | None
    seconds: float
    peak: int
    output: str
    violations: list[str] = field(default_factory=list)


def _tree(tmp: Path, files: dict[str, str | bytes]) -> Path:
    tree = tmp / "tree"
    for rel, body in files.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)
    (tree / "pyproject.toml").exists() or (tree / "pyproject.toml").write_text("[project]\nname = 't'\n")
    return tree


TRAIN = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


def _link(path: Path, target: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)


def _scan(tree: Path, *extra: str) -> list[str]:
    return ["scan", str(tree), "--no-cache", *extra]


def yaml_alias_bomb(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "conf.yaml": ALIAS_BOMB}))


def gitignore_glob(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {".gitignore": GLOB_BOMB + "\n", "a" * 40 + "/train.py": TRAIN}))


def exclude_glob(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"a" * 40 + "/train.py": TRAIN,
                       "pyproject.toml": f"[tool.migrate]\nexclude = [{json.dumps(GLOB_BOMB)}]\n"})
    return _scan(tree)


def exclude_bad_class(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "pyproject.toml": "[tool.migrate]\nexclude = ['[z-a]']\n"}))


def tool_not_a_table(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "pyproject.toml": "tool = 5\n"}))


def deep_pyproject(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "pyproject.toml": "x = " + "[" * DEEP + "]" * DEEP + "\n"}))


def deep_framework_pyproject(tmp: Path) -> list[str]:
    """A vendored framework's pyproject.toml, nested deeply: one file, not the whole scan."""
    deep = '[project]\ndependencies = ["torch"]\nx = ' + "[" * DEEP + "]" * DEEP + "\n"
    return _scan(_tree(tmp, {"train.py": TRAIN, "third/pyproject.toml": deep}))


def fifo_gitignore(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _fifo(tree / ".gitignore")
    return _scan(tree)


def fifo_gitignore_in_git(tmp: Path) -> list[str]:
    """Inside a git work tree git opens `.gitignore` itself: a FIFO would block it (engine/git_files.py looks first)."""
    tree = _tree(tmp, {"train.py": TRAIN})
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    _fifo(tree / ".gitignore")
    return _scan(tree)


def device_gitignore(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _link(tree / ".gitignore", "/dev/zero")
    return _scan(tree)


def fifo_baseline(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _fifo(tree / "base.json")
    return _scan(tree, "--baseline", str(tree / "base.json"))


def device_baseline(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _link(tree / "base.json", "/dev/zero")
    return _scan(tree, "--baseline", str(tree / "base.json"))


def fifo_record_scan(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _fifo(tree / ".migrate" / "fix-record.json")
    return _scan(tree)


def device_record_report(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _link(tree / ".migrate" / "fix-record.json", "/dev/zero")
    return ["report", str(tree), "--no-cache", "--format", "md", "-o", "-"]


def _outside_record(tmp: Path) -> Path:
    record = {"schema_version": 1, "tool": {"name": "ascend-migrate", "version": "0"}, "target": "npu",
              "files": [], "declined": [{"path": "train.py", "code": "DEV010", "symbol": ".cuda()", "line": 2,
                                         "reason": "OUTSIDE-THE-ROOT"}]}
    outside = tmp / "outside-record.json"
    outside.write_text(json.dumps(record))
    return outside


def record_link_outside_scan(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _link(tree / ".migrate" / "fix-record.json", str(_outside_record(tmp)))
    return _scan(tree)


def record_link_outside_report(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN})
    _link(tree / ".migrate" / "fix-record.json", str(_outside_record(tmp)))
    return ["report", str(tree), "--no-cache", "--format", "md", "-o", "-"]


def baseline_outside_root(tmp: Path) -> list[str]:
    _fifo(tmp / "outside.json")  # opening it would block: the run must refuse the path first
    tree = _tree(tmp, {"train.py": TRAIN, "pyproject.toml": "[tool.migrate]\nbaseline = '../outside.json'\n"})
    return _scan(tree)


def deep_toml_config(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN,
                             "ds_config.toml": 'device = "cuda"\nx = ' + "[" * DEEP + "]" * DEEP + "\n"}))


def deep_yaml_config(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "conf.yaml": "device: cuda\nx: " + "[" * DEEP + "]" * DEEP + "\n"}))


def deep_json_config(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN,
                             "config.json": '{"device": "cuda", "x": ' + "[" * DEEP + "]" * DEEP + "}\n"}))


def big_number_config(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "config.json": '{"device": "cuda", "n": ' + "9" * 5000 + "}\n"}))


def deep_notebook(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "nb.ipynb": '{"cells": ' + "[" * DEEP + "]" * DEEP + "}\n"}))


def deep_python(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "deep.py": "x = " + "-" * DEEP + "1\n"}))


def deep_python_brackets(tmp: Path) -> list[str]:
    return _scan(_tree(tmp, {"train.py": TRAIN, "deep.py": "x = torch.cuda" + "[0]" * DEEP + "\n"}))


def nested_python(tmp: Path) -> list[str]:
    """Parses (under the parser's limits) but nests past the recursion limit of a tree walk."""
    return _scan(_tree(tmp, {"train.py": TRAIN, "nested.py": "x = torch.cuda.x" + " + (1" * 190 + ")" * 190 + "\n"
                             + "y = " + "not " * 2900 + "torch.cuda.is_available()\n"}))


def deep_record(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN, ".migrate/fix-record.json": "[" * DEEP + "]" * DEEP})
    return ["report", str(tree), "--no-cache", "--format", "md", "-o", "-"]


def big_number_record(tmp: Path) -> list[str]:
    tree = _tree(tmp, {"train.py": TRAIN, ".migrate/fix-record.json": '{"schema_version": ' + "9" * 5000 + "}"})
    return ["report", str(tree), "--no-cache", "--format", "md", "-o", "-"]


# a validate.py protocol that starts a SIGTERM-ignoring child and a `setsid` daemon when imported
FORKING_PROTOCOL = '''
import os, subprocess, sys, types
import torch

_SLEEPER = [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
_started = [subprocess.Popen(_SLEEPER, stdout=subprocess.DEVNULL),
            subprocess.Popen(_SLEEPER, stdout=subprocess.DEVNULL, start_new_session=True)]
with open(os.environ["FORK_PIDS"], "a") as fh:
    fh.write("".join(f"{p.pid}\\n" for p in _started))

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8, bias=False)
        self.config = types.SimpleNamespace(n_layer=1, n_embd=8, n_head=2, vocab_size=16)

    def forward(self, x):
        return self.a(x)

def make_model(dropout=0.0):
    torch.manual_seed(0)
    return Net()

def make_batch(step):
    return {"x": torch.randn(4, 8, generator=torch.Generator().manual_seed(step))}

def loss_fn(out, batch):
    return out.float().pow(2).mean()
'''


def _forking_tree(tmp: Path) -> Path:
    return _tree(tmp, {"validate.py": FORKING_PROTOCOL})


def forking_plan(tmp: Path) -> list[str]:
    return ["plan", str(_forking_tree(tmp)), "--cluster", "a2-8x"]


def forking_ops_trace(tmp: Path) -> list[str]:
    return ["ops", "--trace", str(_forking_tree(tmp))]


def forking_validate(tmp: Path) -> list[str]:
    tree = _forking_tree(tmp)
    return ["validate", str(tree), "--migrated", str(tree), "--stages", "S1"]


def big_python(tmp: Path) -> list[str]:
    line = "y = torch.zeros(3).cuda()  # a line of a generated module\n"
    return _scan(_tree(tmp, {"train.py": TRAIN, "big.py": line * (50_000_000 // len(line))}))


CASES = [
    Case("yaml-alias-bomb", yaml_alias_bomb, "conf.yaml"),
    Case("gitignore-glob", gitignore_glob, "DEV010"),  # matched (no match) in linear time, the file scanned
    Case("exclude-glob", exclude_glob, "DEV010"),
    Case("exclude-bad-class", exclude_bad_class, "exclude", codes=(2,)),
    Case("tool-not-a-table", tool_not_a_table, "pyproject.toml", codes=(2,)),
    Case("deep-pyproject", deep_pyproject, "pyproject.toml", codes=(2,)),
    Case("deep-framework-pyproject", deep_framework_pyproject, "third/pyproject.toml"),
    Case("fifo-gitignore", fifo_gitignore, ".gitignore"),
    Case("fifo-gitignore-in-git", fifo_gitignore_in_git, "DEV010"),
    Case("device-gitignore", device_gitignore, ".gitignore"),
    Case("fifo-baseline", fifo_baseline, "base.json", codes=(2,)),
    Case("device-baseline", device_baseline, "base.json", codes=(2,)),
    Case("fifo-record-scan", fifo_record_scan, "DEV010"),  # the advisory record is left out; the scan goes on
    Case("device-record-report", device_record_report, "fix-record.json"),
    Case("record-link-outside-scan", record_link_outside_scan, "DEV010", forbidden="OUTSIDE-THE-ROOT"),
    Case("record-link-outside-report", record_link_outside_report, "fix-record.json", forbidden="OUTSIDE-THE-ROOT"),
    Case("baseline-outside-root", baseline_outside_root, "outside the project root", codes=(2,)),
    Case("deep-toml-config", deep_toml_config, "ds_config.toml"),
    Case("deep-yaml-config", deep_yaml_config, "conf.yaml"),
    Case("deep-json-config", deep_json_config, "config.json"),
    Case("big-number-config", big_number_config, "config.json"),
    Case("deep-notebook", deep_notebook, "nb.ipynb"),
    Case("deep-python", deep_python, "deep.py"),
    Case("deep-python-brackets", deep_python_brackets, "deep.py"),
    Case("nested-python", nested_python, "nested.py"),
    Case("deep-record", deep_record, "fix-record.json"),
    Case("big-number-record", big_number_record, "fix-record.json"),
    Case("big-python", big_python, "big.py"),
    # programs that fork (torch in the child: seconds each, so bench-only; the tests are
    # tests/validation/test_forking_programs.py); the time limit does not apply to them
    Case("forking-plan", forking_plan, "tree", cheap=False, forks=True),
    Case("forking-ops-trace", forking_ops_trace, "aten::", cheap=False, forks=True),
    Case("forking-validate", forking_validate, "S1", cheap=False, forks=True),
]


def _left(pids: list[int], grace: float = 5.0) -> list[int]:
    deadline = time.monotonic() + grace
    while any(os.path.exists(f"/proc/{p}") for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if os.path.exists(f"/proc/{p}")]


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_case(case: Case, tmp: Path, kill_after: float | None = None) -> Outcome:
    """Run one case in a subprocess; its violations are filled in."""
    args = case.build(tmp)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "MIGRATE_CACHE_DIR": str(tmp / "cache"), "FORK_PIDS": str(tmp / "pids")}
    env.pop("FORCE_COLOR", None)
    log = tmp / "output.txt"
    t0 = time.monotonic()
    with open(log, "wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "migrator", *args], cwd=tmp, env=env, stdout=fh,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=None if case.forks else _limit,  # torch children reserve more
                                start_new_session=True)
    kill_after = kill_after or (300.0 if case.forks else 3 * SECONDS)
    timer = threading.Timer(kill_after, _kill_group, (proc.pid,))
    timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - t0
    output = log.read_text(errors="replace")
    out = Outcome(case.name, proc.returncode, seconds, usage.ru_maxrss * 1024, output)
    if case.forks:
        pids = [int(p) for p in (tmp / "pids").read_text().split()] if (tmp / "pids").exists() else []
        left = _left(pids)
        if not pids:
            out.violations.append("the program never started its children")
        if left:
            out.violations.append(f"{len(left)} of its {len(pids)} forked process(es) left running")
            for pid in left:
                os.kill(pid, signal.SIGKILL)
    elif seconds > SECONDS:
        out.violations.append(f"took {seconds:.1f} s (limit {SECONDS:.0f} s)")
    if out.peak > MEMORY and not case.forks:
        out.violations.append(f"peaked at {out.peak / 2**20:.0f} MiB (limit {MEMORY / 2**20:.0f} MiB)")
    if proc.returncode not in case.codes:
        out.violations.append(f"exit {proc.returncode} (expected {'/'.join(map(str, case.codes))})")
    if "Traceback" in output or "internal error" in output.lower():
        out.violations.append("a traceback or internal error")
    if case.names not in output:
        out.violations.append(f"the output does not name {case.names!r}")
    if case.forbidden and case.forbidden in output:
        out.violations.append(f"read what lies outside the root ({case.forbidden!r} in the output)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only the cases whose name holds this")
    args = parser.parse_args()
    total = 0
    for case in CASES:
        if args.k not in case.name:
            continue
        with tempfile.TemporaryDirectory(prefix="fault-inputs-") as tmp:
            out = run_case(case, Path(tmp))
        last = next((ln for ln in reversed(out.output.strip().splitlines()) if case.names in ln), "")
        print(f"{case.name:28} exit {out.code!s:>4} {out.seconds:6.2f} s {out.peak / 2**20:7.0f} MiB  "
              f"{'OK' if not out.violations else 'VIOLATION: ' + '; '.join(out.violations)}")
        if last:
            print(f"{'':28} | {last.strip()[:150]}")
        total += bool(out.violations)
    print(f"{total} violation(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
