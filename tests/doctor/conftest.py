"""Fake Ascend machines: a root prefix with install files, a site-packages folder with package metadata,
and an `npu-smi` that prints a recorded screen."""

from __future__ import annotations

import stat
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class FakeMachine:
    root: Path
    site: Path
    env: dict[str, str] = field(default_factory=dict)

    def package(self, name: str, version: str) -> FakeMachine:
        info = self.site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
        return self

    def file(self, absolute: str, text: str) -> FakeMachine:
        path = self.root / absolute.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return self

    def cann(self, version: str, kernels: str | None = None, arch: str = "x86_64") -> FakeMachine:
        home = "/usr/local/Ascend/ascend-toolkit/latest"
        self.file(f"{home}/{arch}-linux/ascend_toolkit_install.info",
                  f"package_name=Ascend-cann-toolkit\nversion={version}\narch={arch}\nos=linux\n")
        if kernels:
            self.file(f"{home}/opp_kernel/version.info", f"Version=8.3.T5.0.B028\nversion_dir={kernels}\n")
        self.env["ASCEND_HOME_PATH"] = home
        return self

    def driver(self, version: str = "24.1.rc2", firmware: str = "7.5.0.1.129") -> FakeMachine:
        self.file("/usr/local/Ascend/driver/version.info", f"Version={version}\nascendhal_version=7.35.23\n")
        self.file("/usr/local/Ascend/firmware/version.info", f"Version={firmware}\n")
        return self

    def npu_smi(self, screen: str, exit_code: int = 0, devices: int = 8) -> FakeMachine:
        bin_dir = self.root / "usr" / "local" / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        script = bin_dir / "npu-smi"
        script.write_text(f"#!/bin/sh\ncat '{FIXTURES / screen}'\nexit {exit_code}\n", encoding="utf-8")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        self.env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
        for index in range(devices):
            self.file(f"/dev/davinci{index}", "")
        return self

    def validate_extra(self) -> FakeMachine:
        for name, version in (("numpy", "2.3.0"), ("safetensors", "0.6.2"), ("cattrs", "25.1.1")):
            self.package(name, version)
        return self

    def doctor(self, log: Path | None = None):
        from migrator.api import doctor as api_doctor

        return api_doctor.doctor(root=self.root, env=self.env, package_paths=[str(self.site)], log=log)


@pytest.fixture
def machine(tmp_path) -> FakeMachine:
    root, site = tmp_path / "root", tmp_path / "site-packages"
    root.mkdir()
    site.mkdir()
    return FakeMachine(root, site, {"PATH": "/usr/bin:/bin"})


def check(report, name: str):
    """The one check of this name (a test failing here names the checks there were)."""
    found = [c for c in report.checks if c.name == name]
    assert len(found) == 1, f"{name!r} in {[c.name for c in report.checks]}"
    return found[0]
