"""Static performance lint (the `perf` family, `rules/perf.yaml`): what costs time on Ascend before
there is a profile to show it.

The hot path is the body of `forward` and of a training loop (a `for`/`while` whose body calls
`.backward()`). A host-device sync there stalls the task queue once per step; under a logging
condition (`if step % N == 0`, `if ... log ...`) it is paid once per N steps, so it is info.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from migrator.engine import perf_env
from migrator.engine.fast_visitor import FastVisitor
from migrator.engine.fusion_checker import Emit, Names, src
from migrator.engine.node_walk import walk_nodes

SYNC_METHODS = ("item", "cpu", "tolist")
NONZERO = {"torch.nonzero", "torch.argwhere"}
FLOAT64 = {"torch.float64", "torch.double"}
SYNC_BATCHNORM = {"torch.nn.SyncBatchNorm", "torch.nn.modules.batchnorm.SyncBatchNorm"}
DATALOADER = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
HOT_FUNCTIONS = ("forward", "training_step", "train_step")
# calls whose result is a host value, not a tensor: `n = len(x)`, `lr = sched.get_last_lr()[0]`
HOST_CALLS = frozenset({"len", "int", "float", "str", "bool", "range", "enumerate", "zip", "round", "min", "max",
                        "sum", "abs", "time", "perf_counter", "item", "tolist", "size", "dim", "numel", "format",
                        "get_last_lr", "isinstance", "getattr", "next", "iter"})
LOGGING_WORDS = re.compile(r"log|print|verbose|report|display|eval", re.IGNORECASE)


def _is_logging_condition(test: ast.expr) -> bool:
    """`step % N == 0` or a condition naming logging (`rank == 0 and args.log`)."""
    for node in walk_nodes(test):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return True
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        if name and LOGGING_WORDS.search(name):
            return True
    return False


def _backward_loops(tree: ast.AST) -> set[int]:
    """ids of the loops whose body calls `.backward()`, in one post-order pass (not a walk per loop)."""
    loops: set[int] = set()
    calls: dict[int, bool] = {}
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, children_done = stack.pop()
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in ast.iter_child_nodes(node))
            continue
        found = (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "backward"
                 or any(calls.pop(id(child), False) for child in ast.iter_child_nodes(node)))
        calls[id(node)] = found
        if found and isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
            loops.add(id(node))
    return loops


def hot_regions(tree: ast.AST, loops: bool = True) -> Iterator[ast.AST]:
    """`forward`-like functions and outermost training loops (each node is in at most one region);
    `loops=False` where the module never calls `backward` (no loop can be a training loop)."""
    training_loops = _backward_loops(tree) if loops else set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in HOT_FUNCTIONS:
            yield node
        elif id(node) in training_loops:
            yield node
        else:
            stack.extend(ast.iter_child_nodes(node))


@dataclass(frozen=True)
class Structure:
    """What the checker's one pass already found, in source order: no walk of our own."""

    functions: Sequence[ast.FunctionDef | ast.AsyncFunctionDef]
    loops: Sequence[ast.For | ast.AsyncFor | ast.While]
    backward_lines: Sequence[int]  # lines where a `.backward(...)` call starts
    # lines where a subscript by a comparison (`x[x > 0]`) starts, every one in the module (None: not known)
    mask_lines: Sequence[int] | None = None

    def hot_regions(self) -> Iterator[ast.AST]:
        """`hot_regions` from the recorded functions and loops: a loop is a training loop when a
        `.backward()` call starts within its lines; the outermost region wins, as there."""
        backward = sorted(self.backward_lines)

        def trains(loop: ast.AST) -> bool:
            i = bisect.bisect_left(backward, loop.lineno)  # type: ignore[attr-defined]
            return i < len(backward) and backward[i] <= (loop.end_lineno or loop.lineno)  # type: ignore[attr-defined]

        candidates: list[ast.stmt] = [f for f in self.functions if f.name in HOT_FUNCTIONS]
        if backward:
            candidates += [loop for loop in self.loops if trains(loop)]
        region_end = 0
        for node in sorted(candidates, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno))):
            if node.lineno > region_end:  # one inside a region is not its own
                region_end = node.end_lineno or node.lineno
                yield node


# methods only a tensor has among the values a training loop prints (a name called with one is a tensor)
TENSOR_METHODS = frozenset(("backward", "item", "detach", "cpu", "numpy", "tolist", "size", "dim", "numel",
                            "view", "reshape", "argmax", "softmax", "contiguous", "clone", "float", "bfloat16"))


def _host_value(value: ast.expr) -> bool:
    """A value that is surely no tensor: a literal, a host call, a shape."""
    if isinstance(value, (ast.Constant, ast.JoinedStr, ast.List, ast.Dict, ast.Set, ast.Tuple, ast.Compare)):
        return True
    if isinstance(value, ast.Attribute):
        return value.attr in ("shape", "dtype", "device")
    if isinstance(value, ast.Subscript):
        return _host_value(value.value)
    if isinstance(value, ast.BinOp):  # `x.item() * 100`; `loss * 2` stays a tensor
        return _host_value(value.left) and _host_value(value.right)
    if isinstance(value, ast.UnaryOp):
        return _host_value(value.operand)
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in HOST_CALLS
    return False


def tensor_names(region: ast.AST) -> set[str]:
    """Names in a hot region that hold a tensor as far as the syntax tells: forward's arguments,
    the training loop's targets and names assigned from a call or an expression that is no host value.
    A name also assigned a host value anywhere in the region is left out (a print of it may be an int)."""
    tensors: set[str] = set()
    host: set[str] = set()
    if isinstance(region, (ast.FunctionDef, ast.AsyncFunctionDef)):
        tensors.update(a.arg for a in region.args.args[1:] if a.arg != "self")
    elif isinstance(region, (ast.For, ast.AsyncFor)):
        target, source = region.target, region.iter
        over = source.func.id if isinstance(source, ast.Call) and isinstance(source.func, ast.Name) else ""
        if over == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
            host.update(n.id for n in ast.walk(target.elts[0]) if isinstance(n, ast.Name))  # the index
        (host if over == "range" else tensors).update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    unknown: set[str] = set()  # from a plain function's call (`lr = get_lr(step)`): a tensor only if used as one
    used_as_tensor: set[str] = set()
    for node in ast.walk(region):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = node.value
            plain_call = isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            bucket = host if _host_value(value) else unknown if plain_call else tensors
            bucket.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.For, ast.AsyncFor)) and node is not region:
            host.update(n.id for n in ast.walk(node.target) if isinstance(n, ast.Name))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_METHODS
              and isinstance(node.func.value, ast.Name)):
            used_as_tensor.add(node.func.value.id)
    return (tensors | (unknown & used_as_tensor)) - host


def printed_tensor(call: ast.Call, tensors: set[str]) -> ast.expr | None:
    """The first argument of `print(...)` that is a tensor name (also inside an f-string), else None."""
    for arg in call.args:
        values = [v.value for v in arg.values if isinstance(v, ast.FormattedValue)] if isinstance(arg, ast.JoinedStr) else [arg]
        for value in values:
            if isinstance(value, ast.Name) and value.id in tensors:
                return value
    return None


class HotPath(FastVisitor):
    """Walks one hot region, knowing whether each node sits under a logging condition (`self.logging`);
    nested definitions are not walked (they run when called, not per step here)."""

    def __init__(self, names: Names, emit: Emit, text: str, float64_named: bool | None = None,
                 present: AbstractSet[str] | None = None) -> None:
        self.names = names
        self.emit = emit
        present = _present(text, present)
        # resolving every call's and attribute's name is most of the cost: only where the module names them
        self.nonzero_named = "nonzero" in present or "argwhere" in present
        self.float64_named = _names_float64(text, present) if float64_named is None else float64_named
        self.prints = "print" in present
        self.region: ast.AST | None = None
        self._tensors: set[str] | None = None
        self.logging = False

    def walk_region(self, region: ast.AST) -> None:
        self.region, self._tensors = region, None  # its tensor names: at its first `print(...)`, if any
        self.logging = False
        self.generic_visit(region)

    @property
    def tensors(self) -> set[str]:
        """The region's `tensor_names`, found once, where a `print` call asks (a walk of its own per region)."""
        if self._tensors is None:
            self._tensors = tensor_names(self.region) if self.prints and self.region is not None else set()
        return self._tensors

    def skip(self, node: ast.AST) -> None:
        """A nested definition, or a leaf (`Name`, `Constant`: no child `check` could report)."""

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_Name = visit_Constant = skip

    def visit_Call(self, node: ast.AST) -> None:  # the only nodes `check` reports: calls, subscripts, attributes
        self.check(node, self.logging)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        """`check`'s subscript case, without the call."""
        if isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Compare):
            self.emit("host-sync-logging" if self.logging else "host-sync-hot-path", node, "boolean-mask indexing",
                      src(node))
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        """Under `if step % N == 0:` the body runs once per N steps: what it holds is logging."""
        if self.logging or not _is_logging_condition(node.test):
            self.generic_visit(node)
            return
        self.generic_visit(node.test)  # the condition's parts (not the condition itself), as its branches'
        self.logging = True
        for stmt in node.body:
            self.generic_visit(stmt)
        self.logging = False
        for stmt in node.orelse:
            self.generic_visit(stmt)

    def check(self, node: ast.AST, logging: bool) -> None:
        impl = "host-sync-logging" if logging else "host-sync-hot-path"
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in SYNC_METHODS and not node.args and not node.keywords:
                self.emit(impl, node, f".{func.attr}()", src(func.value))
            elif self.nonzero_named and (self.names(func) & NONZERO or (
                    isinstance(func, ast.Attribute) and func.attr == "nonzero" and not self.names(func))):
                self.emit(impl, node, "nonzero", src(node))
            elif isinstance(func, ast.Attribute) and func.attr == "double" and not node.args:
                self.emit("float64-hot-path", node, ".double()", src(func.value))
            elif isinstance(func, ast.Name) and func.id == "print" and self.tensors:
                printed = printed_tensor(node, self.tensors)
                if printed is not None:
                    self.emit("host-sync-logging" if logging else "tensor-print-hot-path", node, "print", src(printed))
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Compare):
            self.emit(impl, node, "boolean-mask indexing", src(node))
        elif isinstance(node, ast.Attribute) and self.float64_named and self.names(node) & FLOAT64:
            self.emit("float64-hot-path", node, src(node), src(node))


class HotPathFloat64(HotPath):
    """`HotPath` where the module names float64: each attribute is checked too (elsewhere `check` reports
    no attribute, so `HotPath` visits only an attribute's children)."""

    visit_Attribute = HotPath.visit_Call


# what a module-wide site names in the source text (no need to resolve every call's name without them)
WHOLE_MODULE_WORDS = ("SyncBatchNorm", "sync_batchnorm", "DataLoader", *perf_env.VARIABLES)
# the words `check` asks a module's text about (`module_check.advice_words` finds them in one pass)
TEXT_WORDS = ("nonzero", "argwhere", "float64", "double", "print", *WHOLE_MODULE_WORDS)


def _present(text: str, present: AbstractSet[str] | None) -> AbstractSet[str]:
    """The `TEXT_WORDS` the text holds: `present` where the caller found them."""
    return {word for word in TEXT_WORDS if word in text} if present is None else present


def _names_float64(text: str, present: AbstractSet[str] | None = None) -> bool:
    present = _present(text, present)
    return "float64" in present or "double" in present


def hot_path(names: Names, emit: Emit, text: str, present: AbstractSet[str] | None = None) -> HotPath:
    """The walker for a module's hot regions; `present`: the `TEXT_WORDS` the text holds, where known."""
    present = _present(text, present)
    float64_named = _names_float64(text, present)
    return (HotPathFloat64 if float64_named else HotPath)(names, emit, text, float64_named, present)


def check_whole_module(tree: ast.AST, names: Names, emit: Emit) -> None:
    """Sites that cost wherever they are: SyncBatchNorm, DataLoader settings, environment settings."""
    loaders: list[ast.Call] = []
    assignments: list[ast.Assign] = []  # read (each target unparsed) only where a DataLoader is made
    defined: set[str] = set()
    for node in walk_nodes(tree):  # `ast.walk`'s order: the sites are reported in it
        if isinstance(node, ast.Call):
            qualnames = names(node.func)
            if qualnames & SYNC_BATCHNORM or (isinstance(node.func, ast.Attribute)
                                              and node.func.attr == "convert_sync_batchnorm"):
                emit("sync-batchnorm", node, src(node.func), src(node.func))
            elif qualnames & DATALOADER and not any(k.arg is None for k in node.keywords):
                loaders.append(node)
            else:
                _environment(node, emit)
        elif isinstance(node, ast.Assign):
            assignments.append(node)
            _environment(node, emit)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defined.add(node.name)
    if not loaders:
        return
    # `self.dataset = ...`: what a DataLoader's dataset name was made from (the last assignment in walk order)
    assigned = {src(target): node.value for node in assignments for target in node.targets}
    for loader in loaders:
        _dataloader(loader, emit, _sampled_by_own_method(loader, assigned, defined))


def _sampled_by_own_method(loader: ast.Call, assigned: dict[str, ast.expr], defined: set[str]) -> bool:
    """The loader's dataset is made from one of the object's own methods, directly or through the name it
    was assigned to (`ExperienceSourceDataset(self.train_batch)`: RL rollouts stepped with the object's own
    network): its samples come from the training process itself; a worker would step a copy of them."""
    dataset = next((k.value for k in loader.keywords if k.arg == "dataset"), loader.args[0] if loader.args else None)
    made = assigned.get(src(dataset), dataset) if isinstance(dataset, (ast.Name, ast.Attribute)) else dataset
    if not isinstance(made, ast.Call):
        return False
    return any(isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) and arg.value.id == "self"
               and arg.attr in defined for arg in (*made.args, *(k.value for k in made.keywords)))


def _dataloader(node: ast.Call, emit: Emit, own_samples: bool = False) -> None:
    given = {k.arg: k.value for k in node.keywords if k.arg}
    wanted = {"pin_memory": "pin_memory=True"} if own_samples else {"num_workers": "num_workers > 0",
                                                                    "pin_memory": "pin_memory=True"}
    missing = [setting for k, setting in wanted.items() if k not in given
               or (isinstance(given[k], ast.Constant) and given[k].value in (0, False))]  # type: ignore[attr-defined]
    if missing:
        emit("dataloader-workers", node, "DataLoader", " and ".join(missing))


def _environment(node: ast.AST, emit: Emit) -> None:
    """`os.environ["TASK_QUEUE_ENABLE"] = "0"` and the like (`perf_env.ENV_RULES`)."""
    found = perf_env.python_setting(node)
    if found is not None:
        rule, value = found
        emit(rule.impl, node, f"{rule.variable}={value}", rule.fix)


def check(tree: ast.AST, text: str, names: Names, emit: Emit, structure: Structure | None = None,
          lines: Callable[[], Sequence[str]] | None = None, aliases: Mapping[str, Iterable[str]] | None = None,
          present: AbstractSet[str] | None = None) -> None:
    """`structure`: the module's functions and loops where the caller has them (saves two walks); `lines`
    and `aliases` (what gives the source's lines, asked at the first region; the imports' local names): a region
    whose lines cannot hold a finding
    is not walked (`RegionGate`); `present`: the `TEXT_WORDS` the text holds, where the caller found them."""
    walker: HotPath | None = None  # made at the first region (its word tests read the whole text)
    gate: RegionGate | None = None
    regions = structure.hot_regions() if structure is not None else hot_regions(tree, "backward" in text)
    for region in regions:
        walker = walker or hot_path(names, emit, text, present)
        if lines is not None:
            gate = gate or RegionGate(walker, lines(), aliases or {}, structure.mask_lines if structure else None)
            if not gate.may_hold(region):
                continue
        walker.walk_region(region)
    if any(word in text for word in WHOLE_MODULE_WORDS) if present is None else not present.isdisjoint(WHOLE_MODULE_WORDS):
        check_whole_module(tree, names, emit)


# a comparison's operator, for a boolean-mask index (`x[mask > 0]`, `x[i in keep]`)
COMPARISON_SIGNS = ("<", ">", "==", "!=")
KEYWORD_COMPARISON = re.compile(r"\bi[ns]\b")


class RegionGate:
    """Whether a hot region's lines hold a word one of `HotPath.check`'s findings needs: a sync method, `double`,
    `print`; `nonzero`, `float64` (or a local name an import binds to one) where the walker looks for them; or a
    boolean mask: a subscript by a comparison starting on one of its lines (`mask_lines`, where the checker's
    traversal recorded them; else a `[` and a comparison in its text). A region without any is not walked: its
    walk would report nothing. The words only for ASCII lines (an identifier in other letters may be spelled
    otherwise in the text: NFKC)."""

    def __init__(self, walker: HotPath, lines: Sequence[str], aliases: Mapping[str, Iterable[str]],
                 mask_lines: Sequence[int] | None = None) -> None:
        self.lines = lines
        # most regions index with `[` and compare somewhere, few by a comparison: the lines tell them apart
        self.mask_lines = sorted(mask_lines) if mask_lines is not None else None
        words = [*SYNC_METHODS, "double", "print"]
        named = [*(("nonzero", "argwhere") if walker.nonzero_named else ()),
                 *(("float64", "double") if walker.float64_named else ())]
        # `from torch import nonzero as nz`, `self.f = ...`: the local name's last part is in the text where used
        words += named + [local.rsplit(".", 1)[-1] for local, bound in aliases.items()
                          if any(word in b for b in bound for word in named)]
        self.words = tuple(dict.fromkeys(words))

    def may_hold(self, region: ast.AST) -> bool:
        first = min([region.lineno, *(d.lineno for d in getattr(region, "decorator_list", ()))])  # type: ignore[attr-defined]
        last = region.end_lineno or region.lineno  # type: ignore[attr-defined]
        masks = self.mask_lines
        if masks is not None:
            i = bisect.bisect_left(masks, first)
            if i < len(masks) and masks[i] <= last:
                return True
        segment = "\n".join(self.lines[first - 1:last])
        if last > len(self.lines) or not segment.isascii():
            return True
        if any(word in segment for word in self.words):
            return True
        if masks is not None:
            return False  # no word, and no mask starts on its lines (above)
        return "[" in segment and (any(op in segment for op in COMPARISON_SIGNS) or KEYWORD_COMPARISON.search(segment) is not None)
