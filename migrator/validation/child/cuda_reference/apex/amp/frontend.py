"""Reference for ``apex.amp.initialize`` (apex's deprecated mixed-precision frontend).

Opt levels, as documented by apex:
* O0 - fp32 model, static loss scale 1.0 (the "no amp" baseline);
* O1 - model kept fp32; apex patched torch functions to run in fp16. Here the model's
  ``forward`` runs under ``torch.autocast(<param device type>, dtype=torch.float16)``; torch 2.13
  has fp16 CPU autocast, so the CPU reference really runs fp16 (recorded in
  ``_amp_state.autocast_dtype``). Dynamic loss scale;
* O2 - model cast to fp16 except batch norms, fp32 master weights kept by the optimizer,
  inputs cast to fp16 and outputs to fp32, dynamic loss scale;
* O3 - pure fp16 model (batch norms too unless ``keep_batchnorm_fp32=True``), loss scale 1.0.
Apex's function patching also covered code outside ``forward`` (e.g. the loss); autocast on the
forward is the nearest torch equivalent and the one Ascend's port guide maps apex.amp to.
"""

from __future__ import annotations

import functools

import torch

from ._amp_state import LossScaler, _amp_state

O1_AUTOCAST_DTYPE = torch.float16

_OPT_LEVELS: dict[str, dict[str, object]] = {  # the property values differ in type (dtype, bool, scale)
    "O0": dict(cast_model_type=torch.float32, patch_torch_functions=False, keep_batchnorm_fp32=None,
               master_weights=False, loss_scale=1.0),
    "O1": dict(cast_model_type=None, patch_torch_functions=True, keep_batchnorm_fp32=None,
               master_weights=None, loss_scale="dynamic"),
    "O2": dict(cast_model_type=torch.float16, patch_torch_functions=False, keep_batchnorm_fp32=True,
               master_weights=True, loss_scale="dynamic"),
    "O3": dict(cast_model_type=torch.float16, patch_torch_functions=False, keep_batchnorm_fp32=False,
               master_weights=False, loss_scale=1.0),
}


def _cast(obj, dtype):
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(o, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _cast(v, dtype) for k, v in obj.items()}
    return obj


def _patch_autocast_forward(model, dtype):
    fwd = model.forward

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        p = next(model.parameters(), None)
        device_type = p.device.type if p is not None else "cpu"
        with torch.autocast(device_type, dtype=dtype):
            return fwd(*args, **kwargs)

    model.forward = forward


def _patch_cast_forward(model, in_dtype, out_dtype):
    fwd = model.forward

    @functools.wraps(fwd)
    def forward(*args, **kwargs):
        return _cast(fwd(*_cast(args, in_dtype), **_cast(kwargs, in_dtype)), out_dtype)

    model.forward = forward


def _setup_master_weights(opt):
    """Swap fp16 params in the optimizer for fp32 masters; copy masters back after each step."""
    pairs = []
    for group in opt.param_groups:
        masters = []
        for p in group["params"]:
            if p.dtype in (torch.float16, torch.bfloat16):
                m = p.detach().clone().float().requires_grad_(p.requires_grad)
                pairs.append((p, m))
                masters.append(m)
            else:
                pairs.append((p, p))
                masters.append(p)
        group["params"] = masters
    opt._amp_pairs = pairs


def _patch_step(opt, master_weights):
    if not hasattr(opt, "_amp_pairs"):
        opt._amp_pairs = [(p, p) for g in opt.param_groups for p in g["params"]]
    opt._amp_skip_next_step = False
    step = opt.step

    @functools.wraps(step)
    def patched_step(*args, **kwargs):
        if opt._amp_skip_next_step:
            opt._amp_skip_next_step = False
            return None
        out = step(*args, **kwargs)
        if master_weights:
            with torch.no_grad():
                for model_p, master in opt._amp_pairs:
                    if model_p is not master:
                        model_p.copy_(master)
        return out

    opt.step = patched_step


def initialize(models, optimizers=None, enabled=True, opt_level="O1", cast_model_type=None,
               patch_torch_functions=None, keep_batchnorm_fp32=None, master_weights=None,
               loss_scale=None, cast_model_outputs=None, num_losses=1, verbosity=1,
               min_loss_scale=None, max_loss_scale=2.0**24):
    if not enabled:
        return models if optimizers is None else (models, optimizers)
    if opt_level not in _OPT_LEVELS:
        raise RuntimeError(f"Unexpected optimization level {opt_level}. Options are 'O0', 'O1', 'O2', 'O3'.")
    props = dict(_OPT_LEVELS[opt_level])
    for key, val in dict(cast_model_type=cast_model_type, patch_torch_functions=patch_torch_functions,
                         keep_batchnorm_fp32=keep_batchnorm_fp32, master_weights=master_weights,
                         loss_scale=loss_scale).items():
        if val is not None:
            props[key] = {"True": True, "False": False}.get(val, val) if isinstance(val, str) and key != "loss_scale" else val
    _amp_state.reset()
    _amp_state.opt_properties = dict(props, opt_level=opt_level)
    _amp_state.verbosity = verbosity

    model_list = models if isinstance(models, (list, tuple)) else [models]
    opt_list = [] if optimizers is None else (optimizers if isinstance(optimizers, (list, tuple)) else [optimizers])
    for model in model_list:
        cast = props["cast_model_type"]
        if cast is not None and cast != torch.float32:
            model.to(cast)
            if props["keep_batchnorm_fp32"]:
                for mod in model.modules():
                    if isinstance(mod, torch.nn.modules.batchnorm._BatchNorm):
                        mod.float()
            _patch_cast_forward(model, cast, cast_model_outputs or torch.float32)
        if props["patch_torch_functions"]:
            _patch_autocast_forward(model, O1_AUTOCAST_DTYPE)
            _amp_state.autocast_dtype = O1_AUTOCAST_DTYPE
    for opt in opt_list:
        if props["master_weights"]:
            _setup_master_weights(opt)
        _patch_step(opt, bool(props["master_weights"]))
    _amp_state.loss_scalers = [
        LossScaler(props["loss_scale"], min_loss_scale=min_loss_scale, max_loss_scale=max_loss_scale)
        for _ in range(num_losses)
    ]
    _amp_state.initialized = True
    return models if optimizers is None else (models, optimizers)


def state_dict(destination=None):
    destination = {} if destination is None else destination
    for i, s in enumerate(_amp_state.loss_scalers):
        destination[f"loss_scaler{i}"] = {"loss_scale": s.loss_scale(), "unskipped": s._unskipped}
    return destination


def load_state_dict(state_dict):
    for i, s in enumerate(_amp_state.loss_scalers):
        entry = state_dict.get(f"loss_scaler{i}")
        if entry is not None:
            s._loss_scale = entry["loss_scale"]
            s._unskipped = entry["unskipped"]
