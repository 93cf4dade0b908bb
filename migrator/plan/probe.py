"""Read a program's model shape by building it on the meta device, in a child process (torch only there).

Parent: :func:`probe_tree` runs ``python -m migrator.plan.probe TREE [ENTRY]`` and parses its JSON.
Child: loads the validate.py protocol under the CUDA-side reference layers (as validate's original side),
calls ``make_model(dropout=0.0)`` under ``torch.device("meta")`` (no memory, no kernels), then reads the
config object the model keeps (``config`` / ``cfg``) and the structure (embedding, block list, experts).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields, is_dataclass, replace
from typing import TYPE_CHECKING, Any

from .configs import from_dict
from .model import ModelError, ModelShape

if TYPE_CHECKING:  # torch only in the probe child, imported inside its functions
    import torch


def _config_attrs(model: torch.nn.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for holder in (model, *[m for _, m in model.named_modules()][:64]):
        for name in ("config", "cfg", "args"):
            cfg = getattr(holder, name, None)
            if cfg is None:
                continue
            items = ({f.name: getattr(cfg, f.name) for f in fields(cfg)} if is_dataclass(cfg)
                     else cfg.to_dict() if hasattr(cfg, "to_dict") else dict(vars(cfg)) if hasattr(cfg, "__dict__")
                     else {})
            for k, v in items.items():
                if isinstance(v, (int, float, str, bool)) and k not in out:
                    out[k] = v
        if out:
            break
    return out


def _structure(model: torch.nn.Module) -> dict[str, Any]:
    import torch

    found: dict[str, Any] = {}
    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    if embeddings:
        biggest = max(embeddings, key=lambda m: m.num_embeddings)
        found.update(vocab_size=biggest.num_embeddings, hidden_size=biggest.embedding_dim)
    lists = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
    blocks = [(n, m) for n, m in lists if "expert" not in n.rsplit(".", 1)[-1]]
    if blocks:
        found["num_hidden_layers"] = len(max(blocks, key=lambda nm: len(nm[1]))[1])
    experts = [m for n, m in lists if "expert" in n.rsplit(".", 1)[-1]]
    if experts:
        found["num_experts"] = len(experts[0])
        first = experts[0][0]
        linears = [m for m in first.modules() if isinstance(m, torch.nn.Linear)]
        if linears:
            hidden = found.get("hidden_size")
            widths = [d for m in linears for d in (m.in_features, m.out_features) if d != hidden]
            if widths:
                found["moe_intermediate_size"] = max(widths)
        shared = [n for n, _ in model.named_modules() if n.rsplit(".", 1)[-1].startswith("shared_expert")]
        if shared:
            found["n_shared_experts"] = 1
    for m in model.modules():
        for attr in ("n_head", "num_heads", "n_heads", "num_attention_heads", "n_kv_head", "top_k"):
            value = getattr(m, attr, None)
            if isinstance(value, int) and attr not in found:
                found[attr] = value
    found["_params"] = sum(p.numel() for p in model.parameters())
    return found


def child(tree: str, entry: str | None) -> dict[str, Any]:
    from migrator.validation.child import protocol

    protocol.install_layers("original")
    loaded = protocol.load_entry(tree, entry)
    import torch

    with torch.device("meta"):
        model = loaded.make_model(dropout=0.0)
    return {"structure": _structure(model), "config": _config_attrs(model)}


def probe_tree(tree: str, entry: str | None = None, timeout: float = 300) -> ModelShape:
    from migrator.validation.parent.launcher import package_root

    if not entry and not os.path.isfile(os.path.join(tree, "validate.py")):  # validate's --script means a run, not a model
        raise ModelError(f"{tree}: no validate.py (the protocol) at the tree root: give --entry module:object "
                         "or the model's config with --model CONFIG.json")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root(), os.environ.get("PYTHONPATH")])))
    cmd = [sys.executable, "-m", "migrator.plan.probe", os.path.abspath(tree)] + ([entry] if entry else [])
    proc = _run_scoped(cmd, env, tree, timeout)
    if proc is None:
        raise ModelError(f"{tree}: building the model on the meta device took over {timeout:.0f} s")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode or not lines:
        from migrator.ground import process_scope

        memory = process_scope.hit_memory_limit(proc.stderr or "", process_scope.memory_limit())
        if memory:
            raise ModelError(f"{tree}: {memory}")
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise ModelError(f"{tree}: cannot build the model from the validate.py protocol on the meta device: "
                         + (" | ".join(tail) or f"exit {proc.returncode}"))
    doc = json.loads(lines[-1])
    if "error" in doc:
        raise ModelError(f"{tree}: {doc['error']}")
    return shape_from_probe(doc, os.path.basename(os.path.abspath(tree)), f"{tree} (validate.py on the meta device)")


def _run_scoped(cmd: list[str], env: dict[str, str], cwd: str,
                timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run the probe in a process scope (output to files, not pipes: a process the program forks would
    hold a pipe open until the timeout); everything it started is ended. None on timeout."""
    import tempfile

    from migrator.ground import process_scope

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        scope = process_scope.Scope(cmd, env=env, cwd=cwd, stdout=out, stderr=err, memory=process_scope.memory_limit())
        try:
            finished = scope.wait(timeout)
        finally:
            scope.end()
        if not finished:
            return None
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, scope.proc.returncode or 0,
                                           out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace"))


def shape_from_probe(doc: dict[str, Any], name: str, source: str) -> ModelShape:
    merged = {**doc["structure"], **doc["config"]}  # the program's own config wins over structure
    shape = from_dict(merged, name, source)
    actual = doc["structure"].get("_params")
    if actual:  # gated (SwiGLU) or not: whichever count is closer to the real parameter count
        other = replace(shape, gated_mlp=not shape.gated_mlp)
        if abs(other.params()["total"] - actual) < abs(shape.params()["total"] - actual):
            shape = other
    return shape


if __name__ == "__main__":
    try:
        print(json.dumps(child(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)))
    except Exception as exc:  # noqa: BLE001 - the user's program may raise anything; the parent reports it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
