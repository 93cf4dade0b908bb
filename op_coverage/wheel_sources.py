"""Facts read from text with `ast` or yaml, never imported: the wheel's Python sources,
op-plugin `derivatives.yaml` and the shared data snapshot's `SOURCES.md`."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping

from op_coverage.facts import SOCS, GenerationError, op_name_of, yaml_load


def parse_all_list(text: str) -> list[str]:
    """The literal ``__all__`` of a module (``__all__ = [...]`` plus ``+=`` / ``.extend``)."""
    tree = ast.parse(text)
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == "__all__":
            try:
                names.extend(ast.literal_eval(node.value))
            except ValueError:
                pass
    return names


def parse_exposed_api(text: str) -> list[str]:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "public_npu_functions" for t in node.targets
        ):
            return sorted(set(ast.literal_eval(node.value)))
    raise GenerationError("exposed_api.py: no public_npu_functions list")


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def parse_transfer_to_npu(text: str) -> dict:
    """The CUDA -> NPU name map implemented by ``torch_npu/contrib/transfer_to_npu.py``."""
    tree = ast.parse(text)
    lists: dict[str, list[str]] = {}
    functions: dict[str, ast.FunctionDef] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                lists[node.targets[0].id] = value
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
    init = functions.get("_init")
    if init is None:
        raise GenerationError("transfer_to_npu.py: no _init() function")
    rules = _InitRules()
    for node in ast.walk(init):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            rules.assignment(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_device_wrapper":
            rules.device_wrapper(node, lists)
    return {
        "aliases": dict(sorted(rules.aliases.items())),
        "device_kwargs": sorted(lists.get("device_kwargs_list", [])),
        "device_rule": sorted(rules.device_rule),
        "hccl_rule": sorted(rules.hccl_rule),
        "module_patches": dict(sorted(_module_patches(functions.values()).items())),
        "other_patches": dict(sorted(rules.other_patches.items())),
    }


def _module_patches(functions: Iterable[ast.FunctionDef]) -> dict[str, str]:
    """``patches = [["cuda.amp", torch_npu.npu.amp], ...]``: whole modules replaced."""
    module_patches: dict[str, str] = {}
    for func in functions:
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "patches"
                and isinstance(node.value, ast.List)
            ):
                for item in node.value.elts:
                    if isinstance(item, ast.List) and len(item.elts) == 2 and isinstance(item.elts[0], ast.Constant):
                        target = _dotted(item.elts[1])
                        if target:
                            module_patches["torch." + item.elts[0].value] = target
    return module_patches


def _wrapped_names(call: ast.AST) -> set[str]:
    """Wrapper function names applied by ``w(x)`` / ``_compose_wrappers(a, b)(x)``."""
    if not isinstance(call, ast.Call):
        return set()
    func = call.func
    if isinstance(func, ast.Name):
        return {func.id}
    if isinstance(func, ast.Call) and isinstance(func.func, ast.Name) and func.func.id == "_compose_wrappers":
        return {a.id for a in func.args if isinstance(a, ast.Name)}
    return set()


class _InitRules:
    """What ``_init()`` of transfer_to_npu rebinds, wraps or patches."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}
        self.device_rule: set[str] = set()
        self.hccl_rule: set[str] = set()
        self.other_patches: dict[str, str] = {}

    def assignment(self, node: ast.Assign) -> None:
        target = _dotted(node.targets[0])
        if not target or not target.startswith("torch."):
            return
        source = _dotted(node.value)
        if source and (source.startswith("torch.") or source.startswith("torch_npu.")):
            self.aliases[target] = source
            return
        if isinstance(node.value, ast.Name):
            self.other_patches[target] = node.value.id
            return
        wrappers = _wrapped_names(node.value)
        if "_wrapper_cuda" in wrappers:
            self.device_rule.add(target)
        if "_wrapper_hccl" in wrappers:
            self.hccl_rule.add(target)
        for name in sorted(wrappers - {"_wrapper_cuda", "_wrapper_hccl"}):
            self.other_patches[target] = name

    def device_wrapper(self, node: ast.Call, lists: Mapping[str, list[str]]) -> None:
        """``_device_wrapper(owner, names)``: cuda device arguments of each callable become npu."""
        if len(node.args) != 2:
            return
        owner = _dotted(node.args[0])
        names_node = node.args[1]
        if isinstance(names_node, ast.Name):
            names = lists.get(names_node.id, [])
        else:
            try:
                names = list(ast.literal_eval(names_node))
            except ValueError:
                names = []
        if owner:
            self.device_rule.update(f"{owner}.{n}" for n in names)


def parse_op_plugin_docs(text: str) -> dict[str, list[str]]:
    """Custom op -> SoCs named in the "支持的型号" section of its wheel docstring."""
    tree = ast.parse(text)
    products: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_add_torch_npu_docstr"):
            continue
        if len(node.args) < 2 or not all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args[:2]):
            continue
        name, doc = node.args[0].value, node.args[1].value
        match = re.search(r"支持的型号[:：]?[ \t]*\n(.*?)(?:\n[ \t]*\n|\Z)", doc, re.S)
        if not match:
            continue
        socs: set[str] = set()
        for line in match.group(1).splitlines():
            line = line.strip().lstrip("-").strip()
            if not re.search(r"Atlas|Ascend|昇腾|A2|A3", line):
                break
            if "A2" in line:
                socs.add("A2")
            if "A3" in line:
                socs.add("A3")
            if "950" in line:
                socs.add("950DT")
        products[name] = [s for s in SOCS if s in socs]
    return products


def _format_args(args: ast.arguments, source: str, constants: Mapping[str, str] | None = None) -> str:
    """Constructor arguments without ``self``, defaults spelled as in the source (``1e-3``);
    module-level literal constants used as defaults are replaced by their value."""
    constants = constants or {}

    def default_text(node: ast.AST) -> str:
        if isinstance(node, ast.Name) and node.id in constants:
            return constants[node.id]
        text = ast.get_source_segment(source, node) or ast.unparse(node)
        return re.sub(r"\s+", " ", text)

    positional = list(args.posonlyargs) + list(args.args)
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = []
    for arg, default in zip(positional, defaults):
        parts.append(arg.arg if default is None else f"{arg.arg}={default_text(default)}")
    if args.vararg:
        parts.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        parts.append(arg.arg if default is None else f"{arg.arg}={default_text(default)}")
    if args.kwarg:
        parts.append("**" + args.kwarg.arg)
    if parts and parts[0] == "self":
        parts = parts[1:]
    return ", ".join(parts)


def _literal_constants(source: str, mod: ast.Module) -> dict[str, str]:
    """Module-level `NAME = <literal>` assignments, as written (defaults often name them)."""
    constants: dict[str, str] = {}
    for node in mod.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            constants[node.targets[0].id] = ast.get_source_segment(source, node.value) or ast.unparse(node.value)
    return constants


def _constructor(cls: str, source: str) -> str | None:
    """``Cls(args)`` from the class's ``__init__`` in its module's source; None when the class has none."""
    mod = ast.parse(source)
    constants = _literal_constants(source, mod)
    found = None
    for node in mod.body:
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    found = f"{cls}({_format_args(item.args, source, constants)})"
    return found


def parse_optimizers(init_text: str, module_texts: Mapping[str, str]) -> dict[str, str]:
    """Public ``torch_npu.optim`` classes -> constructor signature (defaults as written)."""
    tree = ast.parse(init_text)
    public = parse_all_list(init_text)
    where: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            for alias in node.names:
                where[alias.asname or alias.name] = node.module
    out: dict[str, str] = {}
    for cls in public:
        source = module_texts.get(where.get(cls) or "")
        signature = _constructor(cls, source) if source is not None else None
        if signature is not None:
            out[cls] = signature
    return dict(sorted(out.items()))


def parse_derivatives(text: str, version_key: str) -> dict[str, list[str]]:
    """Ops with a backward formula valid for ``version_key`` (e.g. ``v2.14``) -> grad inputs."""
    data = yaml_load(text) or {}
    all_versions = [str(v) for v in data.get("all_version") or []]
    def applies(spec) -> bool:
        if spec is None or spec == "all_version":
            return True
        if isinstance(spec, str):
            return spec == version_key
        spec = [str(s) for s in spec]
        if len(spec) == 2 and (spec[1] == "newest" or spec[1] in all_versions) and spec[0] in all_versions:
            lo = all_versions.index(spec[0])
            hi = len(all_versions) - 1 if spec[1] == "newest" else all_versions.index(spec[1])
            return version_key in all_versions[lo : hi + 1]
        return version_key in spec

    skip = {"name", "version", "output_differentiability", "dispatch", "result"}
    out_lists: dict[str, list] = {}
    for entry in data.get("backward") or []:
        if not isinstance(entry, dict) or "name" not in entry or not applies(entry.get("version")):
            continue
        base = op_name_of(entry["name"]).split(".", 1)[0]
        inputs = out_lists.setdefault(base, [])
        for key in entry:
            if key in skip or str(key).startswith("result"):
                continue
            for k in str(key).split(","):
                k = k.strip()
                if k and k not in inputs:
                    inputs.append(k)
    return dict(sorted(out_lists.items()))


def parse_sources_md(text: str) -> dict[str, dict]:
    """``data/`` path -> {commit, path, licence, sha256} from the snapshot's SOURCES.md."""
    rows: dict[str, dict] = {}
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 7:
            continue
        path = cells[0].strip("`")
        sha = cells[-1].strip("`")
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            continue
        rows[path] = {
            "upstream": cells[1],
            "commit": cells[2].strip("`"),
            "path": cells[3].strip("`"),
            "licence": cells[4],
            "sha256": sha,
        }
    return rows


