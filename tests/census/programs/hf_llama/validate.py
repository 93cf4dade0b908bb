"""A tiny randomly initialised Llama from transformers (the census test's library-code case)."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM

INPUT_KEYS = ("input_ids",)
VOCAB, SEQ = 128, 16


def make_model(dropout: float = 0.0) -> torch.nn.Module:
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=SEQ,
                         attention_dropout=dropout, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def make_batch(step: int) -> dict:
    g = torch.Generator().manual_seed(step)
    ids = torch.randint(0, VOCAB, (2, SEQ + 1), generator=g)
    return {"input_ids": ids[:, :-1], "labels": ids[:, 1:]}


def loss_fn(out, batch) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(out.logits.float().flatten(0, 1), batch["labels"].flatten())
