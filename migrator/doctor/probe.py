"""Read what is installed: package metadata, CANN / driver / firmware version files, `npu-smi info`.

Locations are the ones Ascend documents: `<toolkit>/<arch>-linux/ascend_toolkit_install.info` (`version=`),
`<toolkit>/opp_kernel/version.info` (the kernels package), `/usr/local/Ascend/cann*/<arch>-linux/
ascend_ops_install.info` (CANN 8.5+ ops), `/usr/local/Ascend/driver/version.info` and
`/usr/local/Ascend/firmware/version.info` (`Version=`). The toolkit folder is `$ASCEND_TOOLKIT_HOME`, else
`$ASCEND_HOME_PATH` (both set by `set_env.sh`), else the default `/usr/local/Ascend/ascend-toolkit/latest`."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from migrator.doctor.model import Device, Host

DEFAULT_TOOLKIT = "/usr/local/Ascend/ascend-toolkit/latest"
ASCEND = "/usr/local/Ascend"
NPU_SMI_TIMEOUT_S = 20


@dataclass(frozen=True)
class Found:
    """A version and the file it came from; `version` is None when nothing was found."""

    version: str | None
    source: str = ""


@dataclass(frozen=True)
class SmiResult:
    ran: bool  # npu-smi was found and run
    version: str | None
    devices: tuple[Device, ...]
    error: str = ""
    command: str = ""


def package(name: str, host: Host) -> Found:
    """Installed distribution version from metadata (never imported)."""
    paths = list(host.package_paths) if host.package_paths is not None else None
    for dist in metadata.distributions(name=name, path=paths) if paths is not None else metadata.distributions(name=name):
        return Found(dist.version, str(dist.locate_file("")))  # the folder holding the package
    return Found(None)


def _key_value(path: Path, keys: tuple[str, ...]) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip().strip('"')
    return next((values[k] for k in keys if values.get(k)), None)


def toolkit_home(host: Host) -> Path:
    for var in ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH"):
        if host.env.get(var):
            return host.path(host.env[var])
    return host.path(DEFAULT_TOOLKIT)


def _arch_dirs(base: Path) -> list[Path]:
    machine = platform.machine() or "x86_64"
    preferred = [base / f"{machine}-linux"]
    others = sorted(p for p in base.glob("*-linux") if p not in preferred) if base.is_dir() else []
    return preferred + others


def _cann_homes(host: Host) -> list[Path]:
    """The toolkit folder first, then CANN 8.5's `/usr/local/Ascend/cann` and `cann-<version>` folders."""
    homes = [toolkit_home(host), host.path(f"{ASCEND}/cann")]
    ascend = host.path(ASCEND)
    if ascend.is_dir():
        homes += sorted(ascend.glob("cann-*"), reverse=True)
    return homes


def toolkit(host: Host) -> Found:
    for home in _cann_homes(host):
        for arch in _arch_dirs(home):
            info = arch / "ascend_toolkit_install.info"
            if version := _key_value(info, ("version",)):
                return Found(version, str(info))
        info = home / "toolkit" / "version.info"
        if version := _key_value(info, ("version",)):
            return Found(version, str(info))
    return Found(None)


def kernels(host: Host) -> Found:
    """The operator kernels package: `version_dir` names its CANN release (`Version=` is a build number)."""
    for home in _cann_homes(host):
        info = home / "opp_kernel" / "version.info"
        if version := _key_value(info, ("version_dir", "version")):
            return Found(version, str(info))
        for arch in _arch_dirs(home):
            info = arch / "ascend_ops_install.info"
            if version := _key_value(info, ("version",)):
                return Found(version, str(info))
    return Found(None)


def driver(host: Host) -> Found:
    info = host.path(f"{ASCEND}/driver/version.info")
    return Found(_key_value(info, ("version",)), str(info))


def firmware(host: Host) -> Found:
    info = host.path(f"{ASCEND}/firmware/version.info")
    return Found(_key_value(info, ("version",)), str(info))


def device_nodes(host: Host) -> tuple[str, ...]:
    """`/dev/davinciN` nodes the driver creates, one per NPU."""
    dev = host.path("/dev")
    try:
        return tuple(sorted(p.name for p in dev.glob("davinci[0-9]*")))
    except OSError:
        return ()


_SMI_VERSION = re.compile(r"npu-smi\s+(\S+)\s+Version:\s*(\S+)")
_SMI_DEVICE = re.compile(r"^\|\s*(\d+)\s+([A-Za-z0-9][\w.-]*)\s*\|\s*([A-Za-z]+)\s*\|")


def parse_npu_smi(text: str) -> tuple[str | None, tuple[Device, ...]]:
    """`npu-smi info`: the version banner and one device per `| <id> <name> | <health> |` row (the second
    row of each device, `| <chip> | <bus id> |`, has no health word and is skipped)."""
    banner = _SMI_VERSION.search(text)
    devices = []
    for line in text.splitlines():
        match = _SMI_DEVICE.match(line.strip())
        if match and not match.group(3).isdigit() and match.group(3).upper() != "NA":
            devices.append(Device(int(match.group(1)), match.group(2), match.group(3)))
    seen: dict[int, Device] = {}
    for device in devices:  # the process table repeats ids; the first row per id is the device
        seen.setdefault(device.npu_id, device)
    return (banner.group(2) if banner else None), tuple(seen.values())


def npu_smi(host: Host) -> SmiResult:
    """Run `npu-smi info` from the environment's PATH (it ships with the driver)."""
    executable = shutil.which("npu-smi", path=host.env.get("PATH", ""))
    if executable is None:
        return SmiResult(False, None, ())
    command = f"{executable} info"
    try:
        done = subprocess.run([executable, "info"], capture_output=True, text=True, errors="replace",
                              env=dict(host.env), timeout=NPU_SMI_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return SmiResult(True, None, (), f"no answer within {NPU_SMI_TIMEOUT_S} s", command)
    except OSError as exc:
        return SmiResult(True, None, (), f"cannot run: {exc.strerror or exc}", command)
    version, devices = parse_npu_smi(done.stdout)
    error = "" if done.returncode == 0 else (done.stderr.strip() or done.stdout.strip() or f"exit {done.returncode}")
    return SmiResult(True, version, devices, error[:300], command)
