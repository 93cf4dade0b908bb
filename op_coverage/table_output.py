"""The table's fixed header text, its compact entry form, counts and byte-deterministic JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from op_coverage.aten_layer import AtenInfo
from op_coverage.facts import (
    FLAGS,
    FORMAT_VERSION,
    GENERATOR_VERSION,
    KERNELS,
    SOC_TITLES,
    SOCS,
    STATUSES,
    TORCH_PAIRINGS,
    TORCH_PAIRINGS_SOURCE,
    short_commit,
)

if TYPE_CHECKING:
    from op_coverage.table_inputs import Inputs


class Entry(dict):
    """Mutable entry during generation (plain dict once written)."""


RULES_TEXT = {
    "status": (
        "Docs win for status: a row in the Ascend native-API list decides per SoC (cross = unsupported, "
        "tick without limits = supported, tick with limits = partial). The ATen kernel signal never overrides "
        "a documented status; disagreements are kept as flags: doc_kernel_conflict (cross although the ATen op "
        "has an NPU kernel) and cpu_fallback (tick although the ATen op has no NPU kernel and would run on the "
        "CPU fallback)."
    ),
    "unlisted": (
        "APIs the docs do not list are 'unverified', except when their ATen op has neither an NPU kernel nor a "
        "decomposition (kernel cpu_fallback): then 'cpu_fallback'. torch.cuda.X not in torch_npu.npu.__all__ "
        "and not patched by transfer_to_npu is 'unsupported'. Custom ops are 'supported' on the products named "
        "in their wheel docstring and 'unverified' elsewhere; torch_npu optimizers are 'unverified'."
    ),
    "dtypes": (
        "dtypes is the documented list for the first tensor argument (empty = not documented). "
        "bf16_undocumented lists SoCs where that list has fp16/fp32 but not bf16 while the ATen layer runs the "
        "op on the NPU (npu_kernel, via delegate, decomposes, composite_explicit): a documentation gap, "
        "info only, never a warning by itself. Dtype-only limits on non-tensor APIs (torch.backends.*, "
        "torch.nn.Module containers and methods, torch.fx, schedulers, samplers) and on Tensor APIs that compute "
        "nothing on the elements (metadata such as Tensor.size, autograd bookkeeping, nn.Identity) are copy-paste "
        "in the docs and ignored (doc_dtype_ignored). A torch.nn module whose list holds only integer dtypes "
        "(nn.Embedding) documents its index input: the list becomes the limit 'indices: ... only'."
    ),
    "npu_name": (
        "torch.cuda.X -> torch.npu.X iff X is in torch_npu.npu.__all__; otherwise an explicit transfer_to_npu "
        "rebinding, otherwise the docs' NPU form (torch_npu.npu.* written as torch.npu.*)."
    ),
}


def compact_entry(e: Entry) -> dict:
    """Per-SoC values folded into a default plus ``soc_*`` overrides.

    * ``flags`` are additive: ``flags`` holds the flags of every SoC, ``soc_flags[soc]`` extras.
    * ``dtypes``, ``dtypes_excluded``, ``limits``, ``more_limits`` describe the SoCs where the
      API is not unsupported (all SoCs when it is unsupported everywhere); ``soc_<key>[soc]``
      replaces the default for one SoC. Readers ignore them for an unsupported SoC otherwise.
    """
    out: dict = {}
    status = e["status"]
    values = {status[s] for s in SOCS}
    out["status"] = status[SOCS[0]] if len(values) == 1 else {s: status[s] for s in SOCS}
    out["kernel"] = e.get("kernel", "unknown")
    if e.get("aten"):
        out["aten"] = e["aten"]
    out["origin"] = e["origin"]
    out["sources"] = sorted(e["sources"])
    applicable = [s for s in SOCS if status[s] != "unsupported"] or list(SOCS)

    def per_soc(key: str, value_of: Callable[[str], object], empty) -> None:
        vals = {s: value_of(s) for s in applicable}
        freq: dict[str, int] = {}
        for s in applicable:
            k = json.dumps(vals[s], sort_keys=True)
            freq[k] = freq.get(k, 0) + 1
        common = json.loads(sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[0][0])
        if common != empty:
            out[key] = common
        overrides = {s: vals[s] for s in applicable if vals[s] != common}
        if overrides:
            out["soc_" + key] = overrides

    flags = e["flags"]
    common_flags = set.intersection(*(flags[s] for s in SOCS))
    if common_flags:
        out["flags"] = sorted(common_flags)
    extra = {s: sorted(flags[s] - common_flags) for s in SOCS if flags[s] - common_flags}
    if extra:
        out["soc_flags"] = extra
    per_soc("dtypes", lambda s: list(e.get("dtypes", {}).get(s, [])), [])
    per_soc("dtypes_excluded", lambda s: list(e.get("dtypes_excluded", {}).get(s, [])), [])
    per_soc("limits", lambda s: list(e.get("limits", {}).get(s, [])), [])
    per_soc("more_limits", lambda s: int(e.get("more_limits", {}).get(s, 0)), 0)
    if e.get("bf16_undocumented"):
        out["bf16_undocumented"] = list(e["bf16_undocumented"])
    if e.get("ignored_dtypes"):
        out["ignored_dtypes"] = list(e["ignored_dtypes"])
    if e.get("npu_name"):
        out["npu_name"] = e["npu_name"]
    if e.get("signature"):
        out["signature"] = e["signature"]
    return out


def _status_of(entry: dict, soc: str) -> str:
    status = entry["status"]
    return status if isinstance(status, str) else status[soc]


def counts_of(entries: dict, aten: AtenInfo) -> dict:
    by_soc = {}
    for soc in SOCS:
        c = {s: 0 for s in STATUSES}
        for e in entries.values():
            c[_status_of(e, soc)] += 1
        by_soc[soc] = c
    aten_counts = {k: 0 for k in KERNELS if k not in ("none", "unknown")}
    for cls in aten.overloads.values():
        aten_counts[cls] += 1
    origins: dict[str, int] = {}
    for e in entries.values():
        origins[e["origin"]] = origins.get(e["origin"], 0) + 1
    return {
        "entries": len(entries),
        "by_origin": dict(sorted(origins.items())),
        "status_by_soc": by_soc,
        "aten_overloads": len(aten.overloads),
        "aten_by_kernel": aten_counts,
    }


def table_document(inp: Inputs, aten: AtenInfo, transfer: dict, sources: dict[str, str], entries: dict[str, Entry]) -> dict:
    """The whole table: header (inputs, attribution, rules, vocabularies, counts) and the compact entries."""
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
            f"is byte-identical to 2.13.0's) x Ascend/pytorch native-API docs pytorch_2-13-0 @{short_commit(inp.docs_commit)} "
            f"(per-SoC status, dtypes) x Ascend/op-plugin derivatives.yaml @{short_commit(inp.op_plugin_commit)} (autograd)"
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


def dump_table(table: dict) -> bytes:
    """Sorted keys, ASCII only, one entry per line for the big maps, trailing newline."""
    lines = ["{"]
    keys = sorted(table)
    for i, key in enumerate(keys):
        comma = "," if i < len(keys) - 1 else ""
        value = table[key]
        if key in ("entries", "aten") and isinstance(value, dict):
            lines.append(f"{json.dumps(key)}: {{")
            inner = sorted(value)
            for j, name in enumerate(inner):
                c = "," if j < len(inner) - 1 else ""
                lines.append(
                    f"{json.dumps(name)}: "
                    f"{json.dumps(value[name], sort_keys=True, ensure_ascii=True, separators=(',', ':'))}{c}"
                )
            lines.append("}" + comma)
        else:
            text = json.dumps(value, sort_keys=True, ensure_ascii=True, indent=1)
            lines.append(f"{json.dumps(key)}: {text}{comma}")
    lines.append("}")
    return ("\n".join(lines) + "\n").encode("ascii")


