"""Child-process entry point: ``python -m migrator.validation.child.worker JOB.json``.

The program under validation only ever runs here (never in the user's own process). A job is one
of the records of :mod:`migrator.validation.records`; its ``kind`` selects its :class:`Runner` in
:data:`RUNNERS`, one per kind:

* ``side``: S1 on one side (:mod:`.side`);
* ``plan``: S0 on the fake process group (:mod:`.plan`);
* ``parallel``: one rank of S2/S3 under ``torch.distributed.run`` (:mod:`.parallel`);
* ``script``: an unmodified training script under global hooks (:mod:`.script_hooks`);
* ``optrace``: one forward with the op tracer inside one module (:mod:`.optrace`);
* ``bench``: one benchmark repeat of one side (``--bench`` only; :mod:`.bench`).

Other child programs serve their own kinds through :func:`serve` with a table of their own (the
census: ``census``, :mod:`migrator.census.child`). A kind the table does not hold is a harness
failure naming the job file.

Every job writes its status record (the runner's ``status`` type) as ``status.json``
(``status_rank<r>.json`` for ranks) into its ``out`` folder: ``ok``, ``phase`` of a failure
(``entry`` = the protocol could not be loaded: exit 2; ``run`` = the program failed), a summary, the
active module stack, layers, manifest, and the kind's own results.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar

from .. import records
from ..records import (
    BenchJob,
    BenchStatus,
    Failure,
    Job,
    ParallelJob,
    PlanJob,
    PlanStatus,
    RankStatus,
    RecordError,
    ScriptJob,
    ScriptStatus,
    SideJob,
    SideStatus,
    Status,
    TraceJob,
    TraceStatus,
)

JobT = TypeVar("JobT", bound=Job)
# what a runner returns: its status as built while it ran (a crash keeps what was known); the worker
# freezes it into the runner's status record, so a field the record lacks fails in the child
StatusDraft = Mapping[str, object]


@dataclass(frozen=True)
class Runner(Generic[JobT]):
    """How the child runs one job kind: its job record, its status record, and ``load``, which imports the
    runner on first use (a job never imports the other kinds' modules: ``--bench`` off imports no bench code)."""

    job: type[JobT]
    status: type[Status]
    load: Callable[[], Callable[[JobT], StatusDraft]]


def _side() -> Callable[[SideJob], StatusDraft]:
    from .side import run_side

    return run_side


def _plan() -> Callable[[PlanJob], StatusDraft]:
    from .plan import run_plan

    return run_plan


def _parallel() -> Callable[[ParallelJob], StatusDraft]:
    from .parallel import run_rank

    return run_rank


def _bench() -> Callable[[BenchJob], StatusDraft]:
    from .bench import run_bench

    return run_bench


def _optrace() -> Callable[[TraceJob], StatusDraft]:
    from .optrace import run_optrace

    return run_optrace


def _script() -> Callable[[ScriptJob], StatusDraft]:
    from .script_hooks import run_script

    return run_script


RUNNERS: Mapping[str, Runner[Any]] = {runner.job.KIND: runner for runner in (
    Runner(SideJob, SideStatus, _side),
    Runner(PlanJob, PlanStatus, _plan),
    Runner(ParallelJob, RankStatus, _parallel),
    Runner(BenchJob, BenchStatus, _bench),
    Runner(TraceJob, TraceStatus, _optrace),
    Runner(ScriptJob, ScriptStatus, _script),
)}


def _status_name(job: Job) -> str:
    """``status_rank<r>.json`` for a rank of torchrun, else ``status.json``."""
    ranked = isinstance(job, ParallelJob) or (isinstance(job, ScriptJob) and job.distributed) \
        or (isinstance(job, BenchJob) and "RANK" in os.environ)
    return f"status_rank{os.environ.get('RANK', '0')}.json" if ranked else "status.json"


def read_job(job_path: str, runners: Mapping[str, Runner[Any]]) -> tuple[Runner[Any], Job]:
    """The job at ``job_path`` and the runner of its kind; :class:`RecordError` naming the file when the
    file is not a job of a kind in ``runners``."""
    try:
        with open(job_path, encoding="utf-8") as fh:
            data = json.load(fh)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{job_path}: not JSON ({exc})") from None
    kind = data.get("kind") if isinstance(data, dict) else None
    runner = runners.get(kind) if isinstance(kind, str) else None
    if runner is None:
        raise RecordError(f"{job_path}: unknown job kind {kind!r} (this child runs: {', '.join(runners)})")
    return runner, records.job_from_json(data, job_path, runner.job)


def serve(job_path: str, runners: Mapping[str, Runner[Any]] = RUNNERS) -> int:
    """Read the job at ``job_path``, run it with its kind's runner, write its status record: always, a
    harness failure is a status too."""
    try:
        runner, job = read_job(job_path, runners)
    except (OSError, ValueError) as exc:  # no job to name an out folder: next to the job file
        _write_failure(os.path.join(os.path.dirname(os.path.abspath(job_path)), "status.json"), str(exc))
        return 1
    path = os.path.join(job.out, _status_name(job))
    for folder in reversed(getattr(job, "pythonpath", ())):  # --pythonpath, in this side's own tree
        sys.path.insert(0, os.path.join(job.tree, folder))
    isolation = None
    if other := getattr(job, "other_tree", None):  # the census's job has no other side
        from .provenance import isolate

        isolation = isolate(job.tree, other)
    try:
        facts = runner.load()(job)
        if isolation is not None:
            facts = {**facts, "provenance": isolation.report()}
        status = records.from_json(facts, runner.status, path)
    except BaseException as exc:  # noqa: BLE001 - last resort: always leave a status
        from .errors import frame_text, harness_frame

        ours = harness_frame(exc, getattr(job, "tree", None))
        _write_failure(path, f"{type(exc).__name__}: {exc}", traceback.format_exc()[-4000:],
                       frame_text(ours) if ours is not None else None)
        return 1
    records.write(status, path)
    return 0


def _write_failure(path: str, summary: str, trace: str | None = None, frame: str | None = None) -> None:
    records.write(Status(phase="harness", error=Failure(summary=summary, traceback=trace, harness_frame=frame)), path)


TORCHRUN = "--torchrun"  # ``worker --torchrun ARGS``: torchrun's agent (``python -m torch.distributed.run ARGS``)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from .warm import delegate

    code = delegate(argv)  # forked from the run's zygote, when there is one (None: run here, cold)
    if code is not None:
        return code
    return run_torchrun(argv[1:]) if argv[0] == TORCHRUN else serve(argv[0])


def run_torchrun(args: list[str]) -> int:
    """torchrun's agent in this process, as ``python -m torch.distributed.run ARGS`` runs it (forked from the
    zygote it needs no torch import of its own: ~1.7 s of CPU per S2/S3 launch). Its ranks are workers."""
    from torch.distributed import run

    _name_methods_from_frames()
    sys.argv[:] = [run.__file__, *args]
    try:
        run.main(args)
    except SystemExit as exc:  # argparse's usage error, or an agent that exits itself
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception:  # noqa: BLE001 - a rank failed (ChildFailedError): reported as the module would
        traceback.print_exc()
        return 1
    return 0


def _name_methods_from_frames() -> None:
    """torch's rendezvous names the method of each record it logs with two ``inspect.stack()`` calls, which read
    the source lines of every frame (~0.4 s of an agent's CPU): the same name, read from the frame itself."""
    from torch.distributed.elastic.rendezvous import dynamic_rendezvous

    def get_method_name(depth: int = 2) -> str:
        try:
            return sys._getframe(depth).f_code.co_name  # inspect.stack()[depth].function
        except ValueError:  # the stack is not that deep
            return "no_method_name"

    if callable(getattr(dynamic_rendezvous, "get_method_name", None)):
        dynamic_rendezvous.get_method_name = get_method_name


def _skip_library_teardown() -> None:
    """Drop the exit-time finalizers of ``torch.library`` (~170 once inductor is imported): they deregister
    operators, which nothing outside this process sees with ``os._exit`` next; ~50 ms per child."""
    import weakref

    registry = getattr(weakref.finalize, "_registry", None)
    for finalizer in list(registry or ()):
        found = finalizer.peek()
        if found is not None and getattr(found[1], "__module__", None) == "torch.library":
            finalizer.atexit = False


def finish(code: int) -> NoReturn:
    """Exit with ``code`` as multiprocessing's forked processes do: the program's non-daemon threads joined,
    its ``atexit`` handlers run, every stream flushed, then ``os._exit``. The interpreter's teardown is
    skipped: with torch loaded it frees (and in a zygote's fork first copies) most of the heap, 0.5-3 s
    per child for nothing, since the status record is already written."""
    import atexit
    import threading

    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    _skip_library_teardown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):  # closed or replaced by the program
            pass
    try:  # C stdio buffers (a library's printf into the log)
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass
    os._exit(code)


if __name__ == "__main__":
    finish(main())
