"""Checks one Python module: a single `ast` parse and one traversal for every rule.

Scanning uses the standard library's C parser (an order of magnitude faster than building a
libcst tree with position metadata); `migrate fix` re-finds each finding's range in a libcst
tree. Qualified names are resolved through every import in the file (module level, inside
functions and try/except) and treated as sets: a name bound by two imports resolves to both.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

from migrator.catalogue.loader import Catalogue, Rule
from migrator.catalogue.patterns import CUDA_ACCELERATORS, accepted_names, lists_npu
from migrator.engine import extension_builds
from migrator.engine.attribute_links import DottedNames
from migrator.engine.bindings import Bindings
from migrator.engine.checker_hooks import catalogue_hooks
from migrator.engine.extension_builds import CUDA_EXTENSION_MODULE
from migrator.engine.fast_visitor import FastVisitor
from migrator.engine.import_calls import attribute_modules, bound_module, collect_aliases
from migrator.engine.name_resolution import NO_NAMES, NOTHING, Resolved
from migrator.engine.statements import guarded_imports, import_library, sorted_statements
from migrator.ground.kinds import FixKind
from migrator.ground.own_code import OWN_MARKER, own_helpers

ENV_TOKEN = re.compile(
    r"\b(CUDA_[A-Z0-9_]+|NCCL_[A-Z0-9_]+|TORCH_NCCL_[A-Z0-9_]+|TORCH_CUDA_ARCH_LIST|PYTORCH_CUDA_ALLOC_CONF|"
    r"NVIDIA_VISIBLE_DEVICES|NVIDIA_[A-Z0-9_]+|NVTE_[A-Z0-9_]+)\b"
)
NVIDIA_SMI = re.compile(r"\bnvidia-smi\b")
# a string that is a command line by itself: `"nvidia-smi"`, `"nvidia-smi -L"`, `"nvidia-smi | grep ..."`;
# prose that mentions it (`"run nvidia-smi to check"`, a log format) is no invocation
NVIDIA_SMI_COMMAND = re.compile(r"^\s*(?:\S*/)?nvidia-smi(?:\s*$|\s+-|\s*[|;&>])")

FLASH_ATTN_IMPLEMENTATIONS = {"flash_attention_2", "flash_attention_3"}
DTYPE_METHODS = {"bfloat16": "bf16", "half": "fp16", "double": "fp64", "cfloat": "complex64", "cdouble": "complex128"}
DTYPE_STRINGS = {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
                 "fp64": "fp64", "float64": "fp64"}
LITERALS = frozenset({"typing.Literal", "typing_extensions.Literal"})  # their strings are names, not devices


def _names_variable(text: str, m: re.Match) -> bool:
    """`NCCL_DEBUG` as a variable (whole string, `NAME=`, `$NAME`, `${NAME}`), not inside a log message."""
    before, after = text[: m.start()], text[m.end() :]
    if not before.strip() and not after.strip():
        return True
    return after.startswith("=") or before.endswith(("$", "${"))


class CheckerFacade:
    """What the rule units' detectors see of the scanner (`migrator.catalogue.protocols.Checker`):
    report a pattern rule by name, claim a node, resolve a name; never the checker's fields."""

    __slots__ = ("_checker",)

    def __init__(self, checker: PythonChecker) -> None:
        self._checker = checker

    def emit(self, impl: str, node: ast.AST, symbol: str, replacement: str | None = None) -> None:
        self._checker.emit_impl(impl, node, symbol, replacement)

    def claim(self, node: ast.AST) -> None:
        self._checker.claim(node)

    def qualnames(self, node: ast.AST) -> set[str]:
        return self._checker.qualnames(node)

    def built_by(self, node: ast.AST) -> set[str]:
        return self._checker.bindings.built_by(node)

    def module_calls(self) -> set[str]:
        return self._checker.bindings.module_calls()


class PythonChecker(DottedNames, FastVisitor):
    NAMES_VISITED = "names_visited"  # `visit_Name` acts on these names only
    # `visit_Constant` looks at strings and bytes only
    CONSTANTS_IGNORED = frozenset({int, float, complex, bool, type(None), type(...)})
    # handlers that would do nothing: `visit_Attribute` for `self.x` (its root no import binds, no detector acts on
    # its attribute), `visit_arg` for an argument without an annotation (most of them)
    LEAVES_SKIPPED = {
        ast.Attribute: "type(child.value) is NAME and child.value.id not in visitor.alias_roots"
                       " and visitor.attribute_names is not None and child.attr not in visitor.attribute_names",
        ast.arg: "child.annotation is None",
    }

    def __init__(self, catalogue: Catalogue, enabled: Callable[[Rule], bool], tree: ast.AST, build_file: bool = False,
                 package_init: bool = False):
        self.catalogue = catalogue
        self.tree = tree  # the module, for the passes over whole scopes (`engine/op_workarounds.py`)
        self.build_file = build_file  # setup.py: string fixes are declined (`catalogue.site.is_build_file`)
        self.package_init = package_init  # __init__.py: its module-level imports are re-exports
        self.enabled = enabled
        statements = sorted_statements(tree)
        bindings = statements.bindings
        self.guard_nodes: list[ast.AST] = statements.guard_nodes  # assignments and tests, for `guards.guarded_calls`
        self.aliases = collect_aliases(tree, bindings)
        self.aliases.update(attribute_modules(bindings, self.aliases, self._manual_library))
        # `self.nvml = pynvml` binds the two-part name `self.nvml`: its first part must pass the early exit below
        self.alias_roots = {name.split(".", 1)[0] for name in self.aliases}
        self.names_visited = set(self.aliases)  # less each name found to report nothing (`visit_Name`)
        self.guarded = guarded_imports(tree, statements.tries)
        self.docstring_nodes = statements.docstrings
        self.docstrings = {id(n) for n in self.docstring_nodes}  # for `scan_file`'s setup.py strings
        self.docstring_set = set(self.docstring_nodes)
        # inserted by `migrate fix` (its marker in their docstrings, so none without a docstring holding it)
        self.own_helpers = own_helpers(tree) if any(OWN_MARKER in str(n.value) for n in self.docstring_nodes) else []
        self.own_helper_set = set(self.own_helpers)
        # the sets and maps below hold nodes, not their ids (no `int` made, kept and freed per node)
        self.claimed: set[ast.AST] = set()
        self.in_type = 0  # > 0 while a type expression is visited: its strings are claimed (`_visit_type`)
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []  # in source order, ours left out
        self.loops: list[ast.For | ast.AsyncFor | ast.While] = []  # in source order (the perf lint's training loops)
        self.backward_lines: list[int] = []  # lines of `x.backward(...)` calls
        self.mask_lines: list[int] = []  # lines of subscripts by a comparison (`x[x > 0]`), in visit order
        self.command_strings: set[ast.AST] = set()  # the strings passed to a command runner (subprocess, os.system)
        self.call_of: dict[ast.AST, ast.Call] = {}  # every call's callee expression -> the call
        self.decorator_calls: set[ast.AST] = set()  # `@triton.autotune(...)` reported with their kernel
        self.first_arg_of: dict[ast.AST, ast.Call] = {}  # every call's first positional argument -> the call
        self.assigned_values: set[ast.AST] = set()  # the whole values of assignments (`x = <value>`)
        self.defaults_with_choices: set[ast.AST] = set()  # each `default=` value beside a `choices=`
        self.pattern_nodes: set[ast.AST] = set()  # the nodes inside `case` patterns
        self.hits: list[tuple[Rule, ast.AST, str, str | None, dict]] = []
        self.resolved, self.chain_names, self.callees = {}, {}, {}  # `NameResolution`'s memos
        self.resolved_names: dict[str, Resolved] = {}  # a plain name's, by the name
        self.calls: list[tuple[str, ast.Call]] = []  # resolved torch calls, for the coverage family
        self.method_calls: list[tuple[str | None, str, ast.Call]] = []  # (receiver name, method, call)
        self.tensor_names: set[str] = set()  # names the code shows are tensors
        self.float64: list[tuple[ast.AST, str]] = []  # torch.float64 / torch.double / .double()
        self.dtypes_used: set[str] = set()  # value dtypes beyond the default fp32 the module shows
        # the pattern rules' own detection (`detect_*` of their units), which sees only the facade
        self.facade = CheckerFacade(self)
        self.bindings = Bindings(tree, self.qualnames)  # what a receiver was built by, indexed when first asked
        (self.detect_call, self.unnamed_triggers, self.named_triggers, self.detected_names, self.detect_string,
         self.string_gate, self.detect_compare, self.detect_attribute, self.attribute_names,
         ) = catalogue_hooks(catalogue)

    def finish(self) -> None:
        """After the passes: the detectors' facade and the bindings index refer back to the checker, a cycle
        that kept the module's syntax tree alive until the cycle collector walked every node of it (a tenth
        of the scan); without it the tree is freed when the file is done."""
        self.facade = None
        self.bindings = None  # type: ignore[assignment]

    # -- emitting -------------------------------------------------------------------------
    def emit(self, rule: Rule | None, node: ast.AST, symbol: str, replacement: str | None = None, **extra: Any) -> None:
        if rule is not None and self.enabled(rule):
            self.hits.append((rule, node, symbol, replacement, extra))

    def emit_impl(self, impl: str, node: ast.AST, symbol: str, replacement: str | None = None, **extra: Any) -> None:
        self.emit(self.catalogue.impl_rule(impl), node, symbol, replacement, **extra)

    def claim(self, node: ast.AST) -> None:
        """The node is a finding's (or no device selection): no later string check reports it."""
        self.claimed.add(node)

    # -- reporting a resolved name ---------------------------------------------------------
    def report_symbol(self, node: ast.AST, decorator: bool = False) -> bool:
        names = self._names(node)
        return bool(names) and self._report(node, self._resolve(names), decorator)

    def _report(self, node: ast.AST, known: Resolved, decorator: bool) -> bool:
        float64, dtypes, hit = known
        if float64 is not None:
            self.float64.append((node, float64))
        if dtypes:
            self.dtypes_used.update(dtypes)
        if hit is None:
            return False
        m, name, ambiguous = hit
        if m.rule.scope == "imports" and not decorator:
            return True  # the import and each kernel carry the finding (triton: its constructs have rules of their own)
        # every use is a site of its own, at any scope and however the module was bound (`scope: library`:
        # `fat.attention` after `import flash_attn.flash_attn_triton as fat`, a member the table does not list)
        self.emit(m.rule, node, name, None if ambiguous else m.replacement, ambiguous=ambiguous)
        return True

    # -- visitors ----------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if node in self.own_helper_set:  # helpers emitted by `migrate fix` are ported code
            return
        self.functions.append(node)
        self.claim_strings(node.returns)
        for dec in node.decorator_list:  # `@triton.jit`: one finding per kernel
            target = dec.func if isinstance(dec, ast.Call) else dec
            names = self._names(target)
            hit = self._resolve(names)[2] if names else None  # `match`, found once per module
            if hit and hit[0].rule.scope == "imports":  # other scopes report it as a use below
                self.report_symbol(target, decorator=True)
                self.decorator_calls.add(dec)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]  # same fields for both

    def visit_match_case(self, node: ast.match_case) -> None:
        self.pattern_nodes.update(ast.walk(node.pattern))
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if node not in self.own_helper_set:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            hit = self.match({alias.name})
            if hit:
                bound = alias.asname or alias.name.split(".")[0]
                self.emit(hit[0].rule, alias, alias.name, hit[0].replacement, is_import=True, bound=bound,
                          library=import_library(alias.name), optional=id(node) in self.guarded)
            elif CUDA_EXTENSION_MODULE.match(alias.name.split(".")[0]):
                self.emit_impl("cuda-extension-import", alias, alias.name, library=import_library(alias.name),
                               optional=id(node) in self.guarded)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        module_hit = self.match({node.module})
        if not module_hit and CUDA_EXTENSION_MODULE.match(node.module.split(".")[0]):
            self.emit_impl("cuda-extension-import", node, node.module, library=import_library(node.module),
                           optional=id(node) in self.guarded)
            return
        for alias in node.names:
            name = node.module if alias.name == "*" else f"{node.module}.{alias.name}"
            hit = self.match({name}) or module_hit
            if hit:
                self.emit(hit[0].rule, alias, name, hit[0].replacement, is_import=True, bound=alias.asname or alias.name,
                          library=import_library(node.module), optional=id(node) in self.guarded)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.aliases and isinstance(node.ctx, ast.Load):  # no import binds it: nothing to resolve
            known = self.resolved_names.get(node.id)
            if known is None:  # a plain name's qualified names are its aliases': the same at every use
                names = self._names(node)
                known = self._resolve(names) if names else NOTHING
                if known[0] is None and not known[1] and known[2] is None:  # nothing to report (`torch`)
                    known = NOTHING
                    self.names_visited.discard(node.id)  # nor at any other use: those are not visited
                self.resolved_names[node.id] = known
            if known is not NOTHING:
                self._report(node, known, False)

    def visit_For(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        self.loops.append(node)
        self.generic_visit(node)

    visit_AsyncFor = visit_While = visit_For  # recorded alike

    def visit_Call(self, node: ast.Call) -> None:
        func, args, keywords = node.func, node.args, node.keywords
        self.call_of[func] = node
        kind = type(func)
        if args and type(args[0]) is not ast.Starred:
            self.first_arg_of[args[0]] = node
        kwargs: dict[str, ast.expr] = {}
        values: list[ast.expr] = []  # the keywords' values, visited below (a keyword is no more than its value)
        for k in keywords:  # a loop, not a comprehension: no function made per call
            value = k.value
            values.append(value)
            if k.arg:
                kwargs[k.arg] = value
        if "choices" in kwargs:
            self.defaults_with_choices.update(k.value for k in keywords if k.arg == "default")
        root = func
        while type(root) is ast.Attribute:
            root = root.value
        # (a name an import binds has its first part among `alias_roots`: one lookup, not one in `aliases` too)
        if type(root) is ast.Name and root.id in self.alias_roots:
            names = self._names(func)
            if names:
                self._named_call(node, func, names, kwargs)
            else:
                self._unnamed_call(node, func, kwargs)
            self.visit(func)
        elif kind is ast.Attribute:  # most callees (`self.conv(x)`, `x.view(...)`): a method no import binds
            self._unnamed_call(node, func, kwargs)
            if type(root) is ast.Name:  # the links shown to the detectors as `visit_Attribute` would
                self._unbound_links(func)  # type: ignore[arg-type]
            else:  # `x[0].y()`, `f().y()`: the callee's parts visited as usual
                self.visit(func)
        else:  # `len(x)`: a name no import binds is not visited (`NAMES_VISITED`); `f()()` is
            self._unnamed_call(node, func, kwargs)
            if kind is not ast.Name:
                self.visit(func)
        if args or values:  # (most calls pass one or two plain names: none of them visited)
            self.visit_expressions((*args, *values) if values else args)

    def _named_call(self, node: ast.Call, func: ast.expr, names: frozenset[str], kwargs: dict[str, ast.expr]) -> None:
        """A callee an import names (`names`: its qualified names)."""
        if type(func) is ast.Attribute and func.attr == "backward":  # `torch.autograd.backward(...)`
            self.backward_lines.append(node.lineno)
        kernel, command, op, autocast, _, detected = self._callee(names)
        if kernel and node not in self.decorator_calls:  # `triton.jit(fn)`: a kernel made by a call, reported like `@triton.jit`
            self.report_symbol(func, decorator=True)
        triggers = self.named_triggers  # most callees (`torch.nn.Linear`): no detector acts on them
        if not detected and triggers is not None and not (type(func) is ast.Attribute and func.attr in triggers[1]) \
                and (not kwargs or triggers[2].isdisjoint(kwargs)):
            if command:
                self.check_commands(node)
            if "accelerator" in kwargs or "attn_implementation" in kwargs:
                self._check_framework_arguments(names, kwargs)
        else:
            self.check_call(node, set(names), kwargs, command)
        if op is not None:  # a torch name another family owns is not an "op"
            self.calls.append((op, node))
        if autocast and "dtype" not in kwargs:
            self.dtypes_used.add("fp16")

    def _unnamed_call(self, node: ast.Call, func: ast.expr, kwargs: dict[str, ast.expr]) -> None:
        """A callee no import names: only the detectors (on the methods and keywords they act on) and the
        attention argument can hold a finding; a method call is an op for the coverage family."""
        method = func.attr if type(func) is ast.Attribute else None
        if method == "backward":
            self.backward_lines.append(node.lineno)
        if "accelerator" in kwargs or "attn_implementation" in kwargs:  # what `_check_framework_arguments` reads
            self._check_framework_arguments(NO_NAMES, kwargs)
        triggers = self.unnamed_triggers
        if triggers is None or method in triggers[0] or (kwargs and not triggers[1].isdisjoint(kwargs)):
            func_names: set[str] = set()  # the detectors' own (no import names the callee)
            for detect in self.detect_call:
                detect(self.facade, node, func_names, kwargs)
        if method is not None:
            value = func.value  # type: ignore[attr-defined]
            self.method_calls.append((value.id if type(value) is ast.Name else None, method, node))
            if method in DTYPE_METHODS and not node.args:
                if method == "double":
                    self.float64.append((node, ".double()"))
                self.dtypes_used.add(DTYPE_METHODS[method])

    def visit_Assign(self, node: ast.Assign) -> None:
        value, targets = node.value, node.targets
        self.assigned_values.add(value)
        kind = type(value)  # `may_bind_module` and `_names`' early exit inline: most assignments pass neither
        if kind is ast.Call:
            args = value.args  # type: ignore[attr-defined]
            if args and type(args[0]) is ast.Constant:
                self._module_binding(node, value)
            # `x = torch.randn(...)`: x is a tensor for the coverage family's method lookups
            if len(targets) == 1 and type(targets[0]) is ast.Name:
                root = func = value.func  # type: ignore[attr-defined]
                while type(root) is ast.Attribute:
                    root = root.value
                if type(root) is ast.Name and root.id in self.alias_roots:
                    names = self._names(func)
                    if names and self._callee(names)[4]:
                        self.tensor_names.add(targets[0].id)
        elif kind is ast.Subscript:
            self._module_binding(node, value)
        self.visit_expressions((*targets, value))  # the children as `generic_visit` visits them

    def _module_binding(self, node: ast.Assign, value: ast.expr) -> None:
        """`x = import_module("mod")` and the like: a binding of a manual library is a use of it."""
        bound = bound_module(node)
        hit = self.match({bound[1]}) if bound else None
        if bound and hit and hit[0].rule.fix_kind == FixKind.MANUAL:
            self.emit(hit[0].rule, value, bound[1])

    def visit_arg(self, node: ast.arg) -> None:
        annotation = node.annotation  # the only child of an `arg`
        if annotation is not None:
            if "torch.Tensor" in self._names(annotation):
                self.tensor_names.add(node.arg)
            self._visit_type(annotation)

    def _visit_type(self, node: ast.expr) -> None:
        """Visit a type expression: its strings are claimed as `claim_strings` would, without a walk of their own."""
        self.in_type += 1
        self.visit(node)
        self.in_type -= 1

    def visit_BoolOp(self, node: ast.BoolOp | ast.IfExp) -> None:
        self.guard_nodes.append(node)
        self.generic_visit(node)

    visit_IfExp = visit_BoolOp  # the tests `guards` reads besides statements

    def visit_Compare(self, node: ast.Compare) -> None:
        for detect in self.detect_compare:
            detect(self.facade, node)
        self.generic_visit(node)

    def claim_strings(self, node: ast.AST | None) -> None:
        """Strings of a type expression (`Literal["cpu", "cuda"]`, an annotation): names, not device selections."""
        while type(node) is ast.Attribute:  # `torch.Tensor`: a dotted name holds no string
            node = node.value
        if node is None or type(node) is ast.Name:  # most annotations: a plain name holds no string
            return
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str):
                self.claim(n)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        value = node.value
        if value is not None:
            self.assigned_values.add(value)
        self.visit(node.target)  # the children in field order, the annotation's strings claimed
        self._visit_type(node.annotation)
        if value is not None:
            self.visit(value)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if type(node.slice) is ast.Compare:  # a boolean mask, for the perf lint's region gate
            self.mask_lines.append(node.lineno)
        if self._names(node.value).isdisjoint(LITERALS):
            self.generic_visit(node)
        else:
            self.visit(node.value)
            self._visit_type(node.slice)

    def _collection(self, node: ast.Tuple | ast.List | ast.Set) -> None:
        elts = node.elts
        for e in elts:  # most collections hold no "cuda": nothing to claim, nothing more to ask
            if type(e) is ast.Constant and e.value == "cuda":  # (any `ast.Constant(...)` is of this class)
                if lists_npu(node) or accepted_names(node):  # handles Ascend already, or names a user may type
                    for element in elts:
                        if isinstance(element, ast.Constant) and element.value == "cuda":
                            self.claim(element)
                break
        self.visit_expressions(elts)  # the children (`elts`; contexts are not visited)

    visit_Tuple = visit_List = visit_Set = _collection

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        kind = type(value)
        if kind is int or kind is float:  # most constants: no string (and a failed `isinstance` costs more)
            return
        if isinstance(value, str):
            if self.in_type or node in self.claimed or node in self.docstring_set:
                return  # a name in a type expression, a finding's, a docstring
            lowered = value.lower()
            self.check_string(node, value, lowered)
            if lowered in DTYPE_STRINGS:  # `dtype="bfloat16"`, `--precision bf16`
                self.dtypes_used.add(DTYPE_STRINGS[lowered])
        elif isinstance(value, bytes) and node not in self.claimed:  # `b"cuda" in buf`: a pickled device
            self.check_string(node, value.decode("latin-1"))

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        text = "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
        if node not in self.claimed:
            self.check_string(node, text)
        for value in node.values:
            if isinstance(value, ast.FormattedValue):
                self.visit(value)

    # -- rule bodies -----------------------------------------------------------------------
    def check_string(self, node: ast.AST, text: str, lowered: str | None = None) -> None:
        gate = self.string_gate  # most strings hold none of the words a check needs
        if gate is not None and not gate(text.lower() if lowered is None else lowered):
            return
        for detect in self.detect_string:
            detect(self.facade, node, text)
        extension_builds.check_string(self.facade, node, text)
        if len(text) < 4000:
            if "CUDA_" in text or "NCCL_" in text or "NVIDIA_" in text or "NVTE_" in text:  # each ENV_TOKEN holds one
                for m in ENV_TOKEN.finditer(text):
                    if _names_variable(text, m):
                        self.emit_env(node, m.group(1))
            if "nvidia-smi" in text and NVIDIA_SMI.search(text) and (node in self.command_strings or NVIDIA_SMI_COMMAND.match(text)):
                self.emit_impl("nvidia-smi", node, "nvidia-smi")

    def emit_env(self, node: ast.AST, name: str) -> None:
        hit = self.catalogue.match_symbol(f"$env.{name}")
        if hit:
            self.emit(hit.rule, node, name, hit.replacement)

    def check_call(self, node: ast.Call, func_names: set[str], kwargs: dict[str, ast.expr], command: bool) -> None:
        """The checks of a call whose callee resolves through an import (`func_names`; `command`: a command runner)."""
        if command:
            self.check_commands(node)
        if "accelerator" in kwargs or "attn_implementation" in kwargs:  # what `_check_framework_arguments` reads
            self._check_framework_arguments(func_names, kwargs)
        for detect in self.detect_call:
            detect(self.facade, node, func_names, kwargs)
        extension_builds.check_call(self.facade, node, func_names, kwargs)  # each of its sites needs a callee name

    def check_commands(self, node: ast.Call) -> None:
        """A command runner's call: its strings are commands (`nvidia-smi` reported there)."""
        for arg in (*node.args, *(k.value for k in node.keywords)):
            self.command_strings.update(n for n in ast.walk(arg) if isinstance(n, (ast.Constant, ast.JoinedStr)))

    def _check_framework_arguments(self, func_names: AbstractSet[str], kwargs: dict[str, ast.expr]) -> None:
        accelerator = kwargs.get("accelerator")  # Lightning accepts no "npu": no exact rename (route facts)
        if (isinstance(accelerator, ast.Constant) and accelerator.value in CUDA_ACCELERATORS
                and any(n.startswith(("lightning.", "pytorch_lightning.")) and n.endswith((".Trainer", ".Fabric"))
                        for n in func_names)):
            self.claim(accelerator)
            self.emit_impl("lightning-accelerator", accelerator, f'"{accelerator.value}"')
        # transformers `from_pretrained(..., attn_implementation="flash_attention_2")`, as in a config file
        attn = kwargs.get("attn_implementation")
        if isinstance(attn, ast.Constant) and attn.value in FLASH_ATTN_IMPLEMENTATIONS:
            self.emit_impl("config-flash-attention", attn, attn.value)
