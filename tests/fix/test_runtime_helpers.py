"""The runtime helpers `migrate fix` inserts are real modules (migrator/fix/runtime_helpers/) that run
here, on a CPU-only host: the device helpers, the apex.amp replacement and RMSNorm. (FlashAttention:
test_flash_attn_numerics.py.) What a file gets is their definitions, verbatim."""

from __future__ import annotations

import importlib
import inspect
import sys

import pytest

from migrator.fix import helper_source, runtime_module
from migrator.fix.transforms import helpers
from tests.fix.runtime import helper_module

torch = pytest.importorskip("torch")

from migrator.validation.child import npu_emulation  # noqa: E402

# what the transforms insert -> (module, the objects it is the source of)
INSERTED = {
    "DEVICE_HELPER": ("device", ["_migrate_device"]),
    "BACKEND_HELPER": ("device", ["_migrate_backend"]),
    "DEVICE_MODULE_HELPER": ("device", ["_migrate_device_module", "_MigrateCpuRuntime"]),
    "FLASH_ATTN_NPU": ("flash_attn_npu", ["_migrate_flash_attn"]),
    "FLASH_ATTN_VARLEN_NPU": ("flash_attn_npu", ["_migrate_flash_attn_varlen"]),
    "FLASH_ATTN_PORTABLE": ("flash_attn_portable", ["_migrate_flash_attn"]),
    "FLASH_ATTN_VARLEN_PORTABLE": ("flash_attn_portable", ["_migrate_flash_attn_varlen"]),
    "RMS_NORM_NPU": ("rms_norm_npu", ["_MigrateRMSNorm"]),
}


@pytest.fixture
def emulation():
    npu_emulation.install()
    yield
    npu_emulation.uninstall()


@pytest.fixture(autouse=True)
def _forget_imported_helpers():
    yield  # an npu helper imported under the emulation holds its torch_npu: never reused after
    for name in [n for n in sys.modules if n.startswith(helper_source.PACKAGE + ".")]:
        del sys.modules[name]


def _real(module: str):
    """The module imported as Python imports it (under the emulation for the npu ones)."""
    return importlib.import_module(f"{helper_source.PACKAGE}.{module}")


@pytest.mark.parametrize("constant", sorted(INSERTED))
def test_inserted_text_is_the_source_of_the_real_objects(emulation, constant):
    module, names = INSERTED[constant]
    real = _real(module)
    text = getattr(helpers, constant)
    for name in names:
        assert inspect.getsource(getattr(real, name)).rstrip("\n") in text
    assert text.endswith("\n") and "Added by ascend-migrate" in text


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_apex_amp_text_is_the_shared_module_plus_the_targets_pair(emulation, target):
    text = helpers.apex_amp_helpers(target)
    shared, variant = _real("apex_amp"), _real(f"apex_amp_{target}")
    for obj in (shared._migrate_amp_initialize, shared._migrate_skipping_step, variant._migrate_amp_scaler,
                variant._migrate_amp_device_type):
        assert inspect.getsource(obj).rstrip("\n") in text
    assert "@contextlib.contextmanager\ndef _migrate_amp_scale_loss" in text  # decorators come along


def test_definitions_refuses_a_name_the_module_does_not_define():
    with pytest.raises(KeyError, match="no _migrate_nothing"):
        helper_source.definitions("device", "_migrate_device", "_migrate_nothing")


def test_tree_module_is_the_device_module_file():
    assert runtime_module.text() == helper_source.module_text("device")
    assert set(runtime_module.PROVIDES) <= set(helper_module("device"))


# -- the device helpers on a CPU-only host (no accelerator here) --------------------------------------
def test_device_helpers_fall_back_to_the_cpu():
    ns = helper_module("device")
    assert not torch.accelerator.is_available()
    assert ns["_migrate_device"]() == torch.device("cpu")
    assert ns["_migrate_device"](1) == torch.device("cpu")  # an index means nothing on the CPU
    assert ns["_migrate_device"]("cuda:1") == torch.device("cpu")
    assert ns["_migrate_backend"]() == "gloo"


def test_cpu_runtime_stands_in_for_torch_cuda():
    ns = helper_module("device")
    rt = ns["_migrate_device_module"]()
    assert rt is ns["_MIGRATE_CPU_RUNTIME"]
    assert rt.is_available() is False and rt.device_count() == 0 and rt.memory_allocated() == 0
    assert rt.synchronize() is None and rt.manual_seed(3) is None and rt.empty_cache() is None
    start, end = rt.Event(enable_timing=True), rt.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    assert end.elapsed_time(start) <= 0.0 <= start.elapsed_time(end)  # milliseconds between the records
    with rt.device(0):
        pass
    state = rt.get_rng_state()
    first = torch.rand(2)
    rt.set_rng_state(state)
    assert torch.equal(torch.rand(2), first)
    assert rt.FloatTensor is torch.FloatTensor
    with pytest.raises(AttributeError, match=r"_migrate_device_module\(\)\.nvtx has no CPU stand-in"):
        rt.nvtx  # noqa: B018


def test_device_module_imports_without_torch_npu():
    assert "torch_npu" not in sys.modules or getattr(sys.modules["torch_npu"], "__emulated__", False)
    ns = helper_module("device")  # the suppressed ImportError: a CPU-only or CUDA host has no torch-npu
    assert callable(ns["_migrate_device"])


# -- apex.amp ----------------------------------------------------------------------------------------
def _amp(target: str) -> dict:
    """The amp helpers as a migrated file holds them (portable: `_migrate_device` from the tree module)."""
    ns: dict = {"contextlib": __import__("contextlib"), "torch": torch}
    ns.update({k: v for k, v in helper_module("device").items() if k.startswith("_migrate")})
    exec(helpers.apex_amp_helpers(target), ns)
    return ns


@pytest.mark.parametrize("target", ["npu", "portable"])
def test_amp_o1_scales_the_loss_and_skips_a_step_whose_gradients_overflowed(request, target):
    if target == "npu":
        request.getfixturevalue("emulation")
    ns = _amp(target)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = ns["_migrate_amp_initialize"](model, optimizer, opt_level="O1")
    assert optimizer._migrate_scaler.get_scale() == 2.0**16
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    ran = []
    for factor in (1.0, 1.0, 1.0, float("inf"), 1.0):  # 2**16 itself overflows fp16: the first steps skip
        optimizer.zero_grad()
        with ns["_migrate_amp_scale_loss"](model(x).float().sum() * factor, optimizer) as scaled:
            scaled.backward()
        skip = optimizer._migrate_skip_step
        assert skip or factor != float("inf")
        before = model.weight.detach().clone()
        optimizer.step()
        assert torch.equal(model.weight, before) == skip  # an overflowed step is skipped, as Apex does
        ran.append(not skip)
    assert ran[-1] and not ran[3]
    assert optimizer._migrate_scaler.get_scale() < 2.0**16  # reduced on overflow


def test_amp_refuses_the_levels_native_amp_cannot_reproduce():
    ns = _amp("portable")
    with pytest.raises(NotImplementedError, match="O2"):
        ns["_migrate_amp_initialize"](torch.nn.Linear(2, 2), opt_level="O2")
    with pytest.raises(NotImplementedError, match="static"):
        ns["_migrate_amp_initialize"](torch.nn.Linear(2, 2), loss_scale=128.0)


# -- RMSNorm -----------------------------------------------------------------------------------------
def test_rms_norm_without_affine_keeps_ones_as_a_buffer(emulation):
    cls = helper_module("rms_norm_npu")["_MigrateRMSNorm"]
    norm = cls([2, 4], eps=1e-6, elementwise_affine=False)
    assert dict(norm.named_parameters()) == {} and norm.weight.shape == (2, 4)
    assert "weight" not in norm.state_dict()  # not persistent: checkpoints look like apex's
    x = torch.randn(3, 2, 4, generator=torch.Generator().manual_seed(2))
    expected = x / torch.sqrt(x.pow(2).mean((-2, -1), keepdim=True) + 1e-6)
    torch.testing.assert_close(norm(x), expected, atol=1e-6, rtol=1e-5)
