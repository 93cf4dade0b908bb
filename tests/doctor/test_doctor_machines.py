"""`migrate doctor` on fake Ascend machines: each broken stack names its problem and the fix."""

from __future__ import annotations

import pytest

from tests.doctor.conftest import check


def _good_910b(machine):
    return (machine.package("torch", "2.9.0").package("torch-npu", "2.9.0").validate_extra()
            .cann("8.5.0", kernels="8.5.0").driver().npu_smi("npu-smi-910b2x8.txt"))


def test_matching_versions_have_no_problem(machine):
    report = _good_910b(machine).doctor()
    assert report.problems == (), report.problems
    assert report.exit_code == 0 and report.npu_present
    assert check(report, "torch_npu").found == "2.9.0"
    assert check(report, "CANN toolkit").status == "ok" and check(report, "CANN toolkit").found == "8.5.0"
    assert check(report, "NPU").found == "8 x 910B2"
    assert check(report, "driver").found == "24.1.rc2" and check(report, "firmware").found == "7.5.0.1.129"
    assert "npu (8 visible" in check(report, "--record/--compare").detail


def test_torch_and_torch_npu_mismatch_names_both_ways_out(machine):
    _good_910b(machine).package("torch", "2.13.0")
    (machine.site / "torch-2.9.0.dist-info").rename(machine.site / "old")  # only torch 2.13.0 left
    report = machine.doctor()
    problem = check(report, "torch_npu")
    assert problem.status == "problem"
    assert "pins torch==2.9.0" in problem.detail and "2.13.0 is installed" in problem.detail
    assert "pip install torch-npu==2.13.0" in problem.fix and "pip install torch==2.9.0" in problem.fix
    assert report.exit_code == 1


def test_missing_cann_names_the_documented_version_and_set_env(machine):
    machine.package("torch", "2.6.0").package("torch-npu", "2.6.0.post5").validate_extra().driver().npu_smi(
        "npu-smi-910b2x8.txt")
    report = machine.doctor()
    problem = check(report, "CANN toolkit")
    assert problem.status == "problem" and problem.found == "not found"
    assert "CANN 8.3.RC1 or 8.5.0" in problem.fix and "set_env.sh" in problem.fix
    assert check(report, "CANN kernels").status == "problem"


def test_kernels_of_another_release_are_a_problem(machine):
    _good_910b(machine).file("/usr/local/Ascend/ascend-toolkit/latest/opp_kernel/version.info", "version_dir=8.3.RC1\n")
    problem = check(machine.doctor(), "CANN kernels")
    assert problem.status == "problem" and "CANN 8.5.0" in problem.fix


def test_no_visible_device(machine):
    _good_910b(machine).env["ASCEND_RT_VISIBLE_DEVICES"] = "8"
    report = machine.doctor()
    problem = check(report, "visible devices")
    assert problem.status == "problem" and "no visible device" in problem.detail
    assert problem.fix.startswith("export ASCEND_RT_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")
    assert "runs on cpu" in check(report, "--record/--compare").detail


def test_cuda_visible_devices_does_not_restrict_npus(machine):
    _good_910b(machine).env["CUDA_VISIBLE_DEVICES"] = "0,1"
    warning = check(machine.doctor(), "visible devices")
    assert warning.status == "warn" and warning.fix == "export ASCEND_RT_VISIBLE_DEVICES=0,1"


def test_npu_present_without_torch_npu_names_the_release_for_this_torch(machine):
    machine.package("torch", "2.7.1").validate_extra().cann("8.5.0", kernels="8.5.0").driver().npu_smi(
        "npu-smi-910b2x8.txt")
    problem = check(machine.doctor(), "torch_npu")
    assert problem.status == "problem" and "pip install torch-npu==2.7.1.post11" in problem.fix


def test_cuda_build_of_torch_is_refused(machine):
    _good_910b(machine).package("torch", "2.9.0+cu128")
    (machine.site / "torch-2.9.0.dist-info").rename(machine.site / "old")
    problem = check(machine.doctor(), "torch build")
    assert problem.status == "problem" and "download.pytorch.org/whl/cpu" in problem.fix


def test_unhealthy_device_and_old_npu_smi_layout(machine):
    machine.package("torch", "2.9.0").package("torch-npu", "2.9.0").validate_extra().cann("8.5.0", kernels="8.5.0") \
        .driver().npu_smi("npu-smi-310b4.txt", devices=1)
    warning = check(machine.doctor(), "NPU")
    assert warning.status == "warn" and warning.found == "1 x 310B4" and "Alarm" in warning.detail


def test_npu_smi_failure_is_a_problem(machine):
    _good_910b(machine).npu_smi("npu-smi-dcmi-failed.txt", exit_code=255)
    problem = check(machine.doctor(), "npu-smi")
    assert problem.status == "problem" and "dcmi" in problem.detail


def test_device_nodes_without_npu_smi(machine):
    machine.package("torch", "2.9.0").file("/dev/davinci0", "")
    problem = check(machine.doctor(), "npu-smi")
    assert problem.status == "problem" and "PATH" in problem.fix


def test_missing_validate_extra_blocks_record_compare(machine):
    machine.package("torch", "2.9.0")
    problem = check(machine.doctor(), "--record/--compare")
    assert problem.status == "problem" and "numpy" in problem.found and "[validate]" in problem.fix


@pytest.mark.parametrize(("env", "name"), [
    ({"TORCH_TRANSFER_TO_NPU": "yes"}, "TORCH_TRANSFER_TO_NPU"),
    ({"HCCL_EXEC_TIMEOUT": "3600", "HCCL_EVENT_TIMEOUT": "1868"}, "HCCL_EVENT_TIMEOUT"),
    ({"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "PYTORCH_ALLOC_CONF": "x"}, "allocator config"),
])
def test_environment_settings_that_fail(machine, env, name):
    machine.package("torch", "2.9.0").validate_extra().env.update(env)
    problem = check(machine.doctor(), name)
    assert problem.status == "problem" and problem.fix


def test_machine_without_npu_checks_what_it_can(machine):
    report = machine.package("torch", "2.13.0+cpu").validate_extra().doctor()
    assert report.exit_code == 0 and not report.npu_present
    assert check(report, "NPU").found == "no NPU"
    assert check(report, "torch_npu").status == "info" and "torch-npu==2.13.0" in check(report, "torch_npu").fix
