"""The coverage family: every torch op call looked up in the generated op-coverage table.

Statuses map to rules: unsupported (OPS002), CPU fallback (OPS003), partial with a dtype the module
uses outside the documented list (OPS004, info), unverified (OPS005, info); float64 use where the op lacks fp64 (OPS006); Tensor
methods on receivers of unknown type (OPS007, off by default, only unsupported / CPU fallback); the work-arounds
human ports made where the table still needs them (OPS010 dtype, OPS011 argument: `engine/op_workarounds.py`).

With an op census (`.migrate/op-trace.json`, `migrate ops --trace`), a partial op the traced
training step ran is judged on the dtypes it really ran with: no note inside the documented
dtypes, OPS002 outside them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Container, Iterator
from functools import lru_cache
from typing import TYPE_CHECKING, Any, cast

from migrator.ground.model import CoverageInfo

if TYPE_CHECKING:
    from migrator.catalogue.coverage import CoverageEntry
    from migrator.engine.python_checker import PythonChecker

# (impl or None, node, symbol, message, coverage, op name or None, the program's status or None)
Located = ast.expr | ast.stmt | ast.alias  # a node with a source position
CoverageHit = tuple[str | None, Located, str, str, CoverageInfo | None, str | None, str | None]
Traced = dict[str, Any]  # API name -> the dtypes the op census saw it run in

STATUS_IMPL = {
    "unsupported": "op-unsupported",
    "cpu_fallback": "op-cpu-fallback",
    "partial": "op-partial",
    "unverified": "op-unverified",
}
INFO_ONCE = {"op-partial", "op-unverified"}
SETUP_PREFIXES = ("torch.nn.init.",)
# Methods common on non-tensors: a receiver of unknown type calling these is not evidence of a tensor.
AMBIGUOUS_METHODS = {"split", "join", "format", "get", "items", "keys", "values", "append", "update", "copy", "sort",
                     "index", "count", "pop", "replace", "strip", "read", "write", "close", "add", "clear", "insert",
                     "remove", "extend", "find", "lower", "upper", "startswith", "endswith", "encode", "decode", "round"}


@lru_cache(maxsize=8192)
def _lookup(name: str, soc: str, version: str | None) -> CoverageEntry:
    from migrator.catalogue.coverage import lookup

    return lookup(name, soc=soc, version=version)


@lru_cache(maxsize=32768)
def _listed_entry(name: str, soc: str, version: str | None) -> CoverageEntry | None:
    """`_lookup`'s entry where the table lists the name (`entry.known`), else None: most names asked about are
    methods of receivers of unknown type, not in the table, and building their entries costs more than the rest."""
    from migrator.catalogue.coverage._table import listed

    return _lookup(name, soc, version) if listed(name, soc=soc, version=version) else None


@lru_cache(maxsize=8192)
def _call_entry(name: str, soc: str, version: str | None) -> CoverageEntry | None:
    """The entry of a called op that gets a verdict: None for the Ascend API itself (not an op to port),
    metadata APIs (they compute nothing) and names the table does not list."""
    from migrator.catalogue.coverage._dtypes import METADATA_APIS

    if name.startswith(("torch.npu.", "torch_npu.")) or name in METADATA_APIS:
        return None
    return _listed_entry(name, soc, version)


def _method_entries(soc: str, version: str | None) -> _Found:
    """method -> (`torch.Tensor.<method>`, its entry where it gets a verdict: not metadata, listed; else None), for
    one SoC and version, filled as methods are met: most are methods of receivers of unknown type, thousands of
    names in a large tree, which the table does not list. A method is an identifier, so its name is its own normal
    form with no other spelling: whether the table lists it is a look-up in the table's names (`listed_names`)."""
    from migrator.catalogue.coverage._dtypes import METADATA_APIS

    listed: list[Container[str]] = []  # the table's names, once a method is asked about

    def entry(method: str) -> tuple[str, CoverageEntry | None]:
        name = f"torch.Tensor.{method}"
        if not listed:
            from migrator.catalogue.coverage._table import listed_names

            listed.append(listed_names(soc, version))
        if name in METADATA_APIS or (name not in listed[0] and method.isidentifier()):
            return name, None
        return name, _listed_entry(name, soc, version)

    return _found(("method", soc, version), entry)


@lru_cache(maxsize=8192)
def _unknown_receiver(name: str, soc: str, version: str | None) -> tuple[CoverageInfo, str]:
    """(coverage, message) of a listed method called on a receiver of unknown type."""
    entry = _lookup(name, soc, version)
    return (CoverageInfo(entry.status, soc, entry.dtypes, entry.note),
            _message(entry, name) + " (if the receiver is a tensor)")


def _describe(entry: CoverageEntry) -> str:
    dtypes = ", ".join(entry.dtypes) if entry.dtypes else "not documented"
    return dtypes


def _message(entry: CoverageEntry, name: str) -> str:
    soc = entry.soc
    if entry.status == "unsupported":
        text = f"`{name}` is not supported on {soc}"
    elif entry.status == "cpu_fallback":
        text = f"`{name}` has no NPU kernel on {soc} and falls back to the CPU (slow; host copies)"
    elif entry.status == "partial":
        text = f"`{name}` is supported on {soc} with limits (dtypes: {_describe(entry)})"
        if entry.bf16_undocumented:
            text += "; bf16 undocumented but the NPU kernel exists"
    else:
        text = f"`{name}` is not in the Ascend support list for {soc} (unverified)"
    if entry.npu_name:
        text += f"; NPU form: `{entry.npu_name}`"
    if entry.limits and entry.status != "unverified":
        text += f" — {'; '.join(entry.limits[:2])}"
    return text


@lru_cache(maxsize=8192)
def _outside_documented(
    name: str, soc: str, version: str | None, dtypes: tuple[str, ...]
) -> tuple[str, CoverageEntry] | None:
    """(dtype, entry) for the first traced dtype outside the documented list, else None."""
    from migrator.catalogue.coverage import CoverageError, lookup

    for dtype in dtypes:
        try:
            entry = lookup(name, soc=soc, version=version, dtype=dtype)
        except CoverageError:
            continue  # a dtype the table has no name for
        if entry.status == "unsupported":
            return dtype, entry
    return None


def _traced_impl(
    impl: str | None, entry: CoverageEntry, name: str, soc: str, version: str | None, traced: Traced
) -> tuple[str | None, str] | None:
    """(impl, message) for a partial op with traced dtypes; None when the census does not know it."""
    dtypes = traced.get(name, traced.get(entry.name))
    if impl != "op-partial" or dtypes is None:
        return None
    outside = _outside_documented(entry.name, soc, version, dtypes)
    if outside is None:
        return None, ""  # ran within its documented dtypes: no note
    dtype, _ = outside
    return "op-unsupported", (f"`{name}` ran in {dtype} in the traced training step (.migrate/op-trace.json): "
                              f"not among its documented dtypes on {soc} ({_describe(entry)})")


def _verdict(
    entry: CoverageEntry, name: str, soc: str, version: str | None, traced: Traced, used: frozenset[str]
) -> tuple[str | None, str, str]:
    """(impl, message, status) of one op: a partial op is a finding only for a dtype the program uses
    (traced, else what the module shows) outside its documented list; otherwise it counts as supported."""
    impl = STATUS_IMPL.get(entry.status)
    judged = _traced_impl(impl, entry, name, soc, version, traced)
    if judged is not None:
        return judged[0], judged[1], entry.status if judged[0] else "supported"
    if impl != "op-partial":
        return impl, _message(entry, name), entry.status
    from migrator.catalogue.coverage._dtypes import dtype_outside

    dtype = dtype_outside(entry, used)
    if dtype is None:
        return None, "", "supported"
    return impl, f"`{name}` is documented on {soc} for {_describe(entry)}; the program uses {dtype}", entry.status


def coverage_hits(checker: PythonChecker, soc: str, version: str | None, traced: Traced | None = None,
                  training: tuple[str, ...] = (), training_free: tuple[CoverageHit, ...] | None = None,
                  ) -> Iterator[CoverageHit]:
    """Yield (impl, node, symbol, message, CoverageInfo, op name, status) for one checked module.
    `traced`: API name -> dtypes from the op census (`migrator.census.store.traced_apis`); `training`:
    the 16-bit dtypes the scanned tree trains in (`migrator.catalogue.coverage._dtypes.training_dtypes`);
    `training_free`: `training_free_hits` of the same checker, soc and version, when already known.
    Metadata APIs (`Tensor.size`, `.item()`) get no verdict; the status is the program's: a partial op
    used only in documented dtypes is supported (`migrator/catalogue/coverage/_dtypes.py`)."""
    from migrator.catalogue.coverage._dtypes import DEFAULT_DTYPES

    ops = _OpJudge(soc, version, traced or {})
    local = frozenset(DEFAULT_DTYPES | checker.dtypes_used)
    used = local | set(training)
    yield from _call_hits(checker, ops, local, used)
    yield from _method_hits(checker, ops, used)
    yield from training_free_hits(checker, soc, version) if training_free is None else training_free


def training_free_hits(checker: PythonChecker, soc: str, version: str | None) -> tuple[CoverageHit, ...]:
    """The hits no training dtype changes (float64 use, the ops' work-arounds): one module's scans for
    several training sets share them."""
    from migrator.engine.op_workarounds import workaround_hits

    return (*_float64_hits(checker, soc, version), *workaround_hits(checker, soc, version))


Judgement = tuple[str | None, str, str, CoverageInfo]  # (impl, message, status, coverage)


@lru_cache(maxsize=8192)
def _untraced_judgement(name: str, soc: str, version: str | None, used: frozenset[str]) -> Judgement:
    """`_verdict` of a listed op without an op census, and its coverage: the same for every module that
    uses the same dtypes (a handful of sets), so found once per process."""
    entry = _lookup(name, soc, version)
    impl, message, status = _verdict(entry, name, soc, version, {}, used)
    return impl, message, status, CoverageInfo(status, soc, entry.dtypes, entry.note)


def _judgement(entry: CoverageEntry, name: str, soc: str, version: str | None, traced: Traced,
               used: frozenset[str]) -> Judgement:
    if not traced:
        return _untraced_judgement(name, soc, version, used)
    impl, message, status = _verdict(entry, name, soc, version, traced, used)
    return impl, message, status, CoverageInfo(status, soc, entry.dtypes, entry.note)


class _Found(dict[str, Any]):
    """name -> `find(name)`, kept for the process: a dict look-up for each op of each module, where an `lru_cache`
    of the same function would hash the tuple of all its arguments."""

    def __init__(self, find: Callable[[str], Any]) -> None:
        super().__init__()
        self.find = find

    def __missing__(self, name: str) -> Any:
        found = self[name] = self.find(name)
        return found


_FOUND: dict[tuple[str | frozenset[str] | None, ...], _Found] = {}  # by what is found, SoC, version (and dtypes)


def _found(key: tuple[str | frozenset[str] | None, ...], find: Callable[[str], Any]) -> _Found:
    """The process's table of `find` by name for `key`, made with this `find` the first time it is asked for."""
    table = _FOUND.get(key)
    if table is None:
        table = _FOUND[key] = _Found(find)
    return table


def _call_entries(soc: str, version: str | None) -> _Found:
    return _found(("call", soc, version), lambda name: _call_entry(name, soc, version))


def _judgements(soc: str, version: str | None, used: frozenset[str]) -> _Found:
    return _found(("judgement", soc, version, used), lambda name: _untraced_judgement(name, soc, version, used))


class _OpJudge:
    """Verdicts for one module's ops; info notes (partial, unverified) only at an op's first call site."""

    def __init__(self, soc: str, version: str | None, traced: Traced) -> None:
        self.soc, self.version, self.traced = soc, version, traced
        self.noted: set[str] = set()
        self._untraced: dict[frozenset[str], _Found] = {}  # the module's dtype sets' judgements, without a census

    def verdict(self, entry: CoverageEntry, name: str, used: frozenset[str]) -> Judgement:
        if self.traced:
            impl, message, status, info = _judgement(entry, name, self.soc, self.version, self.traced, used)
        else:
            judged = self._untraced.get(used)
            if judged is None:
                judged = self._untraced[used] = _judgements(self.soc, self.version, used)
            impl, message, status, info = judged[name]
        if impl in INFO_ONCE:
            impl = None if name in self.noted else impl  # info notes: first call site per file; the summary counts all
            self.noted.add(name)
        return impl, message, status, info


def _call_hits(
    checker: PythonChecker, ops: _OpJudge, local: frozenset[str], used: frozenset[str]
) -> Iterator[CoverageHit]:
    entries = _call_entries(ops.soc, ops.version)
    for name, node in checker.calls:
        entry = entries[name]  # None: the Ascend API, metadata, or not in the table
        if entry is None:
            continue
        # nn.init runs at construction on parameters in the default dtype, before any autocast or cast
        # (the census records it as setup, unjudged): only the module's own dtypes count for it
        impl, message, status, info = ops.verdict(entry, name, local if name.startswith(SETUP_PREFIXES) else used)
        yield (impl, node.func, name, message, info, name, status)


def _method_hits(checker: PythonChecker, ops: _OpJudge, used: frozenset[str]) -> Iterator[CoverageHit]:
    soc, version, tensors = ops.soc, ops.version, checker.tensor_names
    entries = _method_entries(soc, version)
    for receiver, method, node in checker.method_calls:
        known_tensor = receiver is not None and receiver in tensors
        if not known_tensor and method in AMBIGUOUS_METHODS:
            continue
        name, entry = entries[method]  # None: metadata, or not in the table
        if entry is None:
            continue
        if known_tensor:
            impl, message, status, info = ops.verdict(entry, name, used)
            yield (impl, node.func, name, message, info, name, status)
        elif entry.status in ("unsupported", "cpu_fallback"):
            info, message = _unknown_receiver(name, soc, version)
            yield ("tensor-method-unknown-receiver", node.func, name, message, info, None, None)


def _float64_hits(checker: PythonChecker, soc: str, version: str | None) -> Iterator[CoverageHit]:
    for node, symbol in checker.float64:
        op = _enclosing_op(checker, node)
        supported = None
        if op is not None:
            from migrator.catalogue.coverage import float64_supported

            supported = float64_supported(op, soc=soc, version=version)
        if supported:
            continue
        where = f" for `{op}`" if op else ""
        doc = "does not document fp64" if supported is False else "has no documented dtype list"
        message = (f"float64 (`{symbol}`){where}: most Ascend kernels lack fp64 and `.double()` returns fp32 on the NPU"
                   if symbol == ".double()" else f"float64 (`{symbol}`){where}: the op {doc} on {soc}")
        # report_symbol records names, attributes and import aliases: nodes that have positions
        yield ("float64-use", cast(Located, node), symbol, message, None, None, None)


def depends_on_training(checker: PythonChecker, soc: str, version: str | None, traced: Traced) -> bool:
    """Whether any op verdict of this module changes when the tree trains in bf16/fp16: a partial op
    (not decided by the census) with a 16-bit dtype outside its list before the first one the module
    itself shows. With every training dtype added the verdict is the same, so is it with any subset
    (the first dtype outside the list is the earliest of a larger set)."""
    from migrator.catalogue.coverage._dtypes import DEFAULT_DTYPES, TRAINING_DTYPES

    local = frozenset(DEFAULT_DTYPES | checker.dtypes_used)
    every = local | frozenset(TRAINING_DTYPES)
    if every == local:
        return False
    tensors = checker.tensor_names
    names = {name for name, _ in checker.calls if not name.startswith(SETUP_PREFIXES)}
    names.update(f"torch.Tensor.{method}" for method in {method for receiver, method, _ in checker.method_calls
                                                         if receiver is not None and receiver in tensors})
    if not traced:  # each name's answer is the same in every module with these dtypes: found once per process
        return any(_untraced_sensitive(name, soc, version, local, every) for name in names)
    return any(_sensitive(name, soc, version, traced, local, every) for name in names)


def _sensitive(name: str, soc: str, version: str | None, traced: Traced, local: frozenset[str],
               every: frozenset[str]) -> bool:
    """Whether the op's verdict with the module's own dtypes differs from that with every training dtype."""
    entry = _listed_entry(name, soc, version)
    return entry is not None and entry.status == "partial" and \
        _judgement(entry, name, soc, version, traced, local)[:3] != _judgement(entry, name, soc, version, traced, every)[:3]


@lru_cache(maxsize=32768)
def _untraced_sensitive(name: str, soc: str, version: str | None, local: frozenset[str], every: frozenset[str]) -> bool:
    return _sensitive(name, soc, version, {}, local, every)


def _enclosing_op(checker: PythonChecker, node: ast.AST) -> str | None:
    for name, call in checker.calls:
        if any(kw.value is node for kw in call.keywords) or any(a is node for a in call.args):
            return name
    return None
