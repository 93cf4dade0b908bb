"""`migrate doctor` and `migrate explain`: the Ascend software stack of this machine checked against the
torch-npu release matrix (`ascend_env/torch_npu_matrix.json`), and CANN / HCCL / torch_npu error codes
explained from a sourced table (`ascend_env/error_codes.yaml`).

Nothing here imports torch or torch_npu: versions come from package metadata and install files, devices
from `npu-smi`. Every function takes the root prefix, environment and package paths to read, so tests run
on fake install trees."""

from migrator.doctor.model import Check, DoctorReport, Explanation, Host

__all__ = ["Check", "DoctorReport", "Explanation", "Host"]
