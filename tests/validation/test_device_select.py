"""`--device` for `--record` / `--compare`: selection and refusal (fake machines, fake child libraries),
and the refusals of a reference recorded from another program or torch release."""

from __future__ import annotations

import json

import pytest

from migrator.validation.child.protocol import DeviceUnavailable, device_for
from migrator.validation.parent.device_select import select_device
from migrator.validation.parent.reference_meta import check_meta, program_digest, write_meta
from migrator.validation.parent.stage_kit import ValidationSetupError
from tests.doctor.conftest import FakeMachine


@pytest.fixture
def host(tmp_path):
    from migrator.doctor.model import Host

    def make(machine: FakeMachine) -> Host:
        return Host(root=machine.root, env=machine.env, package_paths=(str(machine.site),))

    machine = FakeMachine(tmp_path / "root", tmp_path / "site", {"PATH": "/usr/bin:/bin"})
    machine.root.mkdir()
    machine.site.mkdir()
    return machine, make


def test_npu_is_selected_where_torch_npu_and_a_visible_npu_answer(host):
    machine, make = host
    machine.package("torch", "2.9.0").package("torch-npu", "2.9.0").npu_smi("npu-smi-910b2x8.txt")
    assert select_device("npu", record=False, compare=True, host=make(machine)) == "npu"
    assert select_device("cpu", record=False, compare=True, host=make(machine)) == "cpu"
    assert select_device(None, record=False, compare=True, host=make(machine)) is None  # the child takes what answers


@pytest.mark.parametrize(("setup", "reason"), [
    (lambda m: m.package("torch", "2.9.0"), "torch_npu is not installed"),
    (lambda m: m.package("torch-npu", "2.9.0"), "no NPU answers"),
    (lambda m: (m.package("torch-npu", "2.9.0").npu_smi("npu-smi-910b2x8.txt").env
                .update(ASCEND_RT_VISIBLE_DEVICES="9")), "no visible NPU"),
])
def test_npu_refused_with_the_reason(host, setup, reason):
    machine, make = host
    setup(machine)
    with pytest.raises(ValidationSetupError, match=reason):
        select_device("npu", record=False, compare=True, host=make(machine))


@pytest.mark.parametrize(("device", "record", "compare", "reason"), [
    ("npu", True, False, "--record runs the original program, on cuda or cpu"),
    ("cuda", False, True, "--compare runs the migrated program, on npu or cpu"),
    ("cuda", True, False, "no NVIDIA device"),
    ("cpu", False, False, "--device chooses the device of --record"),
])
def test_device_combinations_refused(host, device, record, compare, reason):
    machine, make = host
    with pytest.raises(ValidationSetupError, match=reason):
        select_device(device, record=record, compare=compare, host=make(machine))


def test_cuda_selected_when_nvidia_smi_answers(host):
    machine, make = host
    (machine.root / "dev").mkdir()
    (machine.root / "dev" / "nvidia0").write_text("")
    assert select_device("cuda", record=True, compare=False, host=make(machine)) == "cuda"


def test_child_device_choice_and_refusal():
    assert device_for("original", None, cuda=True, real_npu=False) == "cuda"
    assert device_for("original", "cpu", cuda=True, real_npu=False) == "cpu"
    assert device_for("migrated", None, cuda=False, real_npu=True) == "npu"
    assert device_for("migrated", None, cuda=False, real_npu=False) == "cpu"
    with pytest.raises(DeviceUnavailable, match="torch.cuda.is_available"):
        device_for("original", "cuda", cuda=False, real_npu=False)
    with pytest.raises(DeviceUnavailable, match="libhccl.so"):
        device_for("migrated", "npu", cuda=False, real_npu=False, npu_error="ImportError: libhccl.so")


def test_reference_from_another_program_or_torch_is_refused(tmp_path):
    original, shared = tmp_path / "orig", tmp_path / "shared"
    original.mkdir()
    shared.mkdir()
    (original / "validate.py").write_text("X = 1\n")
    meta = write_meta(str(shared), str(original), "cpu")
    assert meta["device"] == "cpu" and meta["program_digest"] == program_digest(str(original))
    assert check_meta("ref.tar", str(shared), str(original))["program_digest"] == meta["program_digest"]
    with pytest.raises(ValidationSetupError, match="recorded with torch 2.9.0.*numerics differ"):
        doc = json.loads((shared / "reference.json").read_text())
        (shared / "reference.json").write_text(json.dumps({**doc, "torch": "2.9.0+cu128"}))
        check_meta("ref.tar", str(shared), str(original))
    (shared / "reference.json").write_text(json.dumps(doc))
    (original / "validate.py").write_text("X = 2\n")
    with pytest.raises(ValidationSetupError, match="ref.tar: recorded from another program"):
        check_meta("ref.tar", str(shared), str(original))
    (shared / "reference.json").unlink()
    with pytest.raises(ValidationSetupError, match="no reference.json"):
        check_meta("ref.tar", str(shared), str(original))


def test_torch_build_label_does_not_count(tmp_path):
    original, shared = tmp_path / "orig", tmp_path / "shared"
    original.mkdir()
    shared.mkdir()
    write_meta(str(shared), str(original), "cuda")
    doc = json.loads((shared / "reference.json").read_text())
    (shared / "reference.json").write_text(json.dumps({**doc, "torch": "2.13.0+cu128"}))
    assert check_meta("ref", str(shared), str(original), torch_here="2.13.0+cpu")["device"] == "cuda"


@pytest.mark.slow
def test_record_on_cpu_compare_on_cpu_gives_the_in_process_verdict(tmp_path):
    """A seeded slip (the port's second block uses sigmoid): record on cpu, compare on cpu, and the in-process
    run agree on the verdict and the first divergent module; the archive says which device ran."""
    pytest.importorskip("torch")
    from migrator import api
    from tests.validation.test_validate_bad_input import tree

    orig = tree(tmp_path, "orig")
    mig = tree(tmp_path, "mig", ("        y = torch.tanh(self.fc(x))", "        y = torch.sigmoid(self.fc(x))"))
    archive = tmp_path / "ref.tar.gz"
    recorded = api.validate(orig, record=str(archive), device="cpu")
    assert recorded.exit_code == 0 and recorded.manifest["reference"]["device"] == "cpu"
    compared = api.validate(orig, migrated=str(mig), compare=str(archive), device="cpu", stages=("S1",))
    in_process = api.validate(orig, migrated=str(mig), stages=("S1",))
    a, b = compared.stage("S1"), in_process.stage("S1")
    assert a.status == b.status == "fail"
    assert a.first_divergence == b.first_divergence and a.first_divergence.startswith("blocks.0")
    assert compared.manifest["reference"]["program_digest"] == recorded.manifest["reference"]["program_digest"]
    other = tree(tmp_path, "other", ("torch.nn.Linear(16, 4)  # HEAD", "torch.nn.Linear(16, 4)  # HEAD, changed"))
    with pytest.raises(Exception, match="recorded from another program"):
        api.validate(other, migrated=str(mig), compare=str(archive), stages=("S1",))
