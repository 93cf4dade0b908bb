"""Regenerate the sample goldens: `python tests/golden/regenerate.py` (then review `git diff tests/golden`).

For each sample under samples/: `findings.txt` (`path:line:col CODE`, paths relative to the sample)
and the output of `migrate fix --target npu|portable` in `npu/` and `portable/`. The goldens live
outside samples/ so that scanning samples/ never counts a migrated copy.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
GOLDEN = Path(__file__).resolve().parent
TARGETS = ("npu", "portable")


def sample_names() -> list[str]:
    return sorted(p.name for p in SAMPLES.iterdir() if p.is_dir() and (p / "validate.py").exists())


def findings_text(sample: str) -> str:
    from migrator import api

    result = api.scan([SAMPLES / sample], root=SAMPLES / sample, use_cache=False)
    return "".join(f"{f.path}:{f.line}:{f.column} {f.code}\n" for f in result.findings)


def fixed_tree(sample: str, target: str, out: Path) -> Path:
    from migrator import api

    api.fix([SAMPLES / sample], root=SAMPLES / sample, target=target, out_dir=out, use_cache=False)
    shutil.rmtree(out / ".migrate", ignore_errors=True)  # the record holds absolute paths
    return out


def main() -> int:
    sys.path.insert(0, str(REPO))
    for sample in sample_names():
        dest = GOLDEN / sample
        dest.mkdir(exist_ok=True)
        (dest / "findings.txt").write_text(findings_text(sample))
        for target in TARGETS:
            with tempfile.TemporaryDirectory() as tmp:
                fixed = fixed_tree(sample, target, Path(tmp) / "out")
                shutil.rmtree(dest / target, ignore_errors=True)
                shutil.copytree(fixed, dest / target, ignore=shutil.ignore_patterns("__pycache__"))
        print(f"regenerated tests/golden/{sample}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
