"""The enclosing module of each record of a dump without construct.json scopes (level L1 writes `{}`), rebuilt
from stack.json and the user's source, so an L1 cause names `blocks.1.attn (WindowAttention)` as a mix dump's.

A frame called from `torch/nn/modules/module.py` (`_call_impl`) is a module's forward being entered; the
frame outside it that made the call (its call site, `x = blk(x)`) names the module in its parent: the
attribute the call reads (`self.attn(...)`), an element of a ModuleList (`self.layers[i](x)`, or a loop
name over one, `for blk in self.blocks`), chosen among the line's calls by the class the callee runs (its
frame's class in the source, or for a torch module the class the parent's `__init__` assigns the
attribute). msprobe groups equal stacks, so the same frames stand for every block of a loop: calls are
told apart by execution order — a module's position (its frames' lines, outermost first) that goes back
outside a loop of its function, or a record that repeats the first record of the module's call, starts a
new call, and the k-th call from one call site of a loop is element k. The outermost module (the model)
is no module record in msprobe's scopes either: its own records keep no scope. Where a call site cannot be
read, the deeper records keep the last module that could be named."""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .user_source import source_tree

_FRAME = re.compile(r"^File (?P<file>.+?), line (?P<line>\d+), in (?P<func>[^,]+),?\s*(?P<code>.*)$", re.S)
_MODULE_CALL = ("torch/nn/modules/module.py", "torch\\nn\\modules\\module.py")
_LIBRARY = ("site-packages", "dist-packages")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str


def parse_frames(frames: Iterable[str]) -> tuple[Frame, ...]:
    """stack.json's frames (innermost first) as Frames, outermost first; unreadable ones dropped."""
    parsed = [Frame(m.group("file"), int(m.group("line")), m.group("func").strip())
              for f in frames if isinstance(f, str) and (m := _FRAME.match(f.strip()))]
    return tuple(reversed(parsed))


def _spans(node: ast.AST) -> tuple[int, int]:
    return node.lineno, getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=1024)
def _class_at(path: str, line: int) -> tuple[str, str]:
    """(class, method) of the innermost class whose method holds `line`; ("", "") outside one."""
    tree = source_tree(path)
    found = ("", "")
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)) if tree else ():
        for func in cls.body:
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) and _spans(func)[0] <= line <= _spans(func)[1]:
                found = (cls.name, func.name)
    return found


def _last_name(node: ast.expr) -> str:
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _self_attr(node: ast.expr) -> str:
    """`self.x` -> `x`; anything else ""."""
    return node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "self" else ""


@functools.lru_cache(maxsize=256)
def _constructed(path: str, class_name: str) -> dict[str, str]:
    """{attribute: class of the object `class_name` assigns it} (`self.qkv = nn.Linear(...)` -> Linear; tuple
    assignments too; `nn.ModuleList([Block(...) ...])` -> Block, an nn.Sequential stays one)."""
    tree = source_tree(path)
    found: dict[str, str] = {}
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name) if tree else ():
        for assign in (a for a in ast.walk(cls) if isinstance(a, ast.Assign)):
            for target in assign.targets:
                pairs = zip(target.elts, assign.value.elts) if isinstance(target, ast.Tuple) and \
                    isinstance(assign.value, ast.Tuple) else [(target, assign.value)]
                for name_node, value in pairs:
                    if (name := _self_attr(name_node)) and isinstance(value, ast.Call):
                        made = _last_name(value.func)
                        if made == "ModuleList" and value.args:  # never called itself: its elements are
                            inner = next((c for c in ast.walk(value.args[0]) if isinstance(c, ast.Call)), None)
                            made = _last_name(inner.func) if inner is not None else made
                        found.setdefault(name, made)
    return found


def _looped(function: ast.AST, name: str) -> str | None:
    """The attribute a `for name in self.x` (or `enumerate(self.x)`) of `function` iterates, "" for the module
    itself (`for module in self`, nn.Sequential's forward); None if none."""
    for loop in (n for n in ast.walk(function) if isinstance(n, (ast.For, ast.AsyncFor))):
        target, source = loop.target, loop.iter
        if isinstance(source, ast.Call) and _last_name(source.func) == "enumerate" and source.args:
            source = source.args[0]
            target = target.elts[-1] if isinstance(target, ast.Tuple) and target.elts else target
        if isinstance(target, ast.Name) and target.id == name:
            if isinstance(source, ast.Name) and source.id == "self":
                return ""
            if attr := _self_attr(source):
                return attr
    return None


@functools.lru_cache(maxsize=1024)
def _callees(path: str, line: int) -> tuple[tuple[str, bool], ...]:
    """The submodule calls at `line` of the method that holds it, in evaluation order (inner calls first):
    (attribute, whether it is an element of it: `self.x[i](...)`, a loop name over `self.x`)."""
    tree = source_tree(path)
    function = None
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _spans(node)[0] <= line <= _spans(node)[1]:
            function = node  # the innermost
    if function is None:
        return ()
    calls = [c for c in ast.walk(function) if isinstance(c, ast.Call) and _spans(c)[0] <= line <= _spans(c)[1]]
    exact = [c for c in calls if c.lineno == line] or calls
    found: list[tuple[int, int, tuple[str, bool]]] = []  # (end line, end column): inner calls end first
    for call in exact:
        func = call.func
        if attr := _self_attr(func):
            item = (attr, False)
        elif isinstance(func, ast.Subscript) and (attr := _self_attr(func.value)):
            item = (attr, True)
        elif isinstance(func, ast.Name) and (looped := _looped(function, func.id)) is not None:
            item = (looped, True)
        else:
            continue
        found.append((_spans(call)[1], call.end_col_offset or 0, item))
    return tuple(item for *_, item in sorted(found, key=lambda f: (f[0], f[1])))


def _matches(api: str, class_name: str) -> bool:
    """A torch module's class and the functional it records: Linear ~ Functional.linear, LayerNorm ~ layer_norm."""
    core = api.rsplit(".", 1)[-1].replace("_", "").lower()
    return bool(core) and core in class_name.lower()


_LOOPS = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)
_STATEMENTS = (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)


@functools.lru_cache(maxsize=1024)
def _goes_back_within(path: str, a: int, b: int) -> bool:
    """Whether lines `a` and `b` lie in one loop or one statement (a call over several lines is reported at
    its first line, after its arguments' lines ran): going back between them starts no new call."""
    tree = source_tree(path)
    return any(isinstance(n, _LOOPS + _STATEMENTS) and _spans(n)[0] <= min(a, b) and max(a, b) <= _spans(n)[1]
               for n in ast.walk(tree)) if tree else False


@dataclass
class _Call:
    """One call of a module: where it was entered from, how far its records have gone, its name."""
    entry: Frame
    site: Frame
    position: tuple[Frame, ...]
    first: tuple
    path: str | None
    class_name: str
    key: str
    calls_made: dict[tuple[str, int], int] = field(default_factory=dict)


def _entries(frames: tuple[Frame, ...]) -> list[tuple[int, int]]:
    """(index of a module's forward frame, index of its call site) for each module the frames enter."""
    found = []
    for i in range(1, len(frames)):
        if frames[i].file.endswith(_MODULE_CALL) or not frames[i - 1].file.endswith(_MODULE_CALL):
            continue
        site = next((j for j in range(i - 1, -1, -1) if not frames[j].file.endswith(_MODULE_CALL)), None)
        if site is not None:
            found.append((i, site))
    return found


def _restarts(call: _Call, position: tuple[Frame, ...], signature: tuple, leaf: bool) -> bool:
    """Whether a record at `position` begins a new call of the module `call` is: its position goes back (see
    the module docstring), or, a record of this module's own (`leaf`, no submodule entered), it repeats the
    first record of the call (a one-line forward called again)."""
    if leaf and signature == call.first and not any(_in_loop(f.file, f.line) for f in position):
        return True
    for old, new in zip(call.position, position):
        if (old.file, old.func) != (new.file, new.func):
            return False
        if new.line != old.line:
            return new.line < old.line and not _goes_back_within(new.file, old.line, new.line)
    return False


def _bounded_calls(site: Frame) -> int | None:
    """How many submodule calls one run of the call site's line makes (`self.fc2(self.act(self.fc1(x)))`: 3);
    None where unbounded (an element of a list, a line inside a loop)."""
    options = _callees(site.file, site.line)
    if not options or any(element for _, element in options) or _in_loop(site.file, site.line):
        return None
    return len(options)


@functools.lru_cache(maxsize=1024)
def _in_loop(path: str, line: int) -> bool:
    tree = source_tree(path)
    return any(isinstance(n, _LOOPS) and _spans(n)[0] <= line <= _spans(n)[1] for n in ast.walk(tree)) if tree else False


class _Tracker:
    def __init__(self) -> None:
        self.open: list[_Call] = []
        self.times: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []  # (class, key) of every module call, in order

    def _name(self, parent: _Call | None, site: Frame, entry: Frame, api: str, index: int) -> tuple[str | None, str]:
        """(path, class) of the `index`-th module entered at `entry` from `site` in its parent's call; path
        None where it cannot be read."""
        if parent is None:
            return "", _class_at(entry.file, entry.line)[0]
        if parent.path is None:
            return None, ""
        owner = _class_at(site.file, site.line)[0]
        built = _constructed(site.file, owner) if owner else {}
        own_class = "" if any(m in entry.file for m in _LIBRARY) else _class_at(entry.file, entry.line)[0]
        options = _callees(site.file, site.line)
        fits = [o for o in options if own_class and built.get(o[0]) == own_class] or \
            [o for o in options if not own_class and _matches(api, built.get(o[0], ""))] or list(options)
        if not fits:
            return None, ""
        if len({attr for attr, _ in fits}) > 1:  # more than one of the line's calls fit: the index-th call
            if index >= len(options) or options[index] not in fits:
                return None, ""
            fits = [options[index]]
        attr, element = fits[0]
        name = ".".join(filter(None, (attr, str(index)))) if element else attr
        # the class: the callee's frame's, else what the parent assigns the attribute, else the torch module's
        class_name = own_class or built.get(attr, "") or _class_at(entry.file, entry.line)[0]
        return (f"{parent.path}.{name}" if parent.path else name), class_name

    def _continues(self, depth: int, frames: tuple[Frame, ...], entries: list[tuple[int, int]], api: str) -> bool:
        """Whether the record at `frames` is in the open call of depth `depth` (see the module docstring)."""
        if depth >= len(self.open):
            return False
        call, (at, site) = self.open[depth], entries[depth]
        entry = frames[at]
        if (call.entry.file, call.entry.func) != (entry.file, entry.func) or \
                (call.site.file, call.site.line) != (frames[site].file, frames[site].line) or \
                _class_at(call.entry.file, call.entry.line) != _class_at(entry.file, entry.line):
            return False
        position = _position(frames, entries, depth)
        if _restarts(call, position, (api, position), depth + 1 == len(entries)):
            return False
        if depth + 1 < len(entries) and not self._continues(depth + 1, frames, entries, api):
            child_site = frames[entries[depth + 1][1]]
            most = _bounded_calls(child_site)  # one more call than the line makes: the line runs again
            return most is None or call.calls_made.get((child_site.file, child_site.line), 0) < most
        return True

    def scope(self, frames: tuple[Frame, ...], api: str) -> str:
        entries = _entries(frames)
        kept: list[_Call] = []
        for depth, (at, site) in enumerate(entries):
            if len(kept) == depth and self._continues(depth, frames, entries, api):
                self.open[depth].position = _position(frames, entries, depth)
                kept.append(self.open[depth])
                continue
            parent = kept[-1] if kept else None
            counted = (frames[site].file, frames[site].line)
            index = parent.calls_made.get(counted, 0) if parent else 0
            if parent is not None:
                parent.calls_made[counted] = index + 1
            path, class_name = self._name(parent, frames[site], frames[at], api, index)
            key = parent.key if parent else ""
            if path and class_name:
                number = self.times.get(path, 0)
                self.times[path] = number + 1
                key = f"Module.{path}.{class_name}.forward.{number}"
                self.calls.append((class_name, key))
            elif parent is not None:
                path = None
            position = _position(frames, entries, depth)
            kept.append(_Call(frames[at], frames[site], position, (api, position), path, class_name, key))
        self.open = kept
        return kept[-1].key if kept else ""


def _position(frames: tuple[Frame, ...], entries: list[tuple[int, int]], depth: int) -> tuple[Frame, ...]:
    """The frames of one module's own code: from its forward to the call site of the next module entered."""
    following = entries[depth + 1][1] + 1 if depth + 1 < len(entries) else len(frames)
    return frames[entries[depth][0]:following]


@functools.lru_cache(maxsize=256)
def _appliers(path: str, function_class: str) -> frozenset[str]:
    """The classes of `path` whose methods call `function_class.apply(...)` (an autograd.Function)."""
    tree = source_tree(path)
    if tree is None:
        return frozenset()
    return frozenset(cls.name for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))
                     for c in ast.walk(cls) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                     and c.func.attr == "apply" and _last_name(c.func.value) == function_class)


def _function_backward(frames: tuple[Frame, ...]) -> tuple[Frame, str] | None:
    """(frame, class) where a record without module frames runs in an autograd.Function's backward."""
    for frame in frames:
        if frame.func == "backward" and not any(m in frame.file for m in _LIBRARY):
            owner = _class_at(frame.file, frame.line)[0]
            if owner and _appliers(frame.file, owner):
                return frame, owner
    return None


class _Backwards:
    """The calls of each autograd.Function's backward, in order: autograd runs them in the reverse order of
    the forward calls that applied the Function, so the k-th from the end is the module whose forward
    applied it k-th from the start (`column_grad` all_reduce in the backward of the last ColumnParallelLinear)."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], list[list[str]]] = {}
        self.last: dict[tuple[str, str], _Call] = {}

    def add(self, key: str, api: str, frames: tuple[Frame, ...]) -> bool:
        found = _function_backward(frames)
        if found is None:
            return False
        frame, owner = found
        at = frames.index(frame)
        position = frames[at:]
        call = self.last.get((frame.file, owner))
        if call is None or _restarts(call, position, (api, position), True):
            self.last[(frame.file, owner)] = _Call(frame, frame, position, (api, position), None, owner, "")
            self.calls.setdefault((frame.file, owner), []).append([])
        else:
            call.position = position
        self.calls[(frame.file, owner)][-1].append(key)
        return True

    def scopes(self, module_calls: list[tuple[str, str]]) -> dict[str, str]:
        found: dict[str, str] = {}
        for (file, owner), calls in self.calls.items():
            applied = [key for class_name, key in module_calls if class_name in _appliers(file, owner)]
            if len(applied) == len(calls):
                for keys, module in zip(calls, reversed(applied)):
                    found |= dict.fromkeys(keys, module.replace(".forward.", ".backward."))
        return found


def scopes_from_stacks(ordered: Iterable[tuple[str, str, tuple[Frame, ...]]]) -> dict[str, str]:
    """{record key: `Module.<path>.<Class>.<direction>.<n>`} from (key, api, frames) in execution order; a
    backward record takes its forward's module (msprobe names the backward's scope so too), a record in an
    autograd.Function's backward the module that applied it (`_Backwards`)."""
    tracker, backwards = _Tracker(), _Backwards()
    found: dict[str, str] = {}
    for key, api, frames in ordered:
        if not key.endswith(".forward") or not frames:
            continue
        if (scope := tracker.scope(frames, api)):
            found[key] = scope
        elif not tracker.open:
            backwards.add(key, api, frames)
    for key, scope in list(found.items()):
        found[key.removesuffix(".forward") + ".backward"] = scope.replace(".forward.", ".backward.")
    return found | backwards.scopes(tracker.calls)
