#!/usr/bin/env python3
"""Screenshots of the HTML report for samples/gpt, committed under docs/screenshots/ (README links them).

    python3 docs/make_screenshots.py                      # runs `migrate validate` on samples/gpt first
    python3 docs/make_screenshots.py --validation v.json  # or uses a result you already have

Writes the report (`migrate report samples/gpt --diffs --validation ...`), opens it in headless
Chromium at 1400 px (tests/report/headless.py) and captures four sections: the summary cards,
the manual actions, the validation section and the op coverage table. With `--seeded-bug` the
validation runs against a migrated copy with a known bug (the attention scale dropped; one of the
mutations the validation tests use), so the failing case is shown too (validation-fail.png).
Needs chromium and the `validate` extra; about a minute on a laptop.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.report.headless import CHROMIUM, Browser  # noqa: E402

SAMPLE = REPO / "samples" / "gpt"
OUT = REPO / "docs" / "screenshots"
WIDTH, MAX_HEIGHT = 1400, 1300
# (file, first element, element the shot stops before)
SECTIONS = (
    ("summary.png", "header#summary", "#manual"),
    ("manual-actions.png", "#manual", "#performance, #validation"),
    ("validation.png", "#validation", "#plan, #findings"),
    ("op-coverage.png", "#ops", "#applied, #files"),
)


def migrate(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("CI", None)
    return subprocess.run([sys.executable, "-m", "migrator", *args], cwd=REPO, env=env, text=True,
                          capture_output=True, timeout=1200)


def sample_copy(work: Path) -> Path:
    """samples/gpt as its own small git repository, as a user's project would be (name, commit)."""
    import shutil

    tree = work / "gpt"
    shutil.copytree(SAMPLE, tree)
    who = {"GIT_AUTHOR_NAME": "docs", "GIT_AUTHOR_EMAIL": "docs@example.invalid", "GIT_COMMITTER_NAME": "docs",
           "GIT_COMMITTER_EMAIL": "docs@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull}
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "gpt sample"]):
        subprocess.run(["git", *cmd], cwd=tree, env={**os.environ, **who}, check=True, capture_output=True)
    return tree


def validation_result(work: Path, tree: Path, seeded_bug: bool) -> Path:
    out = work / ("validation-fail.json" if seeded_bug else "validation.json")
    args = ["validate", str(tree), "-o", str(out), "-q"]
    if seeded_bug:
        from tests.validation.mutations import MUTATIONS

        migrated = work / "migrated"
        done = migrate("fix", str(tree), "--root", str(tree), "--out", str(migrated), "--no-record", "-q")
        if done.returncode not in (0, 1):
            sys.exit(f"migrate fix failed: {done.stderr}")
        bug = next(m for m in MUTATIONS if m.name == "attn_scale")
        args += ["--migrated", str(bug.apply(migrated, work / "seeded-bug")), "--force"]
    done = migrate(*args)
    if not out.exists():
        sys.exit(f"migrate validate wrote no result: {done.stderr[-2000:]}")
    return out


def report(work: Path, tree: Path, validation: Path, name: str) -> Path:
    page = work / name
    done = migrate("report", str(tree), "--root", str(tree), "--diffs", "--validation", str(validation),
                   "-o", str(page), "--no-cache", "-q")
    if done.returncode != 0:
        sys.exit(f"migrate report failed: {done.stderr}")
    return page


def shoot(page: Path, sections, out: Path) -> list[Path]:
    written = []
    with Browser(WIDTH, 900) as browser:
        browser.open(page.as_uri())
        for name, first, stop in sections:
            box = browser.evaluate(f"""(() => {{
              const a = document.querySelector({json.dumps(first)}), b = document.querySelector({json.dumps(stop)});
              const folded = a.closest("details.ref");  // a reference section is collapsed until opened
              if (folded) {{ folded.open = true; }}
              const top = a.getBoundingClientRect().top + window.scrollY - 12;
              const end = b ? b.getBoundingClientRect().top + window.scrollY - 8 : top + {MAX_HEIGHT};
              return [top, end - top];
            }})()""")
            top, height = box
            written.append(browser.screenshot(out / name, 0, max(0, top), WIDTH, min(height, MAX_HEIGHT)))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--validation", type=Path, help="an existing `migrate validate -o` result for samples/gpt")
    parser.add_argument("--seeded-bug", action="store_true", help="also shoot a failing validation (validation-fail.png)")
    args = parser.parse_args()
    if CHROMIUM is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="migrate-screenshots-") as tmp:
        work = Path(tmp)
        tree = sample_copy(work)
        validation = args.validation or validation_result(work, tree, seeded_bug=False)
        written = shoot(report(work, tree, validation, "report.html"), SECTIONS, OUT)
        if args.seeded_bug:
            failing = report(work, tree, validation_result(work, tree, seeded_bug=True), "report-fail.html")
            written += shoot(failing, [("validation-fail.png", "#validation", "#plan, #findings")], OUT)
    for path in written:
        print(f"wrote {path.relative_to(REPO)} ({path.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
