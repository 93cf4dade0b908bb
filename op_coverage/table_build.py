"""Build the op-coverage table from the parsed inputs: one entry per API, per SoC."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from migrator.coverage._names import (
    normalize_name,
)
from op_coverage.aten_layer import kernel_for, parse_codegen_yaml, parse_native_functions
from op_coverage.docs_limits import DocRow, analyse_limits, parse_docs_md
from op_coverage.facts import (
    DTYPE_COPY_PASTE_PREFIXES,
    FLAGS,
    FORMAT_VERSION,
    GENERATOR_VERSION,
    KERNEL_RUNS_ON_NPU,
    KERNELS,
    SOC_TITLES,
    SOCS,
    STATUSES,
    TORCH_NPU_VERSION,
    TORCH_PAIRINGS,
    TORCH_PAIRINGS_SOURCE,
    TORCH_VERSION,
    WHEEL_CODEGEN,
    WHEEL_EXPOSED,
    WHEEL_NPU_INIT,
    WHEEL_OP_DOCS,
    WHEEL_OPTIM_INIT,
    WHEEL_TRANSFER,
    sorted_dtypes,
)
from op_coverage.table_output import RULES_TEXT, Entry, compact_entry, counts_of
from op_coverage.wheel_sources import (
    parse_all_list,
    parse_derivatives,
    parse_exposed_api,
    parse_op_plugin_docs,
    parse_optimizers,
    parse_transfer_to_npu,
)

# --------------------------------------------------------------------------------------------
# 7. building the table


@dataclass
class Inputs:
    """Everything the builder reads, already as text (tests pass small excerpts)."""

    wheel: Mapping[str, str]  # wheel member path -> text
    native_functions: str
    torch_cuda_init: str
    docs: Mapping[str, str]  # docs file name -> markdown
    derivatives: str
    meta: dict = field(default_factory=dict)  # header "inputs" section (versions, sha256s)
    docs_commit: str = "unknown"
    op_plugin_commit: str = "unknown"
    torch_npu_version: str = TORCH_NPU_VERSION
    torch_version: str = TORCH_VERSION


def _short(commit: str) -> str:
    return commit[:7] if re.fullmatch(r"[0-9a-f]{40}", commit or "") else (commit or "unknown")


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


def build_table(inp: Inputs) -> dict:
    wheel = inp.wheel
    codegen = parse_codegen_yaml(wheel[WHEEL_CODEGEN])
    aten = parse_native_functions(inp.native_functions, codegen.npu_ops)
    exposed = set(parse_exposed_api(wheel[WHEEL_EXPOSED]))
    npu_all = parse_all_list(wheel[WHEEL_NPU_INIT])
    cuda_all = parse_all_list(inp.torch_cuda_init)
    transfer = parse_transfer_to_npu(wheel[WHEEL_TRANSFER])
    products = parse_op_plugin_docs(wheel[WHEEL_OP_DOCS]) if WHEEL_OP_DOCS in wheel else {}
    optim_texts = {
        path[len("torch_npu/optim/"):-3]: text
        for path, text in wheel.items()
        if path.startswith("torch_npu/optim/") and path.endswith(".py") and path.count("/") == 2
    }
    optimizers = parse_optimizers(wheel[WHEEL_OPTIM_INIT], optim_texts) if WHEEL_OPTIM_INIT in wheel else {}
    major_minor = ".".join(inp.torch_npu_version.split(".")[:2])
    derivatives = parse_derivatives(inp.derivatives, "v" + major_minor)

    sources = {
        "aten": f"torch {inp.torch_version} native_functions.yaml",
        "derivatives": f"Ascend/op-plugin derivatives.yaml @{_short(inp.op_plugin_commit)}",
        "wheel": f"torch-npu {inp.torch_npu_version} wheel",
        "wheel:exposed_api": f"torch-npu {inp.torch_npu_version} wheel utils/exposed_api.py",
        "wheel:npu_all": f"torch-npu {inp.torch_npu_version} wheel npu/__init__.py",
        "wheel:op_docs": f"torch-npu {inp.torch_npu_version} wheel _op_plugin_docs.py",
        "wheel:optim": f"torch-npu {inp.torch_npu_version} wheel optim/",
        "wheel:transfer_to_npu": f"torch-npu {inp.torch_npu_version} wheel contrib/transfer_to_npu.py",
        "torch:cuda": f"torch {inp.torch_version} torch/cuda/__init__.py",
    }
    entries: dict[str, Entry] = {}

    def entry(name: str) -> Entry:
        if name not in entries:
            entries[name] = Entry(sources=set(), flags={s: set() for s in SOCS})
        return entries[name]

    # -- docs rows -------------------------------------------------------------------------
    doc_rows: dict[str, DocRow] = {}
    for filename in sorted(inp.docs):
        for row in parse_docs_md(inp.docs[filename], filename):
            doc_rows.setdefault(row.name, row)
            sources[f"docs:{filename}"] = (
                f"Ascend/pytorch docs pytorch_2-13-0/{filename} @{_short(inp.docs_commit)} (CC BY 4.0)"
            )

    for name, row in sorted(doc_rows.items()):
        e = entry(name)
        e["origin"] = "docs"
        e["sources"].add(f"docs:{row.file}")
        kernel, op = kernel_for(name, aten)
        e["kernel"], e["aten"] = kernel, op
        if op:
            e["sources"].add("aten")
        lim = analyse_limits(row.limit_lines)
        status: dict[str, str] = {}
        dtypes: dict[str, list] = {}
        excluded: dict[str, list] = {}
        fragments: dict[str, list] = {}
        more: dict[str, int] = {}
        ignored_dtypes: list[str] = []
        non_tensor = name.startswith(DTYPE_COPY_PASTE_PREFIXES)
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
            if soc_dtypes:
                dtypes[soc] = sorted_dtypes((set(soc_dtypes) | lim.added[soc]) - lim.excluded[soc])
            if lim.excluded[soc]:
                excluded[soc] = sorted_dtypes(lim.excluded[soc])
            flags.update(lim.flags[soc])
            fragments[soc] = list(lim.fragments[soc])
            more[soc] = lim.untranslated[soc]
            if kernel == "cpu_fallback":
                flags.add("cpu_fallback")
        e["status"] = status
        e["dtypes"] = dtypes
        e["dtypes_excluded"] = excluded
        e["limits"] = fragments
        e["more_limits"] = more
        if ignored_dtypes:
            e["ignored_dtypes"] = sorted_dtypes(ignored_dtypes)
        npu = _npu_form(row.npu_name) or _npu_form(lim.npu_name)
        if npu:
            e["npu_name"] = npu

    # -- public torch names from native_functions.yaml that the docs do not list ----------
    for name, base in sorted(aten.bindings.items()):
        if name in entries:
            continue
        kernel, op = aten.base_kernel[base]
        e = entry(name)
        e["origin"] = "aten"
        e["kernel"], e["aten"] = kernel, op
        e["sources"].add("aten")
        e["sources"].add("wheel")
        e["status"] = {s: ("cpu_fallback" if kernel == "cpu_fallback" else "unverified") for s in SOCS}
        if kernel == "cpu_fallback":
            for s in SOCS:
                e["flags"][s].add("cpu_fallback")

    # -- torch.cuda.* and transfer_to_npu ---------------------------------------------------
    npu_all_set = set(npu_all)
    aliases = dict(transfer["aliases"])
    handled = set(aliases) | set(transfer["module_patches"])

    def ensure(name: str, origin: str) -> Entry:
        e = entry(name)
        if "origin" not in e:
            e["origin"] = origin
            e["kernel"], e["aten"] = ("none", None)
            e["status"] = {s: "unverified" for s in SOCS}
        return e

    for x in sorted(set(cuda_all) | npu_all_set):
        name = f"torch.cuda.{x}"
        if x not in cuda_all and name not in entries:
            continue  # NPU-only name: no CUDA spelling to migrate from
        e = ensure(name, "cuda")
        e["sources"].add("torch:cuda")
        if x in npu_all_set:
            e["npu_name"] = f"torch.npu.{x}"
            e["sources"].add("wheel:npu_all")
            for s in SOCS:
                e["flags"][s].add("transfer_to_npu")
        elif name not in handled and e["origin"] == "cuda":
            e["status"] = {s: "unsupported" for s in SOCS}
            e["limits"] = {s: ["no NPU counterpart: not in torch_npu.npu.__all__ and not patched by transfer_to_npu"] for s in SOCS}
    for x in sorted(npu_all_set):
        name = f"torch.npu.{x}"
        e = ensure(name, "npu")
        e["sources"].add("wheel:npu_all")
        cuda_row = entries.get(f"torch.cuda.{x}")
        if cuda_row is not None and cuda_row.get("origin") == "docs":
            e["status"] = dict(cuda_row["status"])
            e["sources"].update(s for s in cuda_row["sources"] if s.startswith("docs:"))
        for s in SOCS:
            e["flags"][s].add("npu_native")

    # modules replaced by transfer_to_npu: names of their __all__ become torch.npu.* names
    for dest, src in transfer["module_patches"].items():
        if dest == "torch.cuda":
            continue
        path = _wheel_module_file(src, wheel)
        names = parse_all_list(wheel[path]) if path else []
        if names and dest.startswith("torch.cuda."):
            for x in names:
                e = ensure(f"{dest}.{x}", "transfer")
                e["npu_name"] = _npu_form(f"{src}.{x}")
                e["sources"].add("wheel:transfer_to_npu")
                for s in SOCS:
                    e["flags"][s].add("transfer_to_npu")
        e = ensure(dest, "transfer")
        e["npu_name"] = _npu_form(src)
        e["sources"].add("wheel:transfer_to_npu")
        for s in SOCS:
            e["flags"][s].add("transfer_to_npu")
    for dest, src in aliases.items():
        e = ensure(dest, "transfer")
        e["npu_name"] = _npu_form(src)
        e["sources"].add("wheel:transfer_to_npu")
        if dest.rsplit(".", 1)[-1] != src.rsplit(".", 1)[-1] and "Double" in dest and "Float" in src:
            for s in SOCS:
                e["flags"][s].add("precision_change")
            e.setdefault("limits", {})
            for s in SOCS:
                frags = e["limits"].setdefault(s, [])
                if "transfer_to_npu rebinds it to a float32 type (double not supported)" not in frags:
                    frags.append("transfer_to_npu rebinds it to a float32 type (double not supported)")
        for s in SOCS:
            e["flags"][s].add("transfer_to_npu")
        if e["origin"] == "transfer" and dest.startswith("torch.cuda."):
            e["status"] = {s: "unverified" for s in SOCS}
    for rule, flag in (("device_rule", "device_rule"), ("hccl_rule", "hccl_rule")):
        for name in transfer[rule]:
            if name in entries:
                for s in SOCS:
                    entries[name]["flags"][s].add(flag)
                entries[name]["sources"].add("wheel:transfer_to_npu")

    # -- custom ops (torch_npu.X) ------------------------------------------------------------
    for base, rec in sorted(codegen.custom.items()):
        name = f"torch_npu.{base}"
        e = entry(name)
        e["origin"] = "custom"
        e["kernel"], e["aten"] = "npu_kernel", None
        e["sources"].update({"wheel"})
        schemas = rec["schemas"]
        e["signature"] = schemas.get(base) or schemas[sorted(schemas)[0]]
        documented = products.get(base)
        if documented is not None:
            e["sources"].add("wheel:op_docs")
        e["status"] = {s: ("supported" if documented and s in documented else "unverified") for s in SOCS}
        public = rec["exposed"] or base in exposed
        if base in exposed:
            e["sources"].add("wheel:exposed_api")
        grads = derivatives.get(base)
        limits: list[str] = []
        for s in SOCS:
            if public:
                e["flags"][s].add("public")
            if grads is not None:
                e["flags"][s].add("autograd")
            if "nondeterministic_seeded" in rec["tags"]:
                e["flags"][s].add("nondeterministic_seeded")
            e["flags"][s].add("npu_native")
        if grads is not None:
            e["sources"].add("derivatives")
            if grads:
                limits.append("autograd: gradients for " + ", ".join(grads))
        if documented is not None:
            limits.append("documented products: " + (", ".join(documented) if documented else "none of A2/A3/950DT"))
        if limits:
            e["limits"] = {s: list(limits) for s in SOCS}
    for cls, signature in optimizers.items():
        if cls == "NpuFusedOptimizerBase":
            continue
        name = f"torch_npu.optim.{cls}"
        e = entry(name)
        e["origin"] = "optim"
        e["kernel"], e["aten"] = "none", None
        e["status"] = {s: "unverified" for s in SOCS}
        e["signature"] = signature
        e["sources"].add("wheel:optim")
        for s in SOCS:
            e["flags"][s].add("npu_native")

    # -- bf16 undocumented ------------------------------------------------------------------
    for e in entries.values():
        bf16u = []
        for soc in SOCS:
            dts = e.get("dtypes", {}).get(soc)
            if (
                dts
                and e["status"].get(soc) in ("supported", "partial")
                and "bf16" not in dts
                and ("fp16" in dts or "fp32" in dts)
                and e.get("kernel") in KERNEL_RUNS_ON_NPU
            ):
                bf16u.append(soc)
        e["bf16_undocumented"] = bf16u

    table_entries = {name: compact_entry(e) for name, e in sorted(entries.items())}
    counts = counts_of(table_entries, aten)
    aten_by_class: dict[str, list[str]] = {k: [] for k in KERNELS if k not in ("none", "unknown")}
    for op, cls in sorted(aten.overloads.items()):
        aten_by_class[cls].append(op)

    return {
        "format": FORMAT_VERSION,
        "generator": {"script": "op_coverage/generate.py", "version": GENERATOR_VERSION},
        "torch_npu_version": inp.torch_npu_version,
        "combined": (
            f"torch-npu {inp.torch_npu_version} wheel (NPU kernels, custom ops, transfer_to_npu, optimizers) x "
            f"torch {inp.torch_version} native_functions.yaml (ATen classification; torch-npu 2.14.0's op list "
            f"is byte-identical to 2.13.0's) x Ascend/pytorch native-API docs pytorch_2-13-0 @{_short(inp.docs_commit)} "
            f"(per-SoC status, dtypes) x Ascend/op-plugin derivatives.yaml @{_short(inp.op_plugin_commit)} (autograd)"
        ),
        "inputs": inp.meta,
        "attribution": (
            "Per-SoC support status, dtype lists, flags and NPU names are derived from the Ascend/pytorch "
            "documentation (docs/zh/api/native_api/pytorch_2-13-0, CC BY 4.0, "
            "https://creativecommons.org/licenses/by/4.0/). Changes: reduced to facts; the Chinese prose is not "
            "reproduced, limits are summarised in short English phrases generated by op_coverage/generate.py. "
            "Kernel, custom-op, transfer_to_npu and optimizer data come from torch-npu and PyTorch (BSD-3-Clause); "
            "autograd data from Ascend/op-plugin (BSD-3-Clause)."
        ),
        "rules": RULES_TEXT,
        "socs": {s: SOC_TITLES[s] for s in SOCS},
        "soc_order": list(SOCS),
        "statuses": list(STATUSES),
        "kernels": list(KERNELS),
        "flags": dict(sorted(FLAGS.items())),
        "sources": dict(sorted(sources.items())),
        "torch_pairings": {
            "source": TORCH_PAIRINGS_SOURCE,
            "pairs": [{"torch": t, "torch_npu": n, "requires": r} for t, n, r in TORCH_PAIRINGS],
        },
        "counts": counts,
        "transfer_to_npu": transfer,
        "aten": aten_by_class,
        "entries": table_entries,
    }


