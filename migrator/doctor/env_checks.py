"""Environment variables the project's Ascend facts name (shared docs `ascend-facts.md` §a, §e; msprobe's
`env.yaml` NCCL↔HCCL table): device visibility and the settings that make a run fail or mislead."""

from __future__ import annotations

from migrator.doctor.model import Check, Device, Host, Status

# msprobe `core/config_check/resource/env.yaml` (NPU name <- GPU name)
NCCL_TO_HCCL = {"NCCL_DETERMINISTIC": "HCCL_DETERMINISTIC", "NCCL_ALGO": "HCCL_ALGO",
                "CUDA_LAUNCH_BLOCKING": "ASCEND_LAUNCH_BLOCKING"}
DEFAULT_HCCL_EXEC_TIMEOUT_S = 1800  # EI0002 text: "default 1800s"


def _ids(value: str) -> list[int] | None:
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        return None


def visibility_check(host: Host, devices: tuple[Device, ...]) -> tuple[Check | None, int]:
    """ASCEND_RT_VISIBLE_DEVICES against the NPUs npu-smi lists; returns the check and the usable count."""
    value = host.env.get("ASCEND_RT_VISIBLE_DEVICES")
    cuda = host.env.get("CUDA_VISIBLE_DEVICES")
    if not devices:
        if value is not None:
            return Check("visible devices", Status.INFO, f"ASCEND_RT_VISIBLE_DEVICES={value}", "no NPU on this machine"), 0
        return None, 0
    if value is None:
        if cuda is not None:
            return Check("visible devices", Status.WARN, f"CUDA_VISIBLE_DEVICES={cuda}",
                         "CUDA_VISIBLE_DEVICES does not restrict NPUs: all of them are visible",
                         fix=f"export ASCEND_RT_VISIBLE_DEVICES={cuda}"), len(devices)
        return Check("visible devices", Status.OK, f"all {len(devices)}"), len(devices)
    ids = _ids(value)
    known = {d.npu_id for d in devices}
    if ids is None:
        return Check("visible devices", Status.PROBLEM, f"ASCEND_RT_VISIBLE_DEVICES={value!r}", "not a comma-separated id list",
                     fix=f"export ASCEND_RT_VISIBLE_DEVICES={','.join(map(str, sorted(known)))}"), 0
    usable = [i for i in ids if i in known]
    if not usable:
        return Check("visible devices", Status.PROBLEM, f"ASCEND_RT_VISIBLE_DEVICES={value}",
                     f"no visible device: the machine has NPU {', '.join(map(str, sorted(known)))}",
                     fix=f"export ASCEND_RT_VISIBLE_DEVICES={','.join(map(str, sorted(known)))} (or unset it)"), 0
    stray = [i for i in ids if i not in known]
    if stray:
        return Check("visible devices", Status.WARN, f"ASCEND_RT_VISIBLE_DEVICES={value}",
                     f"no NPU {', '.join(map(str, stray))} on this machine",
                     fix=f"export ASCEND_RT_VISIBLE_DEVICES={','.join(map(str, usable))}"), len(usable)
    return Check("visible devices", Status.OK, f"{len(usable)} of {len(devices)} ({value})"), len(usable)


def _int(host: Host, name: str) -> int | None:
    try:
        return int(host.env[name])
    except (KeyError, ValueError):
        return None


def environment_checks(host: Host) -> list[Check]:
    env, checks = host.env, []
    transfer = env.get("TORCH_TRANSFER_TO_NPU")
    if transfer not in (None, "", "0", "1"):
        checks.append(Check("TORCH_TRANSFER_TO_NPU", Status.PROBLEM, transfer,
                            "torch_npu raises ValueError at import for values other than 0 and 1",
                            fix="export TORCH_TRANSFER_TO_NPU=1 (or 0 / unset)"))
    if env.get("PYTORCH_NPU_ALLOC_CONF") and env.get("PYTORCH_ALLOC_CONF"):
        checks.append(Check("allocator config", Status.PROBLEM, "PYTORCH_NPU_ALLOC_CONF and PYTORCH_ALLOC_CONF",
                            "both set is an error for torch_npu 26.2.0+ with PyTorch >= 2.10",
                            fix="unset PYTORCH_ALLOC_CONF (keep PYTORCH_NPU_ALLOC_CONF)"))
    if env.get("ASCEND_LAUNCH_BLOCKING") == "1":
        checks.append(Check("ASCEND_LAUNCH_BLOCKING", Status.WARN, "1",
                            "synchronous execution (for true stack traces) disables the task queue: slower",
                            fix="unset ASCEND_LAUNCH_BLOCKING outside debugging"))
    exec_timeout = _int(host, "HCCL_EXEC_TIMEOUT")
    event_timeout = _int(host, "HCCL_EVENT_TIMEOUT")
    if event_timeout is not None and event_timeout <= (exec_timeout or DEFAULT_HCCL_EXEC_TIMEOUT_S):
        wanted = (exec_timeout or DEFAULT_HCCL_EXEC_TIMEOUT_S) + 68
        checks.append(Check("HCCL_EVENT_TIMEOUT", Status.PROBLEM, str(event_timeout),
                            f"must exceed HCCL_EXEC_TIMEOUT ({exec_timeout or DEFAULT_HCCL_EXEC_TIMEOUT_S} s)",
                            fix=f"export HCCL_EVENT_TIMEOUT={wanted}"))
    connect = _int(host, "HCCL_CONNECT_TIMEOUT")
    if connect is not None and connect < 120:
        checks.append(Check("HCCL_CONNECT_TIMEOUT", Status.WARN, str(connect), "below CANN's documented range [120, 7200] s",
                            fix="export HCCL_CONNECT_TIMEOUT=120 (or more on large clusters)"))
    for gpu_name, npu_name in NCCL_TO_HCCL.items():
        if env.get(gpu_name) is not None and env.get(npu_name) is None:
            checks.append(Check(gpu_name, Status.WARN, env[gpu_name], f"has no effect on Ascend; the NPU setting is {npu_name}",
                                fix=f"export {npu_name}={env[gpu_name]}"))
    if env.get("TORCH_DEVICE_BACKEND_AUTOLOAD") == "0":
        checks.append(Check("TORCH_DEVICE_BACKEND_AUTOLOAD", Status.INFO, "0",
                            "torch will not load torch_npu by itself: the program must `import torch_npu`"))
    return checks
