"""Child side of the op census: record every op at the torch-API and the ATen level (imports torch).

Two modes run together: a ``TorchFunctionMode`` sees the outermost torch API call of each
operation (``torch.nn.functional.layer_norm``, ``torch.Tensor.masked_fill_``: the names the
Ascend support lists use; nested calls inside it are not seen again), and a
``TorchDispatchMode`` sees each ATen overload that actually runs, after autograd and autocast
(``aten::native_layer_norm``, ``aten::native_layer_norm_backward``, ``aten::_fused_adamw_``).

Each call is counted under (level, op, input dtypes, phase, user frame, library frame). The
frames come from one ``sys._getframe`` walk per call, with each code object classified once
(user tree / library / plumbing); nothing is formatted. Shapes are taken once per distinct key; at the
ATen level each call's input and output shapes are also kept per step (a set per key: a shape that
changes between steps is a recompile on Ascend, `census/perf_lint.py`), with the output dtypes.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from migrator.catalogue.coverage import normalize_dtype

from .flow import Flow

PHASES = ("setup", "forward", "backward", "optimizer")
_PLUMBING = tuple(os.path.join("torch", p) for p in (
    os.path.join("nn", "modules", "module.py"), "overrides.py", os.path.join("utils", "_python_dispatch.py"),
    "_tensor.py", os.path.join("autograd", "__init__.py"), os.path.join("autograd", "graph.py"),
    os.path.join("utils", "_contextlib.py"), os.path.join("optim", "optimizer.py"),
    os.path.join("amp", "autocast_mode.py"), os.path.join("_subclasses", "fake_tensor.py"), "_compile.py",
    os.path.join("_dynamo", "eval_frame.py"),
))
_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # migrator/
_MODULE_ALIASES = {"torch._C._nn": "torch.nn.functional", "torch._C._special": "torch.special",
                   "torch._C._linalg": "torch.linalg", "torch._C._fft": "torch.fft", "torch.functional": "torch",
                   "torch._C._VariableFunctions": "torch", "torch._tensor": "torch"}
_USER, _LIBRARY, _SKIP = 0, 1, 2
_REFERENCE = os.path.join(_OWN, "validation", "child", "cuda_reference") + os.sep
# public APIs a TorchFunctionMode does not see (no __torch_function__ handling), wrapped instead
NOT_OVERRIDABLE = tuple(f"torch.distributed.{n}" for n in (
    "init_process_group", "all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "barrier", "all_to_all_single")) + (
    "torch.nn.utils.clip_grad_norm_", "torch.nn.utils.clip_grad_value_")


def api_name(func: Any) -> str | None:
    """The public torch name of a function the TorchFunctionMode sees; None for attribute access."""
    name = getattr(func, "__name__", None)
    if not name or name in ("__get__", "__set__"):
        return None
    owner = getattr(func, "__objclass__", None)
    if owner is not None and owner.__name__ in ("TensorBase", "Tensor"):
        return f"torch.Tensor.{name}"
    module = getattr(func, "__module__", None) or "torch"
    if module.startswith("torch._ops."):  # torch.ops.<namespace>.<op> packets
        return f"torch.ops.{module.split('.')[2]}.{name}"
    qual = getattr(func, "__qualname__", name)
    if qual.startswith(("_VariableFunctionsClass.", "TensorBase.")) or "." not in qual:
        qual = name if not qual.startswith("TensorBase.") else f"Tensor.{name}"
    module = _MODULE_ALIASES.get(module, module)
    return f"{module}.{qual}"


def _qualname(code: CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name)  # 3.11+


def _dtype_key(dtype: Any, cache: dict[Any, str]) -> str:
    key = cache.get(dtype)
    if key is None:
        text = str(dtype)
        key = cache[dtype] = normalize_dtype(text) or text.replace("torch.", "")
    return key


def _tensors(args: tuple, kwargs: dict | None) -> Iterator[torch.Tensor]:
    for value in (*args, *(kwargs or {}).values()):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, torch.Tensor):
                    yield item


class Recording:
    """The counts of one traced run (``rows()`` gives them as JSON-ready dicts)."""

    def __init__(self, user_root: str, rel_root: str | None = None, record_shapes: bool = True,
                 step_shapes: bool = True) -> None:
        self.user_root = os.path.abspath(user_root) + os.sep
        self.rel_root = os.path.abspath(rel_root or user_root)
        self.record_shapes = record_shapes
        self.per_step = step_shapes
        self.phase = "setup"
        self.after_backward = False
        # key -> [count, shapes, dispatched an ATen op, {(step, input shapes, output shapes)}, {output dtypes}]
        self.counts: dict[tuple, list] = {}
        self.step = 0  # optimizer steps begun: a step's batch is made after the previous step's update
        self.aten_calls = 0
        self._kinds: dict[Any, int] = {}
        self._dtypes: dict[Any, str] = {}
        self.flow = Flow()  # the first forward's data flow (the advisor's fusion patterns)

    # ------------------------------------------------------------------ frames
    def _kind(self, code: CodeType) -> int:
        kind = self._kinds.get(code)
        if kind is None:
            path = code.co_filename
            if path.startswith("<") or (path := os.path.abspath(path)).startswith(_OWN) or path.endswith(_PLUMBING):
                kind = _SKIP
            elif path.startswith(self.user_root) and f"{os.sep}site-packages{os.sep}" not in path:
                kind = _USER
            else:
                kind = _LIBRARY
            self._kinds[code] = kind
        return kind

    def frames(self) -> tuple[tuple | None, tuple | None]:
        """(user frame, library frame it called), each (path, line, function) or None."""
        frame: Any = sys._getframe(2)
        library = None
        while frame is not None:
            code = frame.f_code
            kind = self._kind(code)
            if kind == _USER:
                rel = os.path.relpath(code.co_filename, self.rel_root)
                return (rel.replace(os.sep, "/"), frame.f_lineno, _qualname(code)), library
            if kind == _LIBRARY:
                library = (code.co_filename, frame.f_lineno, _qualname(code))
            frame = frame.f_back
        return None, library

    def in_reference(self) -> bool:
        """Whether the current call runs inside our CPU stand-in of a CUDA library (flash_attn, apex...),
        below the user's line: its ops are the reference's, not a pattern the user wrote."""
        frame: Any = sys._getframe(2)
        while frame is not None:
            path = frame.f_code.co_filename
            if _REFERENCE in path:
                return True
            if self._kind(frame.f_code) == _USER:
                return False
            frame = frame.f_back
        return False

    # ------------------------------------------------------------------ recording
    def current_phase(self) -> str:
        if torch._C._current_graph_task_id() != -1:
            self.after_backward = True
            return "backward"
        if self.after_backward and self.phase == "forward":
            return "optimizer"  # between backward and the next forward: clipping, scaler, step, zero_grad
        return self.phase

    def record(self, level: str, name: str, args: tuple, kwargs: dict | None, dispatched: bool = True,
               outputs: Any = None) -> tuple | None:
        """Count one call (per step too, with its shapes: the dynamic-shape lint); returns its user frame."""
        tensors = list(_tensors(args, kwargs))
        dtypes = tuple(_dtype_key(t.dtype, self._dtypes) for t in tensors)
        user, library = self.frames()
        key = (level, name, dtypes, self.current_phase(), user, library)
        slot = self.counts.get(key)
        if slot is None:
            shapes = [list(t.shape) for t in tensors] if self.record_shapes else None
            slot = self.counts[key] = [1, shapes, dispatched, set(), set()]
        else:
            slot[0] += 1
            slot[2] = slot[2] or dispatched
        if level == "aten" and self.per_step:  # torch.Size is a hashable tuple: no copies
            outs = list(_tensors(outputs if isinstance(outputs, tuple) else (outputs,), None))
            try:
                slot[3].add((self.step, tuple(t.shape for t in tensors), tuple(t.shape for t in outs)))
            except TypeError:  # a symbolic size (no hash): not compared
                pass
            for out in outs:
                slot[4].add(out.dtype)
        return user

    def setup_started(self) -> None:
        self.phase, self.after_backward = "setup", False

    def step_started(self) -> None:
        if self.after_backward and self.phase != "optimizer":
            self.step += 1  # a step that updated without an optimizer's step()
        self.phase = "forward"
        self.after_backward = False

    def optimizer_started(self) -> None:
        if self.phase != "optimizer":
            self.step += 1
        self.phase = "optimizer"

    def rows(self) -> list[dict]:
        """One dict per key; `step_shapes` on the first row of an ATen op (its phases together) whose shapes
        differ between steps."""
        out = []
        by_op: dict[tuple, set] = {}  # an ATen op's shapes per step over its phases (a batch: setup, then optimizer)
        for (_level, name, dtypes, _phase, user, library), slot in self.counts.items():
            by_op.setdefault((name, dtypes, user, library), set()).update(slot[3])
        shapes_written: set[tuple] = set()
        for (level, name, dtypes, phase, user, library), (count, shapes, dispatched, _, out_dtypes) in self.counts.items():
            row = {"level": level, "op": name, "dtypes": list(dtypes), "phase": phase, "count": count,
                   "dispatched": dispatched}
            if user is not None:
                row["user_frame"] = {"path": user[0], "line": user[1], "function": user[2]}
            if library is not None:
                row["library_frame"] = {"path": library[0], "line": library[1], "function": library[2]}
            if shapes is not None:
                row["shapes"] = [[int(d) if isinstance(d, int) else str(d) for d in s] for s in shapes]
            if out_dtypes:
                row["out_dtypes"] = sorted({_dtype_key(d, self._dtypes) for d in out_dtypes})
            per_step_key = (name, dtypes, user, library)
            if level == "aten" and per_step_key not in shapes_written:
                shapes_written.add(per_step_key)
                varying = _varying_by_step(by_op.get(per_step_key, ()))
                if varying:
                    row["step_shapes"] = varying
            out.append(row)
        return out


MAX_SHAPES_PER_STEP = 16


def _dims(shapes: tuple) -> list:
    return [[int(d) if isinstance(d, int) else str(d) for d in s] for s in shapes]


def _varying_by_step(seen: Any) -> list:
    """[[step, [[input shapes, output shapes], ...]], ...] where the shapes a key ran with differ between the
    steps it ran in; [] where every step saw the same (the common case: nothing written)."""
    by_step: dict[int, set] = {}
    for step, ins, outs in seen:
        by_step.setdefault(step, set()).add((ins, outs))
    if len(by_step) < 2 or len({frozenset(v) for v in by_step.values()}) == 1:
        return []
    return [[step, [[_dims(ins), _dims(outs)] for ins, outs in sorted(calls, key=repr)[:MAX_SHAPES_PER_STEP]]]
            for step, calls in sorted(by_step.items())]


def _recording(census: Recording, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(real)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        census.record("api", name, args, kwargs)
        return real(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def wrapped_functions(census: Recording) -> Iterator[None]:
    """Record the calls of :data:`NOT_OVERRIDABLE` (module attributes patched, restored after)."""
    patches = []
    for qualified in NOT_OVERRIDABLE:
        module_name, _, attr = qualified.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        real = getattr(module, attr, None)
        if callable(real):
            setattr(module, attr, _recording(census, qualified, real))
            patches.append((module, attr, real))
    try:
        yield
    finally:
        for module, attr, real in patches:
            setattr(module, attr, real)


class ApiMode(TorchFunctionMode):
    def __init__(self, census: Recording) -> None:
        super().__init__()
        self.census = census

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = api_name(func)
        before = self.census.aten_calls
        result = func(*args, **(kwargs or {}))
        if name is not None:  # after the call: did it run a kernel, or only read metadata (is_complex)?
            dispatched = self.census.aten_calls != before
            user = self.census.record("api", name, args, kwargs, dispatched)
            if dispatched and self.census.flow.follow(self.census.current_phase()):
                self.census.flow.add(name, args, kwargs, result, user, self.census.in_reference())
        return result


class AtenMode(TorchDispatchMode):
    def __init__(self, census: Recording) -> None:
        super().__init__()
        self.census = census

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        schema = func._schema.name  # "aten::native_layer_norm"
        overload = func._overloadname
        name = schema if overload in ("default", "") else f"{schema}.{overload}"
        self.census.aten_calls += 1
        result = func(*args, **(kwargs or {}))
        self.census.record("aten", name, args, kwargs, outputs=result)  # after the call: its output shapes
        return result
