"""Synthetic token data for smoke tests and parity checks (no dataset download needed)."""

import torch


def synthetic_batch(step, dp_rank, dp_size, batch_size, seq_len, vocab, seed=42):
    """Token streams following x[t+1] = (3 x[t] + 1) mod V: learnable, and deterministic per
    (step, data-parallel rank) so every rerun and every TP peer sees the same tokens."""
    g = torch.Generator().manual_seed(seed + step * dp_size + dp_rank)
    tok = torch.randint(0, vocab, (batch_size,), generator=g)
    seq = [tok]
    for _ in range(seq_len):
        tok = (3 * tok + 1) % vocab
        seq.append(tok)
    seq = torch.stack(seq, dim=1)
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
