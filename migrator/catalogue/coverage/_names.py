"""Name and dtype normalisation shared by the coverage loader and ``op_coverage/generate.py``.

Pure functions, standard library only (no torch, no libcst). The generator imports this
module so that the API -> ATen mapping used to build the table is the same one the loader
uses for names that are not in the table.
"""

from __future__ import annotations

import re

__all__ = [
    "DTYPES",
    "KERNEL_RANK",
    "index_by_base",
    "pick_overload",
    "normalize_name",
    "normalize_dtype",
    "aten_candidates",
    "is_non_op_name",
]

#: Canonical dtype spellings used in the table, in display order.
DTYPES = (
    "bf16",
    "fp16",
    "fp32",
    "fp64",
    "fp8",
    "uint8",
    "uint16",
    "int8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex32",
    "complex64",
    "complex128",
)

_DTYPE_ALIASES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "f16": "fp16",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "f32": "fp32",
    "fp64": "fp64",
    "float64": "fp64",
    "double": "fp64",
    "f64": "fp64",
    "fp8": "fp8",
    "float8": "fp8",
    "uint8": "uint8",
    "byte": "uint8",
    "uint16": "uint16",
    "int8": "int8",
    "char": "int8",
    "int16": "int16",
    "short": "int16",
    "int32": "int32",
    "int": "int32",
    "int64": "int64",
    "long": "int64",
    "bool": "bool",
    "complex32": "complex32",
    "chalf": "complex32",
    "complex64": "complex64",
    "cfloat": "complex64",
    "complex128": "complex128",
    "cdouble": "complex128",
}


def normalize_dtype(dtype: object) -> str | None:
    """``torch.float64`` / ``"double"`` / ``"fp64"`` -> ``"fp64"``; unknown -> None."""
    if dtype is None:
        return None
    text = str(dtype).strip().lower()
    for prefix in ("torch.", "dtype."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    if text.startswith("float8"):
        return "fp8"
    return _DTYPE_ALIASES.get(text)


def normalize_name(name: str) -> str:
    """Canonical qualified name used as the table key.

    * surrounding whitespace, backticks and a trailing ``()`` are dropped;
    * markdown escapes are removed (``torch.\\_\\_config\\_\\_`` -> ``torch.__config__``);
    * ``Tensor.x`` -> ``torch.Tensor.x``;
    * ``torch.ops.npu.x`` / ``torch_npu._C._VariableFunctions.x`` -> ``torch_npu.x``;
    * ``aten::x.y`` and ``torch.ops.aten.x.y`` -> ``torch.ops.aten.x.y`` (``.default`` dropped).

    ``F.`` / ``nn.`` aliases are *not* expanded: callers pass fully qualified names.
    """
    text = str(name).strip().strip("`").strip()
    text = text.replace("\\", "")
    if text.endswith("()"):
        text = text[:-2]
    text = re.sub(r"\s+", "", text)
    if text.startswith("Tensor."):
        text = "torch." + text
    if text.startswith("aten::"):
        text = "torch.ops.aten." + text[len("aten::"):]
    if text.startswith("npu::"):
        text = "torch_npu." + text[len("npu::"):].split(".")[0]
    if text.startswith("torch.ops.npu."):
        text = "torch_npu." + text[len("torch.ops.npu."):].split(".")[0]
    if text.startswith("torch_npu._C._VariableFunctions."):
        text = "torch_npu." + text[len("torch_npu._C._VariableFunctions."):]
    if text.startswith("torch.ops.aten.") and text.endswith(".default"):
        text = text[: -len(".default")]
    return text


# Namespaces whose members are runtime / framework APIs rather than tensor operators:
# the ATen-kernel signal does not apply to them (kernel "none").
_NON_OP_PREFIXES = (
    "torch.cuda.",
    "torch.npu.",
    "torch_npu.npu.",
    "torch_npu.optim.",
    "torch_npu.profiler.",
    "torch_npu.distributed.",
    "torch.backends.",
    "torch.distributed.",
    "torch.optim.",
    "torch.utils.",
    "torch.profiler.",
    "torch.autograd.",
    "torch.amp.",
    "torch.cpu.",
    "torch.accelerator.",
    "torch.compiler.",
    "torch.fx.",
    "torch.export.",
    "torch.onnx.",
    "torch.package.",
    "torch.jit.",
    "torch.hub.",
    "torch.monitor.",
    "torch.futures.",
    "torch.multiprocessing.",
    "torch.testing.",
    "torch.overrides.",
    "torch.library.",
    "torch.__config__.",
    "torch.random.",
    "torch.nn.Module",
    "torch.nn.ModuleList",
    "torch.nn.ModuleDict",
    "torch.nn.ParameterList",
    "torch.nn.ParameterDict",
    "torch.nn.Sequential",
    "torch.nn.parameter.",
    "torch.nn.parallel.",
    "torch.nn.DataParallel",
    "torch.nn.utils.",
    "torch.nn.attention.",
    "torch.nn.init.",
    "torch.nn.modules.",
    "torch.Storage",
    "torch.TypedStorage",
    "torch.UntypedStorage",
    "torch.storage.",
)

_NON_OP_EXACT = frozenset(
    {
        "torch.cuda",
        "torch.npu",
        "torch.nn.Module",
        "torch.get_default_dtype",
        "torch.set_default_dtype",
        "torch.set_default_device",
        "torch.get_default_device",
        "torch.manual_seed",
        "torch.seed",
        "torch.initial_seed",
        "torch.get_rng_state",
        "torch.set_rng_state",
        "torch.use_deterministic_algorithms",
        "torch.are_deterministic_algorithms_enabled",
        "torch.is_tensor",
        "torch.is_storage",
        "torch.compile",
        "torch.save",
        "torch.load",
        "torch.no_grad",
        "torch.enable_grad",
        "torch.inference_mode",
        "torch.set_grad_enabled",
        "torch.is_grad_enabled",
        "torch.autocast",
    }
)


def is_non_op_name(name: str) -> bool:
    """True for runtime/framework APIs to which the ATen kernel signal does not apply."""
    if name in _NON_OP_EXACT:
        return True
    return name.startswith(_NON_OP_PREFIXES)


# torch.nn.functional names whose ATen op has a different name.
_FUNCTIONAL_ALIASES = {
    "cross_entropy": "cross_entropy_loss",
    "multilabel_soft_margin_loss": "multilabel_margin_loss",
    "nll_loss": "nll_loss_nd",
    "dropout1d": "dropout",
    "dropout2d": "feature_dropout",
    "dropout3d": "feature_dropout",
    "alpha_dropout": "alpha_dropout",
    "interpolate": "",
    "upsample": "",
    "upsample_nearest": "upsample_nearest2d",
    "upsample_bilinear": "upsample_bilinear2d",
    "pad": "pad",
    "softsign": "",
    "tanhshrink": "",
    "normalize": "",
    "local_response_norm": "",
    "logsigmoid": "log_sigmoid",
    "hardsigmoid": "hardsigmoid",
    "hardswish": "hardswish",
    "relu6": "relu6",
    "elu_": "elu_",
    "softmin": "softmax",
    "gumbel_softmax": "",
    "max_pool1d_with_indices": "max_pool1d_with_indices",
    "max_pool2d_with_indices": "max_pool2d_with_indices",
    "max_pool3d_with_indices": "max_pool3d_with_indices",
    "adaptive_max_pool1d_with_indices": "adaptive_max_pool1d",
    "adaptive_max_pool2d_with_indices": "adaptive_max_pool2d",
    "adaptive_max_pool3d_with_indices": "adaptive_max_pool3d",
    "mish": "mish",
    "silu": "silu",
    "gelu": "gelu",
    "rms_norm": "rms_norm",
    "multi_head_attention_forward": "",
}

# torch.nn module classes -> the ATen op their forward is built on.
_MODULE_ALIASES = {
    "Linear": "linear",
    "Bilinear": "bilinear",
    "LazyLinear": "linear",
    "Identity": "",
    "Conv1d": "conv1d",
    "Conv2d": "conv2d",
    "Conv3d": "conv3d",
    "ConvTranspose1d": "conv_transpose1d",
    "ConvTranspose2d": "conv_transpose2d",
    "ConvTranspose3d": "conv_transpose3d",
    "LazyConv1d": "conv1d",
    "LazyConv2d": "conv2d",
    "LazyConv3d": "conv3d",
    "Unfold": "im2col",
    "Fold": "col2im",
    "MaxPool1d": "max_pool1d",
    "MaxPool2d": "max_pool2d",
    "MaxPool3d": "max_pool3d",
    "MaxUnpool2d": "max_unpool2d",
    "MaxUnpool3d": "max_unpool3d",
    "AvgPool1d": "avg_pool1d",
    "AvgPool2d": "avg_pool2d",
    "AvgPool3d": "avg_pool3d",
    "LPPool1d": "",
    "LPPool2d": "",
    "AdaptiveMaxPool1d": "adaptive_max_pool1d",
    "AdaptiveMaxPool2d": "adaptive_max_pool2d",
    "AdaptiveMaxPool3d": "adaptive_max_pool3d",
    "AdaptiveAvgPool1d": "adaptive_avg_pool1d",
    "AdaptiveAvgPool2d": "adaptive_avg_pool2d",
    "AdaptiveAvgPool3d": "adaptive_avg_pool3d",
    "FractionalMaxPool2d": "fractional_max_pool2d",
    "FractionalMaxPool3d": "fractional_max_pool3d",
    "ReflectionPad1d": "reflection_pad1d",
    "ReflectionPad2d": "reflection_pad2d",
    "ReflectionPad3d": "reflection_pad3d",
    "ReplicationPad1d": "replication_pad1d",
    "ReplicationPad2d": "replication_pad2d",
    "ReplicationPad3d": "replication_pad3d",
    "ZeroPad1d": "constant_pad_nd",
    "ZeroPad2d": "constant_pad_nd",
    "ZeroPad3d": "constant_pad_nd",
    "ConstantPad1d": "constant_pad_nd",
    "ConstantPad2d": "constant_pad_nd",
    "ConstantPad3d": "constant_pad_nd",
    "CircularPad1d": "",
    "CircularPad2d": "",
    "CircularPad3d": "",
    "ELU": "elu",
    "Hardshrink": "hardshrink",
    "Hardsigmoid": "hardsigmoid",
    "Hardtanh": "hardtanh",
    "Hardswish": "hardswish",
    "LeakyReLU": "leaky_relu",
    "LogSigmoid": "log_sigmoid",
    "MultiheadAttention": "",
    "PReLU": "prelu",
    "ReLU": "relu",
    "ReLU6": "relu6",
    "RReLU": "rrelu",
    "SELU": "selu",
    "CELU": "celu",
    "GELU": "gelu",
    "Sigmoid": "sigmoid",
    "SiLU": "silu",
    "Mish": "mish",
    "Softplus": "softplus",
    "Softshrink": "softshrink",
    "Softsign": "",
    "Tanh": "tanh",
    "Tanhshrink": "",
    "Threshold": "threshold",
    "GLU": "glu",
    "Softmin": "softmax",
    "Softmax": "softmax",
    "Softmax2d": "softmax",
    "LogSoftmax": "log_softmax",
    "AdaptiveLogSoftmaxWithLoss": "",
    "BatchNorm1d": "batch_norm",
    "BatchNorm2d": "batch_norm",
    "BatchNorm3d": "batch_norm",
    "LazyBatchNorm1d": "batch_norm",
    "LazyBatchNorm2d": "batch_norm",
    "LazyBatchNorm3d": "batch_norm",
    "GroupNorm": "group_norm",
    "SyncBatchNorm": "batch_norm",
    "InstanceNorm1d": "instance_norm",
    "InstanceNorm2d": "instance_norm",
    "InstanceNorm3d": "instance_norm",
    "LazyInstanceNorm1d": "instance_norm",
    "LazyInstanceNorm2d": "instance_norm",
    "LazyInstanceNorm3d": "instance_norm",
    "LayerNorm": "layer_norm",
    "LocalResponseNorm": "",
    "RMSNorm": "rms_norm",
    "RNN": "rnn_tanh",
    "LSTM": "lstm",
    "GRU": "gru",
    "RNNCell": "rnn_tanh_cell",
    "LSTMCell": "lstm_cell",
    "GRUCell": "gru_cell",
    "Dropout": "dropout",
    "Dropout1d": "dropout",
    "Dropout2d": "feature_dropout",
    "Dropout3d": "feature_dropout",
    "AlphaDropout": "alpha_dropout",
    "FeatureAlphaDropout": "feature_alpha_dropout",
    "Embedding": "embedding",
    "EmbeddingBag": "embedding_bag",
    "CosineSimilarity": "cosine_similarity",
    "PairwiseDistance": "pairwise_distance",
    "L1Loss": "l1_loss",
    "MSELoss": "mse_loss",
    "CrossEntropyLoss": "cross_entropy_loss",
    "CTCLoss": "ctc_loss",
    "NLLLoss": "nll_loss_nd",
    "PoissonNLLLoss": "poisson_nll_loss",
    "GaussianNLLLoss": "",
    "KLDivLoss": "kl_div",
    "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
    "MarginRankingLoss": "margin_ranking_loss",
    "HingeEmbeddingLoss": "hinge_embedding_loss",
    "MultiLabelMarginLoss": "multilabel_margin_loss",
    "HuberLoss": "huber_loss",
    "SmoothL1Loss": "smooth_l1_loss",
    "SoftMarginLoss": "soft_margin_loss",
    "MultiLabelSoftMarginLoss": "",
    "CosineEmbeddingLoss": "cosine_embedding_loss",
    "MultiMarginLoss": "multi_margin_loss",
    "TripletMarginLoss": "triplet_margin_loss",
    "TripletMarginWithDistanceLoss": "",
    "PixelShuffle": "pixel_shuffle",
    "PixelUnshuffle": "pixel_unshuffle",
    "Upsample": "",
    "UpsamplingNearest2d": "upsample_nearest2d",
    "UpsamplingBilinear2d": "upsample_bilinear2d",
    "ChannelShuffle": "channel_shuffle",
    "Flatten": "flatten",
    "Unflatten": "unflatten",
    "Transformer": "",
    "TransformerEncoder": "",
    "TransformerDecoder": "",
    "TransformerEncoderLayer": "",
    "TransformerDecoderLayer": "",
}

_NAMESPACE_PREFIXES = (
    ("torch.special.", "special_"),
    ("torch.linalg.", "linalg_"),
    ("torch.fft.", "fft_"),
    ("torch.nested.", "nested_"),
)


def aten_candidates(name: str) -> tuple[str, ...]:
    """ATen op names (``base`` or ``base.overload``) a public API most likely lowers to.

    Ascend publishes no API -> ATen mapping, so this is a documented heuristic: same name
    for ``torch.X`` / ``torch.Tensor.X`` / ``torch.nn.functional.X``, the ``special_`` /
    ``linalg_`` / ``fft_`` prefixes for those namespaces, and a curated table for
    ``torch.nn`` module classes and a few renamed functionals. Returns () when the name is
    a runtime API or has no plausible ATen counterpart.
    """
    name = normalize_name(name)
    if name.startswith("torch.ops.aten."):
        rest = name[len("torch.ops.aten."):]
        return (rest,) if rest else ()
    if is_non_op_name(name):
        return ()
    if name.startswith("torch.nn.functional."):
        return _functional_candidates(name[len("torch.nn.functional."):])
    for prefix, aten_prefix in _NAMESPACE_PREFIXES:
        if name.startswith(prefix):
            leaf = name[len(prefix):]
            if "." in leaf:
                return ()
            return (aten_prefix + leaf,)
    if name.startswith("torch.nn."):
        leaf = name[len("torch.nn."):]
        if "." in leaf:
            return ()
        alias = _MODULE_ALIASES.get(leaf)
        return (alias,) if alias else ()
    for prefix in ("torch.Tensor.", "torch."):
        if name.startswith(prefix):
            leaf = name[len(prefix):]
            return (leaf,) if leaf and "." not in leaf else ()
    return ()


def _functional_candidates(leaf: str) -> tuple[str, ...]:
    """``torch.nn.functional.<leaf>``: its renamed ATen op (a curated alias) and its own name."""
    if "." in leaf:
        return ()
    alias = _FUNCTIONAL_ALIASES.get(leaf)
    if alias == "":
        return ()
    return tuple(dict.fromkeys(x for x in (alias, leaf) if x))


#: ATen-layer classes from best to worst (used to pick the representative overload).
KERNEL_RANK = ("npu_kernel", "npu_kernel_via_delegate", "decomposes", "composite_explicit", "cpu_fallback")


def index_by_base(kernels: dict) -> dict:
    """``{"add.Tensor": k, ...}`` -> ``{"add": {"add.Tensor": k, ...}, ...}``."""
    out: dict = {}
    for op, kernel in kernels.items():
        out.setdefault(op.split(".", 1)[0], {})[op] = kernel
    return out


def pick_overload(base: str, overloads: dict) -> tuple | None:
    """(kernel, op) representing an ATen base name.

    The default overload (``base`` itself) when it exists; otherwise the best-ranked
    non-``out`` overload (ties broken by name); otherwise the best ``out`` overload.
    """
    if not overloads:
        return None
    if base in overloads:
        return overloads[base], base

    def rank(op: str) -> tuple:
        kernel = overloads[op]
        return (KERNEL_RANK.index(kernel) if kernel in KERNEL_RANK else len(KERNEL_RANK), op)

    functional = [op for op in overloads if not op.endswith(".out") and not op.endswith("_out")]
    op = min(functional or list(overloads), key=rank)
    return overloads[op], op
