"""State shared by the transforms of one file: target, aliases, imports and helpers to add."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from migrator.fix.import_order import ImportStyle
from migrator.fix.runtime_module import PROVIDES, RuntimeImport
from migrator.ground.model import Finding


@dataclass(frozen=True)
class Checkpoint:
    applied: int
    helpers: set[str]
    imports: set[str]
    needs_torch: bool
    needs_torch_npu: bool
    runtime_names: frozenset[str] = frozenset()


@dataclass
class FixContext:
    target: str  # "npu" | "portable"
    aliases: dict[str, set[str]]  # local name -> qualified names (before the fix)
    module_text: str = ""  # the file being fixed, for decisions that depend on the rest of the module
    import_renames: dict[str, str] = field(default_factory=dict)  # local name -> qualified name after the fix
    needs_torch_npu: bool = False
    needs_torch: bool = False
    imports: set[str] = field(default_factory=set)  # extra `import X` lines (e.g. "math")
    helpers: dict[str, str] = field(default_factory=dict)  # name -> source, emitted once per file
    runtime: RuntimeImport | None = None  # where the tree's `_migrate_runtime` module is (portable target)
    runtime_names: set[str] = field(default_factory=set)  # helpers imported from it instead of copied
    import_style: ImportStyle = field(default_factory=ImportStyle)  # the repository's isort / ruff settings
    declined: list[tuple[Finding, str]] = field(default_factory=list)
    removable: set[str] = field(default_factory=set)  # imported names a module-level fix took the uses of
    applied: list[Finding] = field(default_factory=list)

    def decline(self, finding: Finding, reason: str) -> None:
        self.declined.append((finding, reason))

    def checkpoint(self) -> Checkpoint:
        """What rewrites from here on add, so that they can be undone where their site rejects them."""
        return Checkpoint(len(self.applied), set(self.helpers), set(self.imports), self.needs_torch, self.needs_torch_npu,
                          frozenset(self.runtime_names))

    def undo_since(self, mark: Checkpoint, reason: str) -> None:
        """Forget the rewrites since `mark` (their helpers and imports too) and decline them with `reason`."""
        undone = self.applied[mark.applied :]
        del self.applied[mark.applied :]
        for name in set(self.helpers) - mark.helpers:
            del self.helpers[name]
        self.imports &= mark.imports
        self.runtime_names &= mark.runtime_names
        self.needs_torch, self.needs_torch_npu = mark.needs_torch, mark.needs_torch_npu
        for finding in undone:
            self.decline(finding, reason)

    def helper(self, name: str, source: str) -> cst.Name:
        """`name`, defined once in the file by `source`, or imported from the tree's runtime module."""
        if self.runtime is not None and name in PROVIDES:
            self.runtime_names.add(name)
            return cst.Name(name)
        self.helpers.setdefault(name, source)
        self.needs_torch = True
        return cst.Name(name)

    def local_for(self, qualname: str) -> str | None:
        """A local dotted expression that denotes `qualname` after the fix, if an import gives one."""
        best: tuple[int, str] | None = None
        for local, quals in self.aliases.items():
            if len({self.import_renames.get(local, q) for q in quals}) > 1:
                continue  # bound by several imports (`if ...: from libdevice import f else: from tl.math import f`)
            for qual in quals:
                after = self.import_renames.get(local, qual)
                if qualname == after or qualname.startswith(after + "."):
                    if best is None or len(after) > best[0]:
                        best = (len(after), local + qualname[len(after) :])
        return best[1] if best else None

    def expr_for(self, qualname: str) -> cst.BaseExpression:
        """An expression for `qualname`, through the user's own aliases where possible."""
        local = self.local_for(qualname)
        if local is None:
            root = qualname.split(".", 1)[0]
            if root == "torch_npu":
                self.needs_torch_npu = True
            elif root == "torch":
                self.needs_torch = True
            else:
                self.imports.add(root)
            local = qualname
        if "torch_npu" in local or local.split(".")[1:2] == ["npu"]:
            self.needs_torch_npu = True
        return cst.parse_expression(local)
