"""Seeded migration bugs: text edits applied to the output of ``migrate fix`` on a sample.

Each mutation names the file of the migrated copy, the exact text it replaces (every occurrence;
the text must be there, so a change in the rewriter's output breaks the test loudly instead of
silently testing nothing), the stage that must catch it and the module the report must name.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mutation:
    name: str
    sample: str                       # "gpt" or "moe"
    file: str
    edits: tuple[tuple[str, str], ...]  # (old, new): every occurrence of old is replaced
    stage: str                        # first stage that can see it
    module: str                       # substring of the localised module ("" for a stage-wide warning)
    what: str
    status: str = "fail"              # "warn" where the check is a warning by design (dtype policy)
    check: str = ""                   # substring of the check row that must carry that status
    passes: str = ""                  # substring of a check row that must still pass (a bf16-only bug: fp32 logic)
    op: str = ""                      # substring of first_divergence: the first divergent op and its argument diff
    script: tuple[str, ...] = ()      # script mode: run the unmodified train.py with these arguments

    def apply(self, migrated: Path, dest: Path) -> Path:
        # bytecode another worker may be writing into the shared tree is not part of the migration
        shutil.copytree(migrated, dest, ignore=shutil.ignore_patterns("__pycache__"))
        path = dest / self.file
        text = path.read_text()
        for old, new in self.edits:
            assert old in text, f"{self.name}: {old!r} not found in the migrated {self.file}"
            text = text.replace(old, new)
        path.write_text(text)
        return dest


_SDPA_POLARITY_MASK = (
    "        Sq, Skv = q.shape[1], k.shape[1]\n"
    "        mask = torch.ones(Sq, Skv, dtype=torch.bool, device=q.device).tril(Skv - Sq)  # SDPA: True = keep\n"
    "        sparse_mode = 0\n"
)

_ROPE_BF16_ANGLES = (
    "    def forward(self, positions):\n"
    "        if torch.is_autocast_enabled(positions.device.type):  # angles in the compute dtype (\"fused\" RoPE)\n"
    "            dt = torch.get_autocast_dtype(positions.device.type)\n"
    "            d = self.cos.shape[-1]\n"
    "            inv_freq = 1.0 / (10000.0 ** (torch.arange(0, d, 2, device=positions.device).float() / d))\n"
    "            ang = positions.to(dt).unsqueeze(-1) * inv_freq.to(dt)\n"
    "            emb = torch.cat((ang, ang), dim=-1)\n"
    "            return emb.cos(), emb.sin()\n"
    "        return self.cos[positions], self.sin[positions]\n"
)

MUTATIONS = (
    Mutation("attn_scale", "gpt", "model.py", (("scale=scale, ", ""),), "S1", "blocks.0.attn (Attention)",
             "npu_fusion_attention scale left at its default 1.0 instead of 1/sqrt(head_dim)",
             op="scale: the port uses 1.0 (npu_fusion_attention's default), the original 0.25 (= 1/sqrt(16)); "
                "pass scale=1/math.sqrt(head_dim)"),
    Mutation("mask_polarity", "gpt", "model.py",
             (("        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)\n"
               "        sparse_mode = 3 if causal_align == \"bottom_right\" else 2\n", _SDPA_POLARITY_MASK),),
             "S1", "blocks.0.attn (Attention)",
             "an SDPA-style keep-mask (True = attend) passed as atten_mask (True = masked out)",
             op="mask inverted: the port passes a keep-mask (True = attend) as atten_mask"),
    Mutation("causal_top_left", "gpt", "model.py", (('causal_align="bottom_right"', 'causal_align="top_left"'),),
             "S1", "blocks.0.attn (Attention)",
             "causal mask aligned top-left (sparse_mode 2) on the Sq != Skv memory-slot path; flash-attn is bottom-right",
             op="causal alignment: top-left (sparse_mode 2) vs bottom-right (flash_attn >= 2.1 causal=True)"),
    Mutation("layout_bnsd", "gpt", "model.py", (('q, k, v, q.shape[2], "BSND",', 'q, k, v, q.shape[2], "BNSD",'),),
             "S1", "blocks.0.attn (Attention)", "(B, S, N, D) tensors declared as BNSD"),
    Mutation("keep_prob", "gpt", "model.py", (("keep_prob=1.0 - dropout_p", "keep_prob=0.9"),), "S1",
             "blocks.0.attn (Attention)", "keep_prob hard-coded to 0.9 instead of 1 - dropout_p",
             op="keep_prob: 0.9 (keep_prob) vs 1 (1 - dropout_p)"),
    Mutation("rmsnorm_eps", "gpt", "model.py", (("epsilon=self.eps)[0]", ")[0]"),), "S1",
             "blocks.0.attn_norm (_MigrateRMSNorm)", "npu_rms_norm called without epsilon: its 1e-6 default, not 1e-5",
             op="RMSNorm eps: the port uses 1e-06 (npu_rms_norm's default), the original 1e-05 (FusedRMSNorm.eps); "
                "pass epsilon=1e-05"),
    Mutation("layernorm_eps", "gpt", "model.py", (("nn.LayerNorm(cfg.n_embd, eps=cfg.norm_eps,", "nn.LayerNorm(cfg.n_embd, eps=1e-6,"),),
             "S1", "ln_f (LayerNorm)", "final LayerNorm eps 1e-6 instead of the configured 1e-5",
             op="eps: 1e-06 (given) vs 1e-05 (FusedLayerNorm(eps=...))"),
    Mutation("adam_weight_decay", "gpt", "validate.py", ((", weight_decay=0.0)", ")"),), "S1", "optimizer",
             "FusedAdam's weight_decay default (0) lost: the replacement optimizer's default 1e-2 applies",
             op="weight_decay: 0.01 (AdamW) vs 0 (FusedAdam)"),
    Mutation("adam_betas", "gpt", "validate.py", (("betas=(0.9, 0.95)", "betas=(0.9, 0.999)"),), "S1", "optimizer",
             "FusedAdam's betas (0.9, 0.95) replaced by torch's default (0.9, 0.999): invisible with one constant gradient",
             op="betas: (0.9, 0.999) (AdamW) vs (0.9, 0.95) (FusedAdam)"),
    Mutation("autocast_off", "gpt", "model.py",
             (("    def forward(self, x, cos, sin, cu_seqlens=None, max_seqlen=None):\n"
               "        x = x + self.attn(self.attn_norm(x), cos, sin, cu_seqlens, max_seqlen)\n"
               "        return x + self.mlp(self.mlp_norm(x))\n",
               "    def forward(self, x, cos, sin, cu_seqlens=None, max_seqlen=None):\n"
               "        with torch.autocast(x.device.type, enabled=False):  # 'fixed' a dtype error\n"
               "            x = x + self.attn(self.attn_norm(x), cos, sin, cu_seqlens, max_seqlen)\n"
               "            return x + self.mlp(self.mlp_norm(x))\n"),),
             "S1", "", "autocast switched off inside every block: fp32 compute where the original ran bf16",
             status="warn", check="precision policy"),
    Mutation("rope_bf16_angles", "gpt", "model.py",
             (("    def forward(self, positions):\n        return self.cos[positions], self.sin[positions]\n",
               _ROPE_BF16_ANGLES),),
             "S1", "rotary (Rotary)", "rotary angles computed in bf16 under autocast: exact in fp32, off by up to "
             "0.1 rad in bf16 (a bf16-only bug: only the bf16 ratio can see it)",
             check="bf16 tolerance", passes="fp32 logic"),
    Mutation("no_unscale", "gpt", "validate.py", (("    scaler.unscale_(optimizer)\n", ""),), "S1", "training step",
             "scaler.unscale_ dropped before clip_grad_norm_: the scaled grads are clipped, then unscaled by step",
             check="params after k training steps, fp32",
             op="clip (clip_grad_norm_) runs where the original runs unscale (scaler.unscale_)"),
    Mutation("loss_sum", "gpt", "validate.py",
             (('batch["targets"].flatten())', 'batch["targets"].flatten(), reduction="sum")'),), "S1", "loss_fn",
             "loss reduced with sum instead of mean", op="reduction: sum (given) vs mean (F.cross_entropy default)"),
    Mutation("ddp_no_average", "gpt", "validate.py",
             (("    return DDP(model, process_group=mesh.get_group() if mesh is not None else None)",
               "    ddp = DDP(model, process_group=mesh.get_group() if mesh is not None else None)\n"
               "    import torch.distributed as dist\n\n"
               "    def allreduce_sum(group, bucket):  # a hand-written HCCL hook that forgot the 1/N\n"
               "        work = dist.all_reduce(bucket.buffer(), group=group, async_op=True)\n"
               "        return work.get_future().then(lambda fut: fut.value()[0])\n\n"
               "    ddp.register_comm_hook(ddp.process_group, allreduce_sum)\n"
               "    return ddp"),),
             "S2", "gradient reduction", "DDP gradient summed over ranks without the 1/N average"),
    Mutation("script_ddp_sum", "gpt", "train.py",
             (("from model import GPT, GPT_CONFIGS\n",
               "from model import GPT, GPT_CONFIGS\n\n\n"
               "def _allreduce_sum(state, bucket):  # a hand-written HCCL hook that forgot the 1/N\n"
               "    work = dist.all_reduce(bucket.buffer(), async_op=True)\n"
               "    return work.get_future().then(lambda fut: fut.value()[0])\n"),
              ("        model = DDP(model, device_ids=[local_rank])\n",
               "        model = DDP(model, device_ids=[local_rank])\n"
               "        model.register_comm_hook(None, _allreduce_sum)\n")),
             "S2", "parameter grads scaled by 2", "the unmodified train.py under torchrun: DDP gradients summed over ranks, not averaged",
             check="fp32 logic", script=("--tiny",)),
    Mutation("ep_no_average", "moe", "train.py", (("            p.grad.div_(dp)\n", "            pass\n"),), "S3",
             "moe.experts", "expert-parallel grads not divided by N"),
)
