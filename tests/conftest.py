from __future__ import annotations

import atexit
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# `pytest -n auto` runs one worker per core, and each validate run adds children: torch's default of one
# intra-op thread per core oversubscribes the box, and its threads then wait on each other (an
# elementwise op on 2 threads under load measured ~100x the CPU of 1 thread). One thread per process.
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

# Tests never write the user's cache folder: the catalogue is built (and kept, `catalogue/rule_cache.py`) while
# tests are collected, before `_isolated_cache` applies, so the run starts with a folder of its own (xdist's
# workers inherit it), removed at exit.
if "MIGRATE_CACHE_DIR" not in os.environ:
    os.environ["MIGRATE_CACHE_DIR"] = tempfile.mkdtemp(prefix="migrate-test-cache-")
    atexit.register(shutil.rmtree, os.environ["MIGRATE_CACHE_DIR"], True)

# A shell without job control starts a background job with SIGINT ignored, and every child would
# inherit that (Python then never raises KeyboardInterrupt): the Ctrl-C tests need the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# A heavy end-to-end scenario whose behaviour fast tests also assert: nightly, skipped unless `--slow-e2e` or
# `-m slow-e2e` (issue 43: the suite stays under 10 minutes on 2 cores). `@SLOW_E2E`, or
# `pytest.param(..., marks=SLOW_E2E)`; the test's comment names the fast tests that stand for it.
SLOW_E2E = getattr(pytest.mark, "slow-e2e")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # once, in the controller, before xdist's workers start
        _compile_package()


def _compile_package() -> None:
    """Bytecode for the package, written once: every process a test starts (the CLI, each validation zygote and
    child) imports from it. Where ``PYTHONDONTWRITEBYTECODE`` is set (this box sets it) no process writes any,
    and each compiled every module it imported from source: ~4 % of the suite's CPU. The user's trees (samples,
    fixtures, copies) are left alone, as the tool leaves them."""
    import compileall

    compileall.compile_dir(str(REPO / "migrator"), quiet=2, workers=0)


def pytest_addoption(parser):
    parser.addoption("--slow-e2e", action="store_true", default=False,
                     help="also run the nightly end-to-end scenarios (marker slow-e2e)")


def pytest_collection_modifyitems(config, items):
    asked = (config.getoption("markexpr") or "").replace("not slow-e2e", "")
    if config.getoption("--slow-e2e") or "slow-e2e" in asked:
        return
    nightly = pytest.mark.skip(reason="slow-e2e: nightly end-to-end scenario (run with --slow-e2e)")
    for item in items:
        if item.get_closest_marker("slow-e2e") is not None:
            item.add_marker(nightly)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Each test session scans with its own cache folder, never the user's. Set once per test process, before
    any other fixture: a module-scoped fixture's validate run then sees the environment its tests' runs see,
    and they share one zygote (a function-scoped setting had them differ in this key alone)."""
    previous = os.environ.get("MIGRATE_CACHE_DIR")
    os.environ["MIGRATE_CACHE_DIR"] = str(tmp_path_factory.getbasetemp() / "scan-cache")
    yield
    if previous is not None:
        os.environ["MIGRATE_CACHE_DIR"] = previous


@pytest.fixture(scope="session", autouse=True)
def _warm_zygotes():
    """The validate runs of one test process share their zygotes (one per child environment, a few kept):
    a run's children still fork after torch was imported, without each run importing it again. Runs
    through the CLI in a subprocess start their own, as a user's do."""
    from migrator.validation.parent import launcher

    with launcher.warm_starts(keep=SHARED_ZYGOTES):
        yield


SHARED_ZYGOTES = 5  # an idle zygote holds torch's memory (~0.3 GB); two xdist workers keep ten at most


def warm_zygote(seed: int = 0, threads: int = 1) -> None:
    """Wait until this test process's zygote for a validate run's children (``seed``, ``threads`` and the
    environment as it is now) has imported torch. A child's timeout counts from its start, the wait for the
    zygote included: after this, a test's short timeout is all the child's own run, not torch's import."""
    from migrator.validation.parent import launcher

    launcher.worker_env(launcher.child_env(seed, threads))


def shared_folder(tmp_path_factory, name: str) -> Path:
    """``name`` in the run's folder that every pytest-xdist worker sees (each worker's basetemp is a
    sub-folder of one common folder; without xdist the session's basetemp)."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def precommit_hooks(tmp_path_factory) -> tuple[Path, Path]:
    """(hook repository, pre-commit home): this checkout's hooks committed to a git repository, and one
    pre-commit store for every test that runs them, built once per run and shared by the xdist workers (a
    file lock): pre-commit installs the package into its store once, not once per test."""
    from filelock import FileLock

    from tests.report.test_precommit import _hook_repo

    root = shared_folder(tmp_path_factory, "precommit-shared")
    hooks, done = root / "hooks", root / "hooks.done"
    with FileLock(str(root / "hooks.lock")):
        if not done.exists():
            shutil.rmtree(hooks, ignore_errors=True)
            _hook_repo(hooks)
            done.touch()
    return hooks, root / "pre-commit-home"  # pre-commit locks its own store while it installs


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, input: str | None = None):
    """Run `python -m migrator ...` in a subprocess, as a user would."""
    import subprocess

    full_env = {**os.environ, **(env or {})}
    # the checkout's package wins, whether or not it is installed
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full_env.get("PYTHONPATH")]))
    full_env.pop("FORCE_COLOR", None)
    return subprocess.run(
        [sys.executable, "-m", "migrator", *args],
        cwd=cwd or REPO,
        env=full_env,
        capture_output=True,
        text=True,
        input=input,
        timeout=300,
    )


def _processes_under(folder: str) -> list[tuple[int, str]]:
    """Live processes working in ``folder`` or naming it on their command line (Linux /proc; empty
    elsewhere). Both: a worker forked from a zygote carries the zygote's command line, but works in
    its job's folder."""
    found = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue  # exited, a zombie, or not ours to read
        if cmd and (cwd == folder or cwd.startswith(folder + os.sep) or folder in cmd):
            found.append((pid, cmd[:200]))
    return found


def survivors(folder: str, grace: float = 5.0) -> list[str]:
    """``pid: command`` of the processes still working in (or naming) ``folder`` after ``grace`` seconds."""
    import time

    if not os.path.isdir("/proc"):
        pytest.skip("needs /proc to list processes")
    deadline = time.monotonic() + grace
    while (found := _processes_under(folder)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return [f"{pid}: {cmd}" for pid, cmd in found]


def _check_dev_null(session) -> None:
    """A test that wrote to /dev/null with an atomic rename (as root) replaced it with a regular file:
    every later `git` then fails. The run fails, naming the damage."""
    import stat

    try:
        mode = os.lstat(os.devnull).st_mode
    except OSError:
        mode = 0
    if not stat.S_ISCHR(mode):
        session.config.get_terminal_writer().line(
            f"{os.devnull} is no longer a character device (mode {mode:o}): a test or the tool replaced it", red=True)
        session.exitstatus = 1


def pytest_sessionfinish(session, exitstatus):
    """The suite leaves no process behind: anything still running in the session's temporary
    folders (validation children, torchrun ranks, training runs) fails the run, and is ended."""
    import signal
    import time

    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks once, at the end
        return
    _check_dev_null(session)
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is None:
        return
    base = str(factory.getbasetemp().resolve())
    deadline = time.monotonic() + 5  # processes still on their way out
    while (left := _processes_under(base)) and time.monotonic() < deadline:
        time.sleep(0.2)
    if left:
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        lines = "\n".join(f"  {pid}: {cmd}" for pid, cmd in left)
        session.config.get_terminal_writer().line(f"processes left behind by the tests (now killed):\n{lines}", red=True)
        session.exitstatus = 1
