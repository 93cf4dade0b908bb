"""Child process of ``migrate ops --trace``: ``python -m migrator.census.child JOB.json``.

Runs the ORIGINAL program on the CPU under the reference layers of ``migrate validate``
(device remap, CUDA-library references: :func:`migrator.validation.child.protocol.install_layers`)
for ``steps`` full training steps, with the tracer's two modes on, and writes ``status.json``
(``ok``, ``rows``, ``layers``, ``stopped``, or ``phase`` + ``error``) into the job's ``out``.

* protocol (``validate.py``): ``make_model()``, ``make_optimizer(model)`` (else AdamW), then per
  step ``make_batch(step)``, forward + ``loss_fn`` under the bf16 policy (``amp``: autocast over
  fp32 weights, ``pure``: ``model.to(bfloat16)``, ``fp32``), ``backward()``, ``step()``,
  ``zero_grad()``; with ``fake`` everything runs under ``FakeTensorMode`` (shapes, no memory);
* script: the unmodified script via ``runpy`` with its arguments, in its own precision policy,
  stopped when a module forward starts after ``steps`` optimizer steps (global hooks), so the
  traced steps' own logging / all_reduce still runs.
"""

from __future__ import annotations

import contextlib
import os
import runpy
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .records import CensusJob, CensusStatus

if TYPE_CHECKING:  # torch is imported inside the functions, once the job is read
    import torch

    from .tracer import Recording


def _hooks(census: Recording) -> list[Any]:  # torch's RemovableHandle
    from torch.nn.modules import module as module_mod
    from torch.optim import optimizer as optim_mod

    def forward_pre(module: torch.nn.Module, args: tuple) -> None:
        if census.phase in ("setup", "optimizer") or census.after_backward:
            census.step_started()
        cls = type(module)
        if cls.__module__.startswith("torch.nn.modules."):  # nn.Linear(...) is what a static scan sees
            census.record("api", f"torch.nn.{cls.__name__}", args, None)

    def opt_pre(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        census.optimizer_started()

    return [module_mod.register_module_forward_pre_hook(forward_pre),
            optim_mod.register_optimizer_step_pre_hook(opt_pre)]


def _run_protocol(job: CensusJob, census: Recording, status: dict[str, Any]) -> None:
    import torch

    from migrator.validation.child import execute, protocol

    started = protocol.prepare("original", job.tree, job.entry, status)
    if started is None:
        return
    entry, layers = started
    fake: Any = contextlib.nullcontext()
    real: Any = contextlib.nullcontext
    if job.fake:
        from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily

        fake, real = FakeTensorMode(allow_non_fake_inputs=True), unset_fake_temporarily
    policy = job.bf16_policy
    with fake, _traced(census):
        torch.manual_seed(job.seed)
        model = entry.make_model()
        if layers.device != "cpu":  # (a FakeTensor parameter cannot be swapped by .to())
            model.to(layers.device)
        if policy == "pure":
            model.to(torch.bfloat16)
        model.train()
        optimizer = (entry.make_optimizer(model) if entry.make_optimizer is not None
                     else torch.optim.AdamW(model.parameters(), lr=1e-4))
        status["optimizer"] = type(optimizer).__name__
        for step in range(job.steps):
            census.setup_started()
            with real():  # the data is real (a batch may need values: token counts, lengths)
                batch = entry.batch(step)
            batch = execute.prepare_batch(batch, layers.device, "bf16" if policy == "pure" else "fp32", policy)
            census.step_started()
            args, kwargs = execute.model_inputs(entry, batch)
            with execute.autocast("bf16", policy, layers.device) if policy == "amp" else contextlib.nullcontext():
                loss = entry.loss_fn(model(*args, **kwargs), batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        status["stopped"] = f"after {job.steps} steps"


class _Stop(BaseException):
    """Raised from the optimizer post-hook once the requested steps have run."""


def _run_script(job: CensusJob, census: Recording, status: dict[str, Any]) -> None:
    from torch.nn.modules import module as module_mod
    from torch.optim import optimizer as optim_mod

    from migrator.validation.child import protocol

    layers = protocol.install_layers("original")
    status.update(layers=layers.used, device=layers.device)
    script = os.path.join(job.tree, job.script or "")
    if not job.script or not os.path.isfile(script):
        status.update(phase="entry", error={"summary": f"{script}: no such script"})
        return
    steps = {"n": 0}

    def opt_post(optimizer: torch.optim.Optimizer, args: tuple, kwargs: dict) -> None:
        steps["n"] += 1

    def forward_pre(module: torch.nn.Module, args: tuple) -> None:  # the next step begins: the traced steps' logging etc. have run
        if steps["n"] >= job.steps:
            raise _Stop()

    handles = [optim_mod.register_optimizer_step_post_hook(opt_post),
               module_mod.register_module_forward_pre_hook(forward_pre)]
    sys.argv = [script, *job.args]
    sys.path.insert(0, os.path.dirname(script))
    os.chdir(job.tree)
    try:
        with _traced(census):
            runpy.run_path(script, run_name="__main__")
        status["stopped"] = "script ended"
    except _Stop:
        status["stopped"] = f"after {steps['n']} optimizer steps"
    except SystemExit as exc:
        if exc.code not in (0, None):
            status.update(phase="run", error={"summary": f"the script exited with code {exc.code}"})
        status["stopped"] = "script exited"
    finally:
        for handle in handles:
            handle.remove()
    status["steps"] = steps["n"]


@contextlib.contextmanager
def _traced(census: Recording) -> Iterator[None]:
    from .tracer import ApiMode, AtenMode, wrapped_functions

    handles = _hooks(census)
    try:
        with wrapped_functions(census), ApiMode(census), AtenMode(census):
            yield
    finally:
        for h in handles:
            h.remove()


def run(job: CensusJob) -> dict[str, Any]:
    import torch

    from migrator.validation.child.errors import describe

    from .tracer import Recording

    status: dict[str, Any] = {"ok": False, "torch": torch.__version__}
    census = Recording(job.tree, job.root, record_shapes=True, step_shapes=job.step_shapes)
    t0 = time.perf_counter()
    try:
        if job.script:
            _run_script(job, census, status)
        else:
            _run_protocol(job, census, status)
    except BaseException as exc:  # noqa: BLE001 - the program failed: that is a result
        status.update(phase="run", error=describe(exc, job.tree, during=census.phase))
    status["seconds"] = round(time.perf_counter() - t0, 3)
    status["rows"] = census.rows()
    status["flow"] = census.flow.nodes
    status["ok"] = "phase" not in status
    return status


def main(argv: list[str] | None = None) -> int:
    from migrator.validation.child.worker import Runner, serve

    argv = sys.argv[1:] if argv is None else argv
    return serve(argv[0], {CensusJob.KIND: Runner(CensusJob, CensusStatus, _runner)})


def _runner() -> Callable[[CensusJob], Mapping[str, object]]:
    return run


if __name__ == "__main__":
    from migrator.validation.child.warm import delegate
    from migrator.validation.child.worker import finish

    code = delegate(sys.argv[1:], module="migrator.census.child")  # forked from a zygote when one serves
    finish(main() if code is None else code)
