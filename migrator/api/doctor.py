"""The api of `migrate doctor` and `migrate explain`: returns frozen records, never prints."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from migrator.ground.usage_error import UsageError

if TYPE_CHECKING:
    from migrator.doctor.model import DoctorReport, Explanation, LogFinding


def doctor(*, root: str | Path = "/", env: Mapping[str, str] | None = None,
           package_paths: Sequence[str] | None = None, log: str | Path | None = None) -> DoctorReport:
    """Check this machine's Ascend stack (python, torch, torch_npu, CANN toolkit and kernels, driver,
    firmware, devices, environment) against the generated torch-npu release matrix. `root` prefixes every
    install path, `env` replaces the environment, `package_paths` the folders searched for package
    metadata (tests use fake trees). With `log`, the error codes and messages found in that file are
    explained too. Returns a frozen `migrator.doctor.DoctorReport`; torch_npu is never imported."""
    from dataclasses import replace

    from migrator.doctor.checks import run_checks
    from migrator.doctor.model import Host

    if not Path(root).is_dir():
        raise UsageError(f"{root}: no such directory")
    host = Host(root=Path(root), env=dict(os.environ if env is None else env),
                package_paths=None if package_paths is None else tuple(map(str, package_paths)))
    report = run_checks(host)
    if log is not None:
        report = replace(report, log_findings=tuple(scan_log(log)))
    return report


def explain_error(code: str) -> list[Explanation]:
    """The documented meaning and remedy of a CANN / HCCL / torch_npu error code, or of a log line
    holding one (`EZ9999`, `EI0006`, `ERR00100`, `507015`, ...; case and stray spaces do not matter).
    Unknown codes raise UsageError naming the table's nearest codes and, for a code of a known shape,
    where to look."""
    from migrator.doctor.explain import lookup, nearest_codes, table
    from migrator.doctor.where_to_look import where_to_look

    found = lookup(code)
    if not found:
        nearest = ", ".join(nearest_codes(code))
        hint = where_to_look(code)
        raise UsageError(f"{code!r}: no documented Ascend error code or message matches ({len(table())} codes "
                         f"known{'; the nearest: ' + nearest if nearest else ''})" + (f"\n{hint}" if hint else ""))
    return found


def scan_log(path: str | Path) -> list[LogFinding]:
    """Every line of a log file that holds a documented error code or message, explained."""
    from migrator.doctor.explain import scan_text

    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the log: {exc.strerror or exc}") from None
    return scan_text(text)
