"""Synthetic pretraining data: packed "documents" that follow a fixed token-transition rule.

Deterministic per step (a seeded torch.Generator), so every rank and every rerun sees the same
batches. Real runs would stream tokenized shards instead; the packing logic is the same.
"""

import torch

EOS = 0


def _next_token(tok, vocab_size):
    # A fixed permutation of 1..V-1: learnable as a bigram, so the loss drops within a few steps.
    return (tok * 5 + 3) % (vocab_size - 1) + 1


def _packed_row(g, seq_len, vocab_size, min_doc):
    """One row of T+1 tokens made of whole documents (each ends with EOS), the last one cut."""
    toks, pos, doc_lens = [], [], []
    while len(toks) < seq_len + 1:
        doc_len = int(torch.randint(min_doc, max(min_doc + 1, seq_len // 2), (1,), generator=g))
        tok = int(torch.randint(1, vocab_size, (1,), generator=g))
        for i in range(doc_len - 1):
            toks.append(tok)
            pos.append(i)
            tok = _next_token(tok, vocab_size)
        toks.append(EOS)
        pos.append(doc_len - 1)
        doc_lens.append(doc_len)
    # Document lengths as seen by the first T (input) tokens.
    lens, covered = [], 0
    for L in doc_lens:
        take = min(L, seq_len - covered)
        lens.append(take)
        covered += take
        if covered == seq_len:
            break
    return toks[: seq_len + 1], pos[:seq_len], lens


def get_batch(step, batch_size, seq_len, vocab_size, seed=1234, min_doc=4):
    """Returns dict(idx, targets, positions, cu_seqlens), all on CPU.

    idx/targets (B, T) int64; positions (B, T) restart at 0 in each document; cu_seqlens int32
    (n_docs + 1,) over the flattened B*T tokens (FlashAttention varlen convention).
    """
    g = torch.Generator().manual_seed(seed + step)
    rows, positions, lens = [], [], []
    for _ in range(batch_size):
        toks, pos, row_lens = _packed_row(g, seq_len, vocab_size, min_doc)
        rows.append(torch.tensor(toks))
        positions.append(torch.tensor(pos))
        lens += row_lens
    data = torch.stack(rows)
    cu_seqlens = torch.zeros(len(lens) + 1, dtype=torch.int32)
    cu_seqlens[1:] = torch.cumsum(torch.tensor(lens), 0)
    return {
        "idx": data[:, :-1].contiguous(),
        "targets": data[:, 1:].contiguous(),
        "positions": torch.stack(positions),
        "cu_seqlens": cu_seqlens,
    }
