"""The checker's name resolution: the qualified names a dotted name spells through the module's imports (a name
bound by two imports resolves to both), and what a set of them says (its catalogue match, the dtypes it names, what
a call of it is). None of it depends on the node, and the aliases do not change after the checker's set-up, so each
dotted name and each set of names is resolved once per module."""

from __future__ import annotations

import ast
from collections.abc import Iterable

from migrator.catalogue.loader import Catalogue, SymbolMatch
from migrator.engine.sites import dotted
from migrator.ground.kinds import FixKind

# What shows a module computes in a dtype (for the op verdicts: a limit matters for dtypes in use)
DTYPE_NAMES = {"torch.bfloat16": "bf16", "torch.float16": "fp16", "torch.half": "fp16", "torch.float64": "fp64",
               "torch.double": "fp64", "torch.complex64": "complex64", "torch.cfloat": "complex64",
               "torch.complex128": "complex128", "torch.cdouble": "complex128"}
FLOAT64_NAMES = frozenset({"torch.float64", "torch.double"})
# what a set of qualified names says: the float64 name it spells, the dtypes it names, its match
Resolved = tuple[str | None, set[str], tuple[SymbolMatch, str, bool] | None]
NOTHING: Resolved = (None, set(), None)
NO_NAMES: frozenset[str] = frozenset()
# what a callee's names say about its calls: a Triton kernel wrapper, a command runner, the torch op it calls
# (for the coverage family), torch's autocast, a torch factory (`x = torch.randn(...)` makes x a tensor), one a call
# detector or build check acts on by name (`NameResolution.detected_names`)
Callee = tuple[bool, bool, str | None, bool, bool, bool]
KERNEL_WRAPPERS = {"triton.jit", "triton.autotune", "triton.heuristics", "triton.JITFunction"}
AUTOCAST = {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast"}  # fp16 unless dtype= says
COMMAND_RUNNERS = frozenset({
    "os.system", "os.popen", "os.execvp", "os.execlp", "os.spawnlp", "subprocess.run", "subprocess.call",
    "subprocess.check_call", "subprocess.check_output", "subprocess.Popen", "subprocess.getoutput",
    "subprocess.getstatusoutput", "shutil.which", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
})


class NameResolution:
    """The resolving half of `PythonChecker` (its set-up fills `aliases` and `alias_roots`)."""

    catalogue: Catalogue
    aliases: dict[str, set[str]]  # local name -> the qualified names its imports bind
    alias_roots: set[str]  # the first part of each alias (`self` of `self.nvml`)
    chain_names: dict[tuple[str, ...], frozenset[str]]  # `_names`' memo, by the dotted name's parts
    resolved: dict[frozenset[str], Resolved]  # `_resolve`'s memo
    callees: dict[frozenset[str], Callee]  # `_callee`'s memo
    detected_names: frozenset[str] | None  # the callees the call detectors act on by name (None: every one)

    def qualnames(self, node: ast.AST) -> set[str]:
        return set(self._names(node))  # a set of the caller's own: a detector may keep or change it

    def _names(self, node: ast.AST) -> frozenset[str]:
        """`qualnames`, found once per module for each dotted name (the aliases do not change after the set-up)."""
        root = node
        while type(root) is ast.Attribute:
            root = root.value
        if type(root) is not ast.Name or root.id not in self.alias_roots:  # (every alias's first part is one)
            return NO_NAMES  # most chains (`self.x.y`) start at a name no import binds: no list built for them
        parts = [root.id]  # the dotted name's parts, root first, then outermost first: all `_qualnames` reads
        link = node
        while type(link) is ast.Attribute:
            parts.append(link.attr)
            link = link.value
        key = tuple(parts)
        known = self.chain_names.get(key)
        if known is None:
            known = self.chain_names[key] = frozenset(self._qualnames(node))
        return known

    def _qualnames(self, node: ast.AST) -> set[str]:
        parts = dotted(node)
        if parts and len(parts) > 1 and f"{parts[0]}.{parts[1]}" in self.aliases:  # `self.nvml` bound to a module
            parts = [f"{parts[0]}.{parts[1]}", *parts[2:]]
        if not parts or parts[0] not in self.aliases:
            return set()
        rest = ".".join(parts[1:])
        names = {f"{base}.{rest}" if rest else base for base in self.aliases[parts[0]]}
        if "torch" in parts[1:-1]:  # `torch_utils.torch.cuda`: torch re-exported by a module (ambiguous: manual)
            names.add(".".join(parts[parts.index("torch", 1):]))
        return names

    def _manual_library(self, module: str) -> bool:
        hit = self.catalogue.match_symbol(f"{module}.x")
        return hit is not None and hit.rule.scope == "library" and hit.rule.fix_kind == FixKind.MANUAL

    def match(self, names: Iterable[str]) -> tuple[SymbolMatch, str, bool] | None:
        """Best match over candidate names; the flag says whether candidates disagree."""
        found = [(m, n) for n in sorted(names) if (m := self.catalogue.match_symbol(n))]
        if not found:
            return None
        best, name = found[0]
        ambiguous = any((m.rule.code, m.replacement) != (best.rule.code, best.replacement) for m, _ in found)
        return best, name, ambiguous or len(found) < len(set(names))

    def _resolve(self, names: frozenset[str]) -> Resolved:
        """What qualified names say (the float64 name they spell, the dtypes they name, their match): it does
        not depend on the node, so it is found once per module."""
        known = self.resolved.get(names)
        if known is None:
            known = self.resolved[names] = (sorted(names)[0] if names & FLOAT64_NAMES else None,
                                            {DTYPE_NAMES[n] for n in names if n in DTYPE_NAMES}, self.match(names))
        return known

    def _callee(self, names: frozenset[str]) -> Callee:
        """What a callee's qualified names say about its calls (`Callee`), found once per module."""
        known = self.callees.get(names)
        if known is None:
            torch_names = sorted(n for n in names if n.startswith("torch."))
            known = self.callees[names] = (
                not names.isdisjoint(KERNEL_WRAPPERS), not names.isdisjoint(COMMAND_RUNNERS),
                torch_names[0] if torch_names and not self.match(torch_names) else None,  # another family's: no op
                not names.isdisjoint(AUTOCAST),
                any(n.startswith("torch.") and n.rsplit(".", 1)[-1][:1].islower() for n in names),
                self.detected_names is None or not names.isdisjoint(self.detected_names))
        return known
