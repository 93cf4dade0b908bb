"""Build the op-coverage table from the parsed inputs: one entry per API, per SoC."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from migrator.catalogue.coverage._names import normalize_name
from op_coverage.aten_layer import AtenInfo, CodegenInfo, kernel_for, parse_codegen_yaml, parse_native_functions
from op_coverage.docs_limits import DocRow, LimitInfo, analyse_limits, parse_docs_md
from op_coverage.facts import (
    DTYPE_BLIND_APIS,
    DTYPE_COPY_PASTE_PREFIXES,
    INDEX_DTYPES,
    KERNEL_RUNS_ON_NPU,
    SOCS,
    WHEEL_CODEGEN,
    WHEEL_EXPOSED,
    WHEEL_NPU_INIT,
    WHEEL_OP_DOCS,
    WHEEL_OPTIM_INIT,
    WHEEL_TRANSFER,
    short_commit,
    sorted_dtypes,
)
from op_coverage.table_inputs import Inputs
from op_coverage.table_output import Entry, table_document
from op_coverage.wheel_sources import (
    parse_all_list,
    parse_derivatives,
    parse_exposed_api,
    parse_op_plugin_docs,
    parse_optimizers,
    parse_transfer_to_npu,
)


@dataclass
class Parsed:
    """Each input parsed on its own, before anything is combined."""

    codegen: CodegenInfo
    aten: AtenInfo
    exposed: set[str]
    npu_all: list[str]
    cuda_all: list[str]
    transfer: dict
    products: dict[str, list[str]]  # custom op -> products its wheel docstring names
    optimizers: dict[str, str]  # class -> constructor signature
    derivatives: dict[str, list[str]]  # custom op -> inputs with gradients


def parse_inputs(inp: Inputs) -> Parsed:
    wheel = inp.wheel
    codegen = parse_codegen_yaml(wheel[WHEEL_CODEGEN])
    optim_texts = {
        path[len("torch_npu/optim/"):-3]: text
        for path, text in wheel.items()
        if path.startswith("torch_npu/optim/") and path.endswith(".py") and path.count("/") == 2
    }
    major_minor = ".".join(inp.torch_npu_version.split(".")[:2])
    return Parsed(
        codegen=codegen,
        aten=parse_native_functions(inp.native_functions, codegen.npu_ops),
        exposed=set(parse_exposed_api(wheel[WHEEL_EXPOSED])),
        npu_all=parse_all_list(wheel[WHEEL_NPU_INIT]),
        cuda_all=parse_all_list(inp.torch_cuda_init),
        transfer=parse_transfer_to_npu(wheel[WHEEL_TRANSFER]),
        products=parse_op_plugin_docs(wheel[WHEEL_OP_DOCS]) if WHEEL_OP_DOCS in wheel else {},
        optimizers=parse_optimizers(wheel[WHEEL_OPTIM_INIT], optim_texts) if WHEEL_OPTIM_INIT in wheel else {},
        derivatives=parse_derivatives(inp.derivatives, "v" + major_minor),
    )


def _npu_form(name: str | None) -> str | None:
    if not name:
        return None
    name = normalize_name(name)
    if name.startswith("torch_npu.npu."):
        name = "torch.npu." + name[len("torch_npu.npu."):]
    elif name == "torch_npu.npu":
        name = "torch.npu"
    return name


def _wheel_module_file(module: str, wheel: Mapping[str, str]) -> str | None:
    base = module.replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if candidate in wheel:
            return candidate
    return None


class _Entries:
    """The entries under construction and the sources they cite."""

    def __init__(self, inp: Inputs) -> None:
        npu = f"torch-npu {inp.torch_npu_version} wheel"
        self.sources = {
            "aten": f"torch {inp.torch_version} native_functions.yaml",
            "derivatives": f"Ascend/op-plugin derivatives.yaml @{short_commit(inp.op_plugin_commit)}",
            "wheel": npu,
            "wheel:exposed_api": f"{npu} utils/exposed_api.py",
            "wheel:npu_all": f"{npu} npu/__init__.py",
            "wheel:op_docs": f"{npu} _op_plugin_docs.py",
            "wheel:optim": f"{npu} optim/",
            "wheel:transfer_to_npu": f"{npu} contrib/transfer_to_npu.py",
            "torch:cuda": f"torch {inp.torch_version} torch/cuda/__init__.py",
        }
        self.entries: dict[str, Entry] = {}

    def entry(self, name: str) -> Entry:
        if name not in self.entries:
            self.entries[name] = Entry(sources=set(), flags={s: set() for s in SOCS})
        return self.entries[name]

    def ensure(self, name: str, origin: str) -> Entry:
        """The entry, created as an unverified API without an ATen op where it is new."""
        e = self.entry(name)
        if "origin" not in e:
            e["origin"] = origin
            e["kernel"], e["aten"] = ("none", None)
            e["status"] = {s: "unverified" for s in SOCS}
        return e


def _flag_all(e: Entry, flag: str) -> None:
    for s in SOCS:
        e["flags"][s].add(flag)


def build_table(inp: Inputs) -> dict:
    parsed = parse_inputs(inp)
    table = _Entries(inp)
    _add_doc_rows(table, inp, parsed.aten)
    _add_aten_names(table, parsed.aten)
    _add_cuda_names(table, parsed)
    _add_transfer_to_npu(table, parsed.transfer, inp.wheel)
    _add_custom_ops(table, parsed)
    _add_optimizers(table, parsed.optimizers)
    _mark_bf16_undocumented(table.entries)
    return table_document(inp, parsed.aten, parsed.transfer, table.sources, table.entries)


def _add_doc_rows(table: _Entries, inp: Inputs, aten: AtenInfo) -> None:
    """APIs the Ascend native-API list names: their documented status, dtypes and limits per SoC."""
    doc_rows: dict[str, DocRow] = {}
    for filename in sorted(inp.docs):
        for row in parse_docs_md(inp.docs[filename], filename):
            doc_rows.setdefault(row.name, row)
            table.sources[f"docs:{filename}"] = (
                f"Ascend/pytorch docs pytorch_2-13-0/{filename} @{short_commit(inp.docs_commit)} (CC BY 4.0)"
            )
    for name, row in sorted(doc_rows.items()):
        e = table.entry(name)
        e["origin"] = "docs"
        e["sources"].add(f"docs:{row.file}")
        e["kernel"], e["aten"] = kernel_for(name, aten)
        if e["aten"]:
            e["sources"].add("aten")
        lim = analyse_limits(row.limit_lines)
        _doc_status(e, row, lim, non_tensor=name.startswith(DTYPE_COPY_PASTE_PREFIXES) or name in DTYPE_BLIND_APIS,
                    module_class=re.match(r"^torch\.nn\.[A-Z]\w*$", name) is not None)
        npu = _npu_form(row.npu_name) or _npu_form(lim.npu_name)
        if npu:
            e["npu_name"] = npu


def _doc_status(e: Entry, row: DocRow, lim: LimitInfo, non_tensor: bool, module_class: bool = False) -> None:
    """Per SoC: the docs' tick or cross decides; limits make a tick partial."""
    kernel = e["kernel"]
    status: dict[str, str] = {}
    dtypes: dict[str, list] = {}
    excluded: dict[str, list] = {}
    fragments: dict[str, list] = {}
    more: dict[str, int] = {}
    ignored_dtypes: list[str] = []
    for soc in SOCS:
        flags = e["flags"][soc]
        if soc not in row.support:
            status[soc] = "unverified"
            continue
        if not row.support[soc]:
            status[soc] = "unsupported"
            if kernel in ("npu_kernel", "npu_kernel_via_delegate"):
                flags.add("doc_kernel_conflict")
            continue
        soc_dtypes = list(lim.dtypes.get(soc, []))
        if non_tensor and lim.dtype_only[soc] and soc_dtypes:
            ignored_dtypes = soc_dtypes
            flags.add("doc_dtype_ignored")
            status[soc] = "supported"
            continue
        status[soc] = "partial" if lim.applies[soc] else "supported"
        fragments[soc] = list(lim.fragments[soc])
        if soc_dtypes and module_class and set(soc_dtypes) <= INDEX_DTYPES:
            # nn.Embedding's `input` is its indices: the list says nothing of the weight's dtype
            fragments[soc].insert(0, f"indices: {', '.join(sorted_dtypes(soc_dtypes))} only")
        elif soc_dtypes:
            dtypes[soc] = sorted_dtypes((set(soc_dtypes) | lim.added[soc]) - lim.excluded[soc])
        if lim.excluded[soc]:
            excluded[soc] = sorted_dtypes(lim.excluded[soc])
        flags.update(lim.flags[soc])
        more[soc] = lim.untranslated[soc]
        if kernel == "cpu_fallback":
            flags.add("cpu_fallback")
    e.update(status=status, dtypes=dtypes, dtypes_excluded=excluded, limits=fragments, more_limits=more)
    if ignored_dtypes:
        e["ignored_dtypes"] = sorted_dtypes(ignored_dtypes)


def _add_aten_names(table: _Entries, aten: AtenInfo) -> None:
    """Public torch names from native_functions.yaml that the docs do not list."""
    for name, base in sorted(aten.bindings.items()):
        if name in table.entries:
            continue
        kernel, op = aten.base_kernel[base]
        e = table.entry(name)
        e["origin"] = "aten"
        e["kernel"], e["aten"] = kernel, op
        e["sources"].add("aten")
        e["sources"].add("wheel")
        e["status"] = {s: ("cpu_fallback" if kernel == "cpu_fallback" else "unverified") for s in SOCS}
        if kernel == "cpu_fallback":
            _flag_all(e, "cpu_fallback")


def _add_cuda_names(table: _Entries, parsed: Parsed) -> None:
    """torch.cuda.X and its torch.npu.X counterpart (torch_npu.npu.__all__)."""
    cuda_all, npu_all_set = parsed.cuda_all, set(parsed.npu_all)
    handled = set(parsed.transfer["aliases"]) | set(parsed.transfer["module_patches"])
    for x in sorted(set(cuda_all) | npu_all_set):
        name = f"torch.cuda.{x}"
        if x not in cuda_all and name not in table.entries:
            continue  # NPU-only name: no CUDA spelling to migrate from
        e = table.ensure(name, "cuda")
        e["sources"].add("torch:cuda")
        if x in npu_all_set:
            e["npu_name"] = f"torch.npu.{x}"
            e["sources"].add("wheel:npu_all")
            _flag_all(e, "transfer_to_npu")
        elif name not in handled and e["origin"] == "cuda":
            e["status"] = {s: "unsupported" for s in SOCS}
            e["limits"] = {s: ["no NPU counterpart: not in torch_npu.npu.__all__ and not patched by transfer_to_npu"] for s in SOCS}
    for x in sorted(npu_all_set):
        e = table.ensure(f"torch.npu.{x}", "npu")
        e["sources"].add("wheel:npu_all")
        cuda_row = table.entries.get(f"torch.cuda.{x}")
        if cuda_row is not None and cuda_row.get("origin") == "docs":
            e["status"] = dict(cuda_row["status"])
            e["sources"].update(s for s in cuda_row["sources"] if s.startswith("docs:"))
        _flag_all(e, "npu_native")


def _transferred(table: _Entries, name: str, npu_name: str | None) -> Entry:
    e = table.ensure(name, "transfer")
    e["npu_name"] = _npu_form(npu_name)
    e["sources"].add("wheel:transfer_to_npu")
    return e


def _add_transferred_modules(table: _Entries, transfer: dict, wheel: Mapping[str, str]) -> None:
    """Whole modules transfer_to_npu patches (a torch.cuda.* module's __all__ become torch.npu.* names)."""
    for dest, src in transfer["module_patches"].items():
        if dest == "torch.cuda":
            continue
        path = _wheel_module_file(src, wheel)
        names = parse_all_list(wheel[path]) if path else []
        if names and dest.startswith("torch.cuda."):
            for x in names:
                _flag_all(_transferred(table, f"{dest}.{x}", f"{src}.{x}"), "transfer_to_npu")
        _flag_all(_transferred(table, dest, src), "transfer_to_npu")


def _add_transferred_aliases(table: _Entries, transfer: dict) -> None:
    """Single names transfer_to_npu rebinds (a Double type to its Float one is a precision change)."""
    rebound = "transfer_to_npu rebinds it to a float32 type (double not supported)"
    for dest, src in dict(transfer["aliases"]).items():
        e = _transferred(table, dest, src)
        if dest.rsplit(".", 1)[-1] != src.rsplit(".", 1)[-1] and "Double" in dest and "Float" in src:
            _flag_all(e, "precision_change")
            e.setdefault("limits", {})
            for s in SOCS:
                frags = e["limits"].setdefault(s, [])
                if rebound not in frags:
                    frags.append(rebound)
        _flag_all(e, "transfer_to_npu")
        if e["origin"] == "transfer" and dest.startswith("torch.cuda."):
            e["status"] = {s: "unverified" for s in SOCS}


def _add_transfer_to_npu(table: _Entries, transfer: dict, wheel: Mapping[str, str]) -> None:
    """What transfer_to_npu patches: whole modules, single rebindings, device and HCCL rules."""
    _add_transferred_modules(table, transfer, wheel)
    _add_transferred_aliases(table, transfer)
    for rule in ("device_rule", "hccl_rule"):
        for name in transfer[rule]:
            if name in table.entries:
                _flag_all(table.entries[name], rule)
                table.entries[name]["sources"].add("wheel:transfer_to_npu")


def _add_custom_ops(table: _Entries, parsed: Parsed) -> None:
    """torch_npu.X custom ops: documented products, public or not, autograd."""
    for base, rec in sorted(parsed.codegen.custom.items()):
        e = table.entry(f"torch_npu.{base}")
        e["origin"] = "custom"
        e["kernel"], e["aten"] = "npu_kernel", None
        e["sources"].update({"wheel"})
        schemas = rec["schemas"]
        e["signature"] = schemas.get(base) or schemas[sorted(schemas)[0]]
        documented = parsed.products.get(base)
        if documented is not None:
            e["sources"].add("wheel:op_docs")
        e["status"] = {s: ("supported" if documented and s in documented else "unverified") for s in SOCS}
        if base in parsed.exposed:
            e["sources"].add("wheel:exposed_api")
        grads = parsed.derivatives.get(base)
        if rec["exposed"] or base in parsed.exposed:
            _flag_all(e, "public")
        if grads is not None:
            _flag_all(e, "autograd")
        if "nondeterministic_seeded" in rec["tags"]:
            _flag_all(e, "nondeterministic_seeded")
        _flag_all(e, "npu_native")
        limits: list[str] = []
        if grads is not None:
            e["sources"].add("derivatives")
            if grads:
                limits.append("autograd: gradients for " + ", ".join(grads))
        if documented is not None:
            limits.append("documented products: " + (", ".join(documented) if documented else "none of A2/A3/950DT"))
        if limits:
            e["limits"] = {s: list(limits) for s in SOCS}


def _add_optimizers(table: _Entries, optimizers: dict[str, str]) -> None:
    for cls, signature in optimizers.items():
        if cls == "NpuFusedOptimizerBase":
            continue
        e = table.entry(f"torch_npu.optim.{cls}")
        e["origin"] = "optim"
        e["kernel"], e["aten"] = "none", None
        e["status"] = {s: "unverified" for s in SOCS}
        e["signature"] = signature
        e["sources"].add("wheel:optim")
        _flag_all(e, "npu_native")


def _mark_bf16_undocumented(entries: dict[str, Entry]) -> None:
    """SoCs where the documented dtypes have fp16/fp32 but not bf16 although the op runs on the NPU."""
    for e in entries.values():
        e["bf16_undocumented"] = [
            soc for soc in SOCS
            if (dts := e.get("dtypes", {}).get(soc))
            and e["status"].get(soc) in ("supported", "partial")
            and "bf16" not in dts
            and ("fp16" in dts or "fp32" in dts)
            and e.get("kernel") in KERNEL_RUNS_ON_NPU
        ]
