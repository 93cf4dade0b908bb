"""The stack checks: versions against the release matrix, devices, and what `--record/--compare` need.
Each problem or warning carries the command or setting that fixes it."""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from migrator.doctor import matrix, probe
from migrator.doctor.env_checks import environment_checks, visibility_check
from migrator.doctor.model import Check, DoctorReport, Host, Status

SET_ENV = "source /usr/local/Ascend/ascend-toolkit/set_env.sh"
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
VALIDATE_PACKAGES = ("numpy", "safetensors", "cattrs")


def _local_label(version: str) -> str:
    try:
        return Version(version).local or ""
    except InvalidVersion:
        return ""


def _torch_checks(host: Host, torch: probe.Found, torch_npu: probe.Found, npu_present: bool) -> list[Check]:
    checks = []
    if torch.version is None:
        wanted = matrix.find(torch_npu.version) if torch_npu.version else None
        pin = f"torch=={wanted.torch}" if wanted else "torch"
        checks.append(Check("torch", Status.PROBLEM, "not installed", "nothing runs without torch",
                            fix=f"pip install {pin}"))
    else:
        label = _local_label(torch.version)
        checks.append(Check("torch", Status.OK, torch.version, f"{label} build" if label else "", source=torch.source))

    if torch_npu.version is None:
        newest = matrix.newest_for_torch(torch.version) if torch.version else None
        install = f"pip install torch-npu=={newest.torch_npu}" if newest else "pip install torch-npu"
        if npu_present:
            checks.append(Check("torch_npu", Status.PROBLEM, "not installed", "an NPU is present but PyTorch cannot use it",
                                fix=install + (f" (the newest torch-npu for torch {torch.version})" if newest else "")))
        else:
            checks.append(Check("torch_npu", Status.INFO, "not installed", "not needed on a machine without an NPU",
                                fix=f"on the Ascend machine: {install}"))
        return checks

    release = matrix.find(torch_npu.version)
    if release is None:
        checks.append(Check("torch_npu", Status.WARN, torch_npu.version,
                            "not a torch-npu release on PyPI: its torch and CANN pairing are unknown to the matrix",
                            fix="install a published release: pip install torch-npu==<version> (see `pip index versions torch-npu`)",
                            source=torch_npu.source))
        return checks
    if torch.version and matrix.release_part(torch.version) != release.torch:
        newest = matrix.newest_for_torch(torch.version)
        fix = (f"pip install torch-npu=={newest.torch_npu} (for torch {torch.version}), or "
               if newest else "") + f"pip install torch=={release.torch} (for torch-npu {torch_npu.version})"
        checks.append(Check("torch_npu", Status.PROBLEM, torch_npu.version,
                            f"torch-npu {torch_npu.version} pins torch=={release.torch}; torch {torch.version} is installed",
                            fix=fix, source=torch_npu.source))
    else:
        checks.append(Check("torch_npu", Status.OK, torch_npu.version, f"pairs with torch {release.torch}", source=torch_npu.source))
    label = _local_label(torch.version or "")
    if label.startswith(("cu", "rocm")):
        checks.append(Check("torch build", Status.PROBLEM, torch.version or "",
                            "a CUDA/ROCm build of torch: torch_npu refuses a second accelerator at import",
                            fix=f"pip install torch=={release.torch} {CPU_INDEX}"))
    if release.python and ".".join(host.python_version.split(".")[:2]) not in release.python:
        checks.append(Check("python", Status.PROBLEM, host.python_version,
                            f"torch-npu {release.torch_npu} is documented for Python {', '.join(release.python)}",
                            fix=f"use Python {release.python[-1]} for torch-npu {release.torch_npu}"))
    return checks


def _cann_checks(host: Host, torch_npu: probe.Found, npu_present: bool) -> list[Check]:
    toolkit, kernels = probe.toolkit(host), probe.kernels(host)
    release = matrix.find(torch_npu.version) if torch_npu.version else None
    documented = release.cann if release else ()
    wanted = f"CANN {' or '.join(documented[-2:])}" if documented else "the CANN toolkit"
    needed = npu_present or torch_npu.version is not None
    checks = []
    if toolkit.version is None:
        status = Status.PROBLEM if needed else Status.INFO
        detail = ("torch_npu needs CANN's libraries (libhccl.so, libascendcl.so, ...); `import torch` fails "
                  "with torch_npu installed and CANN missing" if needed else "only needed on an Ascend machine")
        checks.append(Check("CANN toolkit", status, "not found", detail,
                            fix=f"install {wanted} (Ascend-cann-toolkit_<version>_linux-<arch>.run --install), then {SET_ENV}"))
    else:
        if documented and toolkit.version not in documented:
            checks.append(Check("CANN toolkit", Status.WARN, toolkit.version,
                                f"torch-npu {release.torch_npu if release else ''} is documented with CANN {', '.join(documented)}",
                                fix=f"install {wanted}, or the torch-npu release paired with CANN {toolkit.version}",
                                source=toolkit.source))
        else:
            note = "" if documented else ("no documented CANN pairing for this torch-npu release" if release else "")
            checks.append(Check("CANN toolkit", Status.OK, toolkit.version, note, source=toolkit.source))
        if host.env.get("ASCEND_HOME_PATH") is None and host.env.get("ASCEND_TOOLKIT_HOME") is None:
            checks.append(Check("CANN environment", Status.WARN, "set_env.sh not sourced",
                                "ASCEND_HOME_PATH is unset: torch_npu will not find CANN's libraries", fix=SET_ENV))
    if kernels.version is None:
        if toolkit.version is not None or needed:
            checks.append(Check("CANN kernels", Status.PROBLEM if needed else Status.WARN, "not found",
                                "the operator kernels package (opp_kernel / ops) is missing: NPU ops will not load",
                                fix=f"install the CANN kernels package of the same version as the toolkit "
                                    f"({toolkit.version or wanted}) for this SoC"))
    elif toolkit.version and not kernels.version.startswith(toolkit.version) and not toolkit.version.startswith(kernels.version):
        checks.append(Check("CANN kernels", Status.PROBLEM, kernels.version,
                            f"kernels {kernels.version} do not match toolkit {toolkit.version}",
                            fix=f"install the kernels package of CANN {toolkit.version}", source=kernels.source))
    else:
        checks.append(Check("CANN kernels", Status.OK, kernels.version, source=kernels.source))
    return checks


def _device_checks(host: Host, smi: probe.SmiResult, nodes: tuple[str, ...]) -> list[Check]:
    drv, fw = probe.driver(host), probe.firmware(host)
    checks = []
    for name, found in (("driver", drv), ("firmware", fw)):
        if found.version:
            checks.append(Check(name, Status.OK, found.version, source=found.source))
        elif smi.devices or nodes:
            checks.append(Check(name, Status.WARN, "version file not found", f"{found.source} is missing",
                                fix="reinstall the Ascend driver and firmware packages (Ascend-hdk-<soc>-npu-driver/firmware)"))
    if not smi.ran:
        if nodes:
            checks.append(Check("npu-smi", Status.PROBLEM, "not on PATH", f"{len(nodes)} /dev/davinci node(s) exist",
                                fix="export PATH=/usr/local/bin:$PATH (npu-smi ships with the driver), or reinstall the driver"))
        else:
            checks.append(Check("NPU", Status.INFO, "no NPU", "npu-smi not found and no /dev/davinci device: not an Ascend machine"))
        return checks
    if smi.error and not smi.devices:
        checks.append(Check("npu-smi", Status.PROBLEM, "failed", smi.error,
                            fix="check the driver install (`npu-smi info` must list the NPUs); reload it or reboot", source=smi.command))
        return checks
    if smi.version:
        checks.append(Check("npu-smi", Status.OK, smi.version, source=smi.command))
    if not smi.devices:
        checks.append(Check("NPU", Status.INFO, "no NPU", "npu-smi lists no device", source=smi.command))
        return checks
    unhealthy = [d for d in smi.devices if d.health.upper() != "OK"]
    names = sorted({d.name for d in smi.devices})
    checks.append(Check("NPU", Status.WARN if unhealthy else Status.OK, f"{len(smi.devices)} x {', '.join(names)}",
                        "; ".join(f"NPU {d.npu_id}: health {d.health}" for d in unhealthy),
                        fix="see `npu-smi info -t health -i <id>` for the alarm" if unhealthy else "",
                        source=smi.command))
    return checks


def _record_compare_check(host: Host, torch: probe.Found, torch_npu: probe.Found, usable_npus: int) -> Check:
    missing = [name for name in VALIDATE_PACKAGES if probe.package(name, host).version is None]
    if torch.version is None:
        missing.insert(0, "torch")
    if missing:
        return Check("--record/--compare", Status.PROBLEM, f"missing {', '.join(missing)}",
                     "`migrate validate --record/--compare` run the program in child processes with these",
                     fix="pip install 'ascend-migrate[validate]'")
    if torch_npu.version and usable_npus:
        where = f"the migrated side can run on npu ({usable_npus} visible device(s), torch_npu {torch_npu.version})"
    else:
        where = "the migrated side runs on cpu under the torch_npu emulation (no usable NPU here)"
    return Check("--record/--compare", Status.OK, "ready", where)


def run_checks(host: Host) -> DoctorReport:
    torch, torch_npu = probe.package("torch", host), probe.package("torch-npu", host)
    smi, nodes = probe.npu_smi(host), probe.device_nodes(host)
    npu_present = bool(smi.devices or nodes)
    checks = [Check("python", Status.OK, host.python_version)]
    checks += _torch_checks(host, torch, torch_npu, npu_present)
    checks += _cann_checks(host, torch_npu, npu_present)
    checks += _device_checks(host, smi, nodes)
    visibility, usable = visibility_check(host, smi.devices)
    if visibility is not None:
        checks.append(visibility)
    checks += environment_checks(host)
    checks.append(_record_compare_check(host, torch, torch_npu, usable))
    return DoctorReport(tuple(checks), npu_present, smi.devices)
