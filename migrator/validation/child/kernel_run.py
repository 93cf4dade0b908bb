"""Run one Triton kernel, original and ported, under upstream Triton's interpreter on the same inputs.

    TRITON_INTERPRET=1 python -m migrator.validation.child.kernel_run JOB.json RESULT.json

The parent (`validation/parent/kernel_check.py`) writes the job and grades the result; this process
imports torch and triton. Each file's kernels are loaded alone: its imports (each allowed to fail, e.g.
`torch_npu` here), constants and `@triton.*` functions, so the host script around them never runs. Every
store the interpreter makes is attributed to the program (block) that made it, so the first differing
element can be named with the block of the original that wrote it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import sys
import time
import traceback
from pathlib import Path
from typing import Any

PROGRAMS_PARAM = "N_PROGRAMS"  # the persistent rewrite's parameter (migrator/engine/triton_persistent.py)


def _indent(code: str) -> str:
    return "    " + code.replace("\n", "\n    ")


def _simple_assign(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None and all(
        not isinstance(n, ast.Call) or "constexpr" in ast.unparse(n.func) for n in ast.walk(node.value))


def _imports_only(body: list[ast.stmt]) -> bool:
    """Statements that only bind imported names or constants (`if`/`try` around them included)."""
    for node in body:
        if isinstance(node, ast.If):
            ok = _imports_only(node.body) and _imports_only(node.orelse)
        elif isinstance(node, ast.Try):
            ok = all(_imports_only(b) for b in (node.body, node.orelse, *(h.body for h in node.handlers)))
        else:
            ok = isinstance(node, ast.Import | ast.ImportFrom | ast.Pass) or _simple_assign(node)
        if not ok:
            return False
    return True


def _branches(node: ast.If | ast.Try) -> list[list[ast.stmt]]:
    if isinstance(node, ast.Try):
        return [node.body + node.orelse, *(h.body for h in node.handlers)]
    if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
        return [node.body, *_branches(node.orelse[0])]
    return [node.body, node.orelse] if node.orelse else [node.body]


def _first_that_runs(branches: list[list[ast.stmt]]) -> str:
    if not branches:
        return "pass"
    return (f"try:\n{_indent(ast.unparse(ast.Module(branches[0], type_ignores=[])))}\n"
            f"except Exception:\n{_indent(_first_that_runs(branches[1:]))}")


def _guarded_imports(segment: str, node: ast.If | ast.Try) -> str:
    """A module-level `if`/`try` choosing an import (`if compare_version("triton", ...): from ...libdevice import
    rsqrt else: from triton.language.math import rsqrt`): run as written; where its test needs a name this
    file's failed imports did not bind, the first branch whose imports succeed."""
    return f"try:\n{_indent(segment)}\nexcept Exception:\n{_indent(_first_that_runs(_branches(node)))}"


def _kernel_source(text: str) -> str:
    """Imports (each in try/except, conditional ones too), simple constants and `@triton.*`-decorated
    functions of a module."""
    tree = ast.parse(text)
    keep: list[str] = []
    for node in tree.body:
        segment = ast.get_source_segment(text, node) or ""
        if isinstance(node, ast.Import | ast.ImportFrom):
            keep.append(_import_or_stand_ins(segment, node))
        elif isinstance(node, ast.If | ast.Try) and _imports_only([node]):
            keep.append(_guarded_imports(segment, node))
        elif isinstance(node, ast.FunctionDef) and any("triton" in ast.unparse(d) or "jit" in ast.unparse(d)
                                                       for d in node.decorator_list):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            keep.append("\n".join(text.splitlines()[first - 1:node.end_lineno]))
        elif _simple_assign(node):
            keep.append(segment)
    return f"from {__name__} import Unavailable as _MigrateUnavailable\n\n" + "\n\n".join(keep) + "\n"


class Unavailable(dict):
    """A name the kernel file imports from a package this process lacks (`from fla.utils import
    autotune_cache_kwargs`): an empty mapping, so `@triton.autotune(..., **autotune_cache_kwargs)` still
    loads; any call or attribute names the import."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.missing = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"`{self.missing}` is imported by the kernel's file but cannot be imported here")

    def __getattr__(self, attr: str) -> Any:
        if attr == "missing":
            raise AttributeError(attr)
        raise ImportError(f"`{self.missing}.{attr}`: the kernel's file imports it, but it cannot be imported here")


def _import_or_stand_ins(segment: str, node: ast.Import | ast.ImportFrom) -> str:
    """The import; where it fails, each name it binds is an `Unavailable` naming it."""
    stand_ins = [f"{alias.asname or alias.name.split('.')[0]} = _MigrateUnavailable({alias.name!r})"
                 for alias in node.names if alias.name != "*"]
    return f"try:\n{_indent(segment)}\nexcept ImportError:\n{_indent(chr(10).join(stand_ins) or 'pass')}"


def _interpreter_shims() -> None:
    """What Triton 3.2's interpreter lacks here. NumPy >= 2.3 no longer turns a one-element array into an
    int, which `range(0, N, BLOCK)` over a runtime `N` needs; libdevice has no interpreter implementation,
    so its functions run as the `tl.math` function of the same name (the interpreter cannot tell the two
    apart: a libdevice -> tl.math port is compared as equal here, validate it on the device). A Python float
    argument stays a float in the interpreter, where a compiled kernel gets an fp32 scalar (`eps.to(tl.float32)`
    in Liger's norms), so it is passed as one. `@triton.autotune` asks the GPU driver for its benchmarker
    when the module loads; here its first config runs (`_unwrap`), so nothing is benchmarked."""
    import numpy as np
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.runtime import autotuner, interpreter

    autotune_init = autotuner.Autotuner.__init__

    def no_benchmark(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the autotuner does not benchmark under the interpreter")

    def init_without_driver(self: Any, *args: Any, do_bench: Any = None, **kwargs: Any) -> None:
        autotune_init(self, *args, do_bench=do_bench or no_benchmark, **kwargs)

    autotuner.Autotuner.__init__ = init_without_driver

    patch_tensor, convert = interpreter._patch_lang_tensor, interpreter._implicit_cvt

    def patched(tensor: Any) -> None:
        patch_tensor(tensor)
        tensor.__index__ = lambda self: int(self.handle.data.reshape(-1)[0])

    def implicit_cvt(arg: Any) -> Any:
        if isinstance(arg, float):
            return tl.tensor(interpreter.TensorHandle(np.array([arg], dtype=np.float32), tl.float32), tl.float32)
        return convert(arg)

    interpreter._patch_lang_tensor, interpreter._implicit_cvt = patched, implicit_cvt

    def late(name: str) -> Any:  # tl.math's function as the interpreter patches it at the launch
        return lambda *args, **kwargs: getattr(tl.math, name)(*args, **kwargs)

    for name in dir(tl.math):
        if not name.startswith("_") and callable(getattr(tl.math, name)) and hasattr(libdevice, name):
            setattr(libdevice, name, late(name))


def load_kernel(path: str, name: str, workdir: Path, tag: str) -> Any:
    source = _kernel_source(Path(path).read_text(encoding="utf-8"))
    module_path = workdir / f"{tag}_{Path(path).stem}.py"
    module_path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_migrate_kernel_{tag}", module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, name, None)
    if kernel is None:
        raise LookupError(f"{path}: no `{name}` (a @triton.jit function) in this file")
    return kernel


def _unwrap(kernel: Any, kwargs: dict[str, Any]) -> Any:
    """The interpreted function under `@triton.autotune` (its first config) and `@triton.heuristics`."""
    from triton.runtime.interpreter import InterpretedFunction

    while not isinstance(kernel, InterpretedFunction) and hasattr(kernel, "fn"):
        configs = getattr(kernel, "configs", None)
        if configs:
            for key, value in configs[0].kwargs.items():
                kwargs.setdefault(key, value)
        for key, rule in getattr(kernel, "values", {}).items():
            kwargs.setdefault(key, rule(dict(kwargs)))
        kernel = kernel.fn
    return kernel


def make_inputs(args: list[dict], seed: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    values: dict[str, Any] = {}
    for arg in args:
        if "value" in arg:
            values[arg["name"]] = arg["value"]
            continue
        dtype = getattr(torch, arg["dtype"])
        shape, low, high = tuple(arg["shape"]), arg.get("low"), arg.get("high")
        if dtype.is_floating_point:
            t = (torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low if low is not None
                 else torch.randn(shape, generator=gen, dtype=torch.float64))
        elif dtype == torch.bool:
            t = torch.rand(shape, generator=gen) < 0.5
        else:
            t = torch.randint(int(low or 0), int(high or 16), shape, generator=gen, dtype=torch.int64)
        values[arg["name"]] = t.to(dtype).contiguous()
    return values


class StoreLog:
    """Which program (linear id) last wrote each element of each tensor argument."""

    def __init__(self, tensors: dict[str, Any]) -> None:
        import numpy as np

        self.np = np
        self.spans = [(n, t.data_ptr(), t.numel() * t.element_size(), t.element_size()) for n, t in tensors.items()]
        self.writer = {n: np.full(t.numel(), -1, dtype=np.int64) for n, t in tensors.items()}

    def __enter__(self) -> StoreLog:
        from triton.runtime.interpreter import interpreter_builder as builder

        self.builder = builder
        store, rmw = builder.create_masked_store, builder.create_atomic_rmw

        def masked_store(ptrs: Any, value: Any, mask: Any, *rest: Any) -> Any:
            self.record(ptrs.data, mask.data)
            return store(ptrs, value, mask, *rest)

        def atomic_rmw(op: Any, ptr: Any, val: Any, mask: Any, *rest: Any) -> Any:
            self.record(ptr.data, mask.data)
            return rmw(op, ptr, val, mask, *rest)

        builder.create_masked_store, builder.create_atomic_rmw = masked_store, atomic_rmw
        return self

    def __exit__(self, *exc: object) -> None:
        del self.builder.create_masked_store, self.builder.create_atomic_rmw  # back to the class's methods

    def record(self, addresses: Any, mask: Any) -> None:
        np = self.np
        x, y, z = self.builder.grid_idx
        gx, gy, _ = self.builder.grid_dim
        program = x + gx * (y + gy * z)
        addresses = np.asarray(addresses, dtype=np.uint64)
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape).reshape(-1)
        addresses = addresses.reshape(-1)
        for name, base, size, item in self.spans:
            inside = mask & (addresses >= base) & (addresses < base + size)
            if inside.any():
                self.writer[name][((addresses[inside] - base) // item).astype(np.int64)] = program


def run_side(kernel_path: str, name: str, args: list[dict], grid: list[int], seed: int, workdir: Path, tag: str,
             cores: int | None) -> tuple[dict[str, Any], StoreLog, float]:
    import torch

    kernel = load_kernel(kernel_path, name, workdir, tag)
    values = make_inputs(args, seed)
    kwargs = dict(values)
    fn = _unwrap(kernel, kwargs)
    launch_grid = tuple(grid)
    if PROGRAMS_PARAM in getattr(fn, "arg_names", ()) and PROGRAMS_PARAM not in kwargs:
        programs = math.prod(grid)  # the persistent port: the original grid's programs over `cores` programs
        kwargs[PROGRAMS_PARAM] = programs
        launch_grid = (min(programs, cores or programs),)
    tensors = {k: v for k, v in values.items() if isinstance(v, torch.Tensor)}
    with StoreLog(tensors) as log:
        start = time.perf_counter()
        fn[launch_grid](**kwargs)
        seconds = time.perf_counter() - start
    return tensors, log, seconds


def compare(name: str, original: Any, ported: Any, tolerance: float, log_o: StoreLog, log_p: StoreLog) -> dict:
    import torch

    from migrator.validation import metrics

    o, p = original.reshape(-1).double(), ported.reshape(-1).double()
    out: dict[str, Any] = {"name": name, "dtype": str(original.dtype).removeprefix("torch."), "numel": o.numel(),
                           "shape": list(original.shape), "rel_l2": metrics.rel_l2(p, o), "max_abs": metrics.max_abs(p, o)}
    scale = float(o[torch.isfinite(o)].abs().max()) if torch.isfinite(o).any() else 1.0
    differs = ~((p - o).abs() <= tolerance * max(scale, 1e-30)) & ~(torch.isnan(o) & torch.isnan(p))
    hits = torch.nonzero(differs).reshape(-1)
    out["differing"] = int(hits.numel())
    if hits.numel():
        i = int(hits[0])
        coords, rest = [], i
        for d in reversed(original.shape):
            coords.append(rest % d)
            rest //= d
        block, ported_block = int(log_o.writer[name][i]), int(log_p.writer[name][i])
        out["first"] = {"index": i, "coords": coords[::-1], "original": float(o[i]), "ported": float(p[i]),
                        "block": block if block >= 0 else None, "ported_block": ported_block if ported_block >= 0 else None}
    return out


def run(job: dict) -> dict:
    workdir = Path(job["workdir"])
    _interpreter_shims()
    sides: dict[str, Any] = {}
    for tag, path in (("original", job["original"]), ("ported", job["ported"])):
        try:
            sides[tag] = run_side(path, job["kernel"], job["args"], job["grid"], job["seed"], workdir, tag, job.get("cores"))
        except BaseException as exc:  # noqa: BLE001 - the user's kernel: any failure is this side's result
            return {"error": f"the {tag} kernel ({path}) did not run: {type(exc).__name__}: {exc}",
                    "trace": traceback.format_exc(limit=-3)}
    (t_o, log_o, s_o), (t_p, log_p, s_p) = sides["original"], sides["ported"]
    outputs = [compare(n, t_o[n], t_p[n], job["tolerances"].get(str(t_o[n].dtype).removeprefix("torch."), 0.0),
                       log_o, log_p) for n in t_o]
    return {"outputs": outputs, "seconds": {"original": s_o, "ported": s_p}}


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    Path(argv[1]).write_text(json.dumps(run(job)), encoding="utf-8")
    return 0


if __name__ == "__main__":
    from migrator.validation.child.warm import delegate
    from migrator.validation.child.worker import finish

    code = delegate(sys.argv[1:], module="migrator.validation.child.kernel_run")  # forked when a zygote serves
    finish(main(sys.argv[1:]) if code is None else code)
