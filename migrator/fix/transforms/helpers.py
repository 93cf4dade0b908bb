"""Source of the small helper functions a fix emits once per file (never a new file).

Each helper is named `_migrate_<what>`, documents what it replaces, and carries the semantics that
would otherwise be repeated at every call site (scale defaults, mask polarity, causal alignment).
"""

DEVICE_HELPER = '''def _migrate_device(index=None):
    """The accelerator this process runs on (CUDA, Ascend NPU, ...) or the CPU. Added by ascend-migrate."""
    accelerator = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else None
    device_type = accelerator.type if accelerator is not None else "cpu"
    if isinstance(index, (str, torch.device)):
        index = torch.device(index).index  # "cuda:1" -> 1: the type is this host's accelerator
    if index is None or device_type == "cpu":
        return torch.device(device_type)
    return torch.device(device_type, index)
'''

BACKEND_HELPER = '''def _migrate_backend():
    """The collective backend for this process's device (nccl, hccl, gloo). Added by ascend-migrate."""
    return torch.distributed.get_default_backend_for_device(_migrate_device())
'''

FLASH_ATTN_NPU = '''def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
    """flash_attn_func on Ascend through torch_npu.npu_fusion_attention. Added by ascend-migrate.

    (batch, seqlen, heads, head_dim) is layout "BSND"; GQA/MQA work through head_num = query heads.
    npu_fusion_attention's scale defaults to 1.0, so flash-attn's 1/sqrt(head_dim) is passed explicitly.
    Its mask marks True = masked out; causal masking uses the 2048x2048 compressed upper-triangular
    mask with sparse_mode 3 (bottom-right aligned, as flash-attn >= 2.1) or 2 (top-left).
    """
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    mask = None
    sparse_mode = 0
    if causal:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
        sparse_mode = 3 if causal_align == "bottom_right" else 2
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[2], "BSND",
        atten_mask=mask, scale=scale, keep_prob=1.0 - dropout_p, sparse_mode=sparse_mode,
    )[0]
'''

FLASH_ATTN_PORTABLE = '''def _migrate_flash_attn(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, causal_align="bottom_right"):
    """flash_attn_func through scaled_dot_product_attention (CUDA, Ascend, CPU). Added by ascend-migrate.

    (batch, seqlen, heads, head_dim) is transposed to SDPA's (batch, heads, seqlen, head_dim).
    SDPA's is_causal is top-left aligned while flash-attn >= 2.1 is bottom-right aligned, so it is
    used only when the query and key lengths are equal; otherwise an explicit aligned mask is built.
    """
    from torch.nn.attention.bias import causal_lower_right, causal_upper_left

    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    mask, is_causal = None, False
    if causal:
        if q.shape[2] == k.shape[2]:
            is_causal = True
        elif causal_align == "bottom_right":
            mask = causal_lower_right(q.shape[2], k.shape[2])
        else:
            mask = causal_upper_left(q.shape[2], k.shape[2])
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=is_causal, scale=softmax_scale,
        enable_gqa=q.shape[1] != k.shape[1],
    )
    return out.transpose(1, 2)
'''

FLASH_ATTN_VARLEN_NPU = '''def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                               dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn_varlen_func on Ascend through npu_fusion_attention, layout "TND". Added by ascend-migrate.

    actual_seq_qlen/kvlen are host int lists of cumulative lengths WITHOUT flash-attn's leading 0
    (a device-to-host copy); max_seqlen_* are not needed. Scale and causal mask as in _migrate_flash_attn.
    """
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    mask = None
    if causal:
        mask = torch.triu(torch.ones(2048, 2048, dtype=torch.bool, device=q.device), diagonal=1)
    return torch_npu.npu_fusion_attention(
        q, k, v, q.shape[1], "TND",
        atten_mask=mask, scale=scale, keep_prob=1.0 - dropout_p,
        actual_seq_qlen=cu_seqlens_q[1:].tolist(), actual_seq_kvlen=cu_seqlens_k[1:].tolist(),
        sparse_mode=3 if causal else 0,
    )[0]
'''

FLASH_ATTN_VARLEN_PORTABLE = '''def _migrate_flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q=None, max_seqlen_k=None,
                               dropout_p=0.0, softmax_scale=None, causal=False):
    """flash_attn_varlen_func as one SDPA call per sequence (CUDA, Ascend, CPU). Added by ascend-migrate.

    Sequences are cut at the cumulative lengths; causal masks are bottom-right aligned per sequence.
    """
    from torch.nn.attention.bias import causal_lower_right

    outs = []
    bounds_q, bounds_k = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    for i in range(len(bounds_q) - 1):
        qi = q[bounds_q[i]:bounds_q[i + 1]].transpose(0, 1)
        ki = k[bounds_k[i]:bounds_k[i + 1]].transpose(0, 1)
        vi = v[bounds_k[i]:bounds_k[i + 1]].transpose(0, 1)
        mask = causal_lower_right(qi.shape[1], ki.shape[1]) if causal and qi.shape[1] != ki.shape[1] else None
        out = torch.nn.functional.scaled_dot_product_attention(
            qi, ki, vi, attn_mask=mask, dropout_p=dropout_p, scale=softmax_scale,
            is_causal=causal and mask is None, enable_gqa=qi.shape[0] != ki.shape[0],
        )
        outs.append(out.transpose(0, 1))
    return torch.cat(outs, dim=0)
'''

RMS_NORM_NPU = '''class _MigrateRMSNorm(torch.nn.Module):
    """apex FusedRMSNorm on Ascend through torch_npu.npu_rms_norm. Added by ascend-migrate.

    Same parameter name (`weight`) and defaults as apex (eps=1e-5, elementwise_affine=True);
    npu_rms_norm needs a weight, so a non-affine norm uses a constant buffer of ones.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = torch.nn.Parameter(torch.ones(self.normalized_shape))
        else:
            self.register_buffer("weight", torch.ones(self.normalized_shape), persistent=False)

    def forward(self, x):
        if torch.is_autocast_enabled(x.device.type):  # like apex: normalise in the autocast dtype
            x = x.to(torch.get_autocast_dtype(x.device.type))
        return torch_npu.npu_rms_norm(x, self.weight.to(x.dtype), epsilon=self.eps)[0]
'''

APEX_AMP = '''def _migrate_amp_initialize(models, optimizers=None, opt_level="O1", loss_scale=None, **ignored):
    """apex.amp.initialize with native mixed precision. Added by ascend-migrate.

    O0 keeps fp32. O1 (Apex's per-op casting) = float16 autocast around each model's forward plus
    dynamic loss scaling starting at 2**16 as in Apex. As Apex does, each optimizer's step is
    wrapped so that a step whose gradients overflowed is skipped. O2/O3 keep fp16 master weights or
    a pure fp16 model, which native AMP does not reproduce: port those by hand.
    """
    if opt_level not in ("O0", "O1"):
        raise NotImplementedError(f"apex opt_level {opt_level!r} has no exact native equivalent; use O1 or port by hand")
    if loss_scale not in (None, "dynamic"):
        raise NotImplementedError("a static apex loss_scale is not ported automatically; use dynamic scaling")
    enabled = opt_level == "O1"
    scaler = __SCALER__
    for model in models if isinstance(models, (list, tuple)) else [models]:
        if enabled:
            model.forward = torch.autocast(__DEVICE_TYPE__, dtype=torch.float16)(model.forward)
    for optimizer in optimizers if isinstance(optimizers, (list, tuple)) else [optimizers] if optimizers is not None else []:
        optimizer._migrate_scaler = scaler
        optimizer._migrate_skip_step = False
        optimizer.step = _migrate_skipping_step(optimizer, optimizer.step)
    return (models, optimizers) if optimizers is not None else models


def _migrate_skipping_step(optimizer, step):
    def wrapped(*args, **kwargs):
        if optimizer._migrate_skip_step:  # gradients overflowed: skip, as Apex does
            optimizer._migrate_skip_step = False
            return None
        return step(*args, **kwargs)

    return wrapped


@contextlib.contextmanager
def _migrate_amp_scale_loss(loss, optimizer):
    """apex.amp.scale_loss: yields the scaled loss; on exit unscales the gradients and decides whether
    the next optimizer step runs (overflow: skipped, scale reduced). Added by ascend-migrate."""
    scaler = optimizer._migrate_scaler
    yield scaler.scale(loss)
    if scaler.is_enabled():
        scaler.unscale_(optimizer)
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        optimizer._migrate_skip_step = not all(bool(torch.isfinite(g).all()) for g in grads)
        scaler.update()
'''

DEVICE_MODULE_HELPER = '''def _migrate_device_module():
    """The runtime module of this process's accelerator (torch.cuda, torch.npu, ...), or a CPU
    stand-in: no-op synchronisation, seeding and memory statistics, wall-clock events. Added by ascend-migrate."""
    if torch.accelerator.is_available():
        return torch.get_device_module(torch.accelerator.current_accelerator())
    return _MIGRATE_CPU_RUNTIME


class _MigrateCpuRuntime:
    """torch.cuda-style runtime calls on a CPU-only host, where everything already runs in order."""

    class Event:
        def __init__(self, enable_timing=False, blocking=False, interprocess=False):
            self.time = None

        def record(self, stream=None):
            import time

            self.time = time.perf_counter()

        def synchronize(self):
            pass

        def query(self):
            return True

        def wait(self, stream=None):
            pass

        def elapsed_time(self, end):
            return (end.time - self.time) * 1000.0

    ANSWERS = {
        "is_available": False, "device_count": 0, "is_initialized": True, "get_device_name": "cpu",
        "is_bf16_supported": True, "mem_get_info": (0, 0), "memory_allocated": 0, "max_memory_allocated": 0,
        "memory_reserved": 0, "max_memory_reserved": 0, "memory_cached": 0, "max_memory_cached": 0,
        "memory_stats": {}, "memory_summary": "", "current_device": 0,
    }
    NO_OPS = {
        "synchronize", "set_device", "manual_seed", "manual_seed_all", "seed", "seed_all", "empty_cache", "init",
        "reset_peak_memory_stats", "reset_max_memory_allocated", "reset_max_memory_cached", "ipc_collect",
        "set_rng_state_all", "set_per_process_memory_fraction",
    }

    def Stream(self, device=None, priority=0, **kwargs):
        return torch.cpu.Stream(priority)

    def stream(self, stream):
        return torch.cpu.stream(stream)

    def current_stream(self, device=None):
        return torch.cpu.current_stream()

    def device(self, index):
        import contextlib

        return contextlib.nullcontext()

    def get_rng_state(self, device=None):
        return torch.get_rng_state()

    def set_rng_state(self, state, device=None):
        torch.set_rng_state(state)

    def get_rng_state_all(self):
        return [torch.get_rng_state()]

    def __getattr__(self, name):
        if name in self.ANSWERS:
            value = self.ANSWERS[name]
            return lambda *args, **kwargs: value
        if name in self.NO_OPS:
            return lambda *args, **kwargs: None
        if name.endswith(("Tensor", "Storage")) and hasattr(torch, name):
            return getattr(torch, name)  # torch.cuda.FloatTensor -> the CPU tensor type
        raise AttributeError(f"torch.cuda.{name} has no CPU stand-in (added by ascend-migrate)")


_MIGRATE_CPU_RUNTIME = _MigrateCpuRuntime()
'''
