"""Seeded slips on a program family samples/ lacks: tests/validation/programs/gqa (GQA + RoPE caches
built at init + RMSNorm + a causal-and-padding mask; SGD with parameter groups; gradient
accumulation, loss scaling and clipping in train_step).

The base of every slip is a correct *hand* port: ``migrate fix`` output with RMSNorm fused into
``torch_npu.npu_rms_norm`` and the bool keep-mask re-encoded as an additive ``-inf`` mask (the same
attention pattern). Each slip names the cause the report must give: the module, and the op or
training-step phase with its argument (``op`` substrings, all required)."""

from __future__ import annotations

from dataclasses import dataclass

from mutations import Mutation

HAND_PORT = Mutation(
    "hand_port", "gqa", "model.py",
    (("import torch.nn.functional as F\n", "import torch.nn.functional as F\nimport torch_npu\n"),
     ("        variance = x.pow(2).mean(-1, keepdim=True)\n"
      "        return self.weight * (x * torch.rsqrt(variance + self.eps))\n",
      "        return torch_npu.npu_rms_norm(x, self.weight, epsilon=self.eps)[0]\n"),
     ("        mask = causal[None, None] & pad_mask[:, None, None, :]  # (B, 1, S, S), True = attend\n",
      "        keep = causal[None, None] & pad_mask[:, None, None, :]\n"
      "        mask = torch.zeros(keep.shape, device=idx.device).masked_fill(~keep, float(\"-inf\"))  # additive\n")),
    "S1", "", "correct hand port: fused RMSNorm, additive mask")


@dataclass(frozen=True)
class Slip:
    mutation: Mutation
    op: tuple[str, ...]  # every one must be in the stage's first_divergence


def _slip(name, file, edits, module, what, *op):
    return Slip(Mutation(name, "gqa", file, edits, "S1", module, what), op)


SLIPS = (
    _slip("rope_sign", "model.py", (("return x * cos + rotate_half(x) * sin", "return x * cos - rotate_half(x) * sin"),),
          "blocks.0.attn (Attention)", "element-wise slip in RoPE before attention: x·cos − rotate(x)·sin",
          "first divergent op inside blocks.0.attn: sub (migrated) vs add (original)"),
    _slip("rope_cache", "model.py", (("inv_freq = 1.0 / (base **", "inv_freq = 1.0 / ((base / 10) **"),),
          "rotary (Rotary)", "RoPE cos/sin caches built at init with base 1000 instead of 10000",
          "buffer rotary.cos differs after model build, before the first step"),
    _slip("kv_repeat_order", "model.py",
          (("return x[:, :, None].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)",
            "return x.repeat(1, n_rep, 1, 1)"),),
          "blocks.0.attn (Attention)", "KV heads tiled (0,1,0,1) instead of repeated (0,0,1,1)",
          "repeat (migrated)", "in another order (head layout / KV-head repeat order)"),
    _slip("fused_norm_eps", "model.py", (("epsilon=self.eps)[0]", ")[0]"),),
          "blocks.0.attn_norm (RMSNorm)", "npu_rms_norm without epsilon: its 1e-6 default, not the module's 1e-5",
          "npu_rms_norm (migrated)", "RMSNorm eps: the port uses 1e-06 (npu_rms_norm's default), the original 1e-05 "
          "(RMSNorm.eps); pass epsilon=1e-05"),
    _slip("causal_sees_next", "model.py", ((".tril()", ".tril(1)"),),
          "_root (TinyLlama)", "causal mask that lets each token see the next one (built in the model's forward)",
          "tril (migrated) vs tril (original)", "arguments: tril(1) (migrated) vs tril() (original)",
          "scaled_dot_product_attention (op #", "attention pattern: batch 0 query 0 sees key 1 in the migrated only"),
    _slip("grad_clip", "validate.py", (("ACCUM, GRAD_CLIP = 2, 50.0", "ACCUM, GRAD_CLIP = 2, 1.0"),),
          "training step", "clip_grad_norm_ max_norm 1.0 instead of 50",
          "training step phase clip (clip_grad_norm_) in step 1", "max_norm=1.0 (migrated) vs max_norm=50.0 (original)"),
    _slip("accumulation", "validate.py", (("scaler.scale(loss / ACCUM).backward()", "scaler.scale(loss).backward()"),),
          "training step", "micro-batch loss not divided by the accumulation steps",
          "training step phase accumulate", "in step 0", "x2"),
    _slip("param_groups", "validate.py",
          (('[{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]',
            '[{"params": decay + no_decay, "weight_decay": 0.1}]'),),
          "optimizer", "one parameter group: weight decay on the norm weights too",
          "weight_decay: 0.1 (SGD) vs 0 (SGD) for 5 of 21 parameters (blocks.0.attn_norm.weight"),
    _slip("label_smoothing", "validate.py", (("ignore_index=-100)", "ignore_index=-100, label_smoothing=0.1)"),),
          "loss_fn", "cross_entropy with label_smoothing=0.1",
          "cross_entropy (migrated)", "label_smoothing: 0.1 (given) vs 0 (F.cross_entropy default)"),
)
