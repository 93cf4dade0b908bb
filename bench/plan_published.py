"""`migrate plan` on published training runs it was not fitted to (bench/data/published_runs.yaml).

For each run: the published layout through `migrate plan --layout ... --explain` (published vs predicted),
then the search on the same cluster and world size (`migrate plan` without --layout): its pick, its
prediction, how much faster it claims to be than the published layout and, from --explain, which terms
make the difference. Everything goes through the CLI; the calibration (migrator/plan/calibration.py) was
fitted to Narayanan et al. 2021 Table 1 only, so these errors are held-out errors.

Rows marked `fit:` in the YAML set a constant of migrator/plan/calibration.py (one run per constant and
hardware family); they are printed as "fit" and left out of the held-out count. `--fit` re-derives those
constants from their rows (bisection through the CLI, in the order the YAML lists them) and prints them.

Usage: python bench/plan_published.py [RUN ...]     (prints a table; exit 0 always)
       python bench/plan_published.py --fit         (prints the fitted constants)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import yaml
from click.testing import CliRunner

from migrator.cli import main

HERE = Path(__file__).resolve().parent
CONFIGS = HERE.parent / "tests" / "plan" / "data"
TOLERANCE, SEARCH_MARGIN = 0.20, 0.15


def _toml_value(value) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def _prepare(name: str, run: dict, folder: Path) -> tuple[Path, str]:
    """The model config file and the cluster name (a [tool.migrate.clusters] entry when it overrides figures)."""
    model = run["model"]
    if isinstance(model, str):
        config = CONFIGS / f"{model}.json"
    else:
        config = folder / f"{name}.json"
        config.write_text(json.dumps(model))
    cluster = run["cluster"]
    if isinstance(cluster, dict):
        table = "\n".join(f"{k} = {_toml_value(v)}" for k, v in cluster.items())
        pyproject = folder / "pyproject.toml"
        header = f"[tool.migrate.clusters.{name}]\n"
        if not pyproject.exists() or header not in pyproject.read_text(encoding="utf-8"):  # once per run (--fit repeats)
            with pyproject.open("a", encoding="utf-8") as f:
                f.write(f"{header}{table}\n")
        return config, name
    return config, cluster


def _cli(args: list[str]) -> dict:
    result = CliRunner().invoke(main, args)
    if result.exit_code not in (0, 1):
        raise SystemExit(f"migrate {' '.join(args)} exited {result.exit_code}: {result.output[-2000:]}")
    return json.loads(result.output)


def measure(est: dict, run: dict, peak_tflops: float) -> float:
    metric = run["published"]["metric"]
    if metric == "mfu":
        return est["mfu"]
    if metric == "model_tflops":
        return est["mfu"] * peak_tflops
    if metric == "hardware_tflops":
        return est["achieved_tflops"]
    world = est["layout"]["world"]
    return run["global_batch"] * run["seq"] / world / est["step_s"]  # tokens_per_gpu_s


def evaluate(name: str, run: dict, folder: Path, search: bool = True) -> dict:
    config, cluster = _prepare(name, run, folder)
    from migrator.plan.layout_spec import parse_layout

    world = parse_layout(run["layout"]).world
    common = ["plan", "--model", str(config), "--cluster", cluster, "--devices", str(world), "--global-batch",
              str(run["global_batch"]), "--seq", str(run["seq"]), "--dtype", run.get("dtype", "bf16"),
              "--format", "json"]
    for pair in run.get("assume", []):
        common += ["--assume", pair]
    given_doc = _cli(common + ["--layout", run["layout"], "--explain"])
    plan = given_doc["clusters"][0]
    given = plan["top"][0]
    peak = plan["cluster"]["figures"][f"peak_tflops_{run.get('dtype', 'bf16')}"]["value"]
    searched = _cli(common + ["--top", "1"])["clusters"][0]["top"] if search else []
    pick = searched[0] if searched else None
    return {"name": name, "published": run["published"]["value"], "predicted": measure(given, run, peak),
            "metric": run["published"]["metric"], "problems": plan["problems"], "given": given, "pick": pick,
            "pick_value": measure(pick, run, peak) if pick else None,
            "faster": given["step_s"] / pick["step_s"] - 1 if pick else None,
            "why": [w for w in plan["why"] if w.startswith("the search's pick")], "guessed": run.get("guessed")}


def fit_constant(name: str, run: dict, folder: Path, key: str, low: float, high: float) -> float:
    """The value of `key` (an --assume key) at which the run's predicted figure equals the published one:
    bisection on a log scale between low and high (the prediction is monotonic in each fitted key)."""
    def error(value: float) -> float:
        tried = {**run, "assume": [*run.get("assume", []), f"{key}={value:.6g}"]}
        r = evaluate(name, tried, folder, search=False)
        return r["predicted"] / r["published"] - 1
    rising = error(high) > error(low)
    for _ in range(30):
        mid = (low * high) ** 0.5
        if (error(mid) > 0) == rising:
            high = mid
        else:
            low = mid
        if high / low < 1.001:
            break
    return (low * high) ** 0.5


FIT_RANGES = {"peak_tflops_bf16": (50.0, 2000.0), "moe_dispatch_s": (1e-6, 1.0)}


def fit_all(runs: dict, folder: Path) -> None:
    """Each `fit:` row's constant, in YAML order (a later fit on the same profile sees the earlier ones)."""
    fitted: dict[str, list[str]] = {}
    for name, run in runs.items():
        if "fit" not in run:
            continue
        key = run["fit"]["key"]
        profile = run["cluster"] if isinstance(run["cluster"], str) else run["cluster"]["base"]
        earlier = fitted.setdefault(profile, [])
        value = fit_constant(name, {**run, "assume": [*run.get("assume", []), *earlier]}, folder, key,
                             *FIT_RANGES[key])
        earlier.append(f"{key}={value:.6g}")
        print(f"{name}: {key} = {value:.6g}  ({run['fit']['sets']})")


def _print_rows(rows: list[dict], title: str) -> int:
    """One line per run (and its flagged problems and --explain terms); returns how many are within tolerance."""
    print(f"\n== {title}")
    print(f"{'run':<28} {'metric':<16} {'published':>9} {'predicted':>9} {'error':>7}  {'pick faster':>11}  pick")
    within = 0
    for r in rows:
        err = r["predicted"] / r["published"] - 1
        within += abs(err) <= TOLERANCE
        fmt = (lambda v: f"{v:.1%}") if r["metric"] == "mfu" else (lambda v: f"{v:.0f}")
        pick = f"{r['pick']['label']} ({fmt(r['pick_value'])})" if r["pick"] else "none fits"
        faster = f"{r['faster']:+.1%}" if r["faster"] is not None else "-"
        print(f"{r['name']:<28} {r['metric']:<16} {fmt(r['published']):>9} {fmt(r['predicted']):>9} {err:>+7.1%}  "
              f"{faster:>11}  {pick}")
        if r["problems"]:
            print(f"{'':<28} published layout flagged: {'; '.join(r['problems'])}")
        if r["faster"] is not None and r["faster"] > SEARCH_MARGIN:
            print(f"{'':<28} why (--explain): {'; '.join(r['why'])}")
    return within


def main_() -> int:
    runs = yaml.safe_load((HERE / "data" / "published_runs.yaml").read_text(encoding="utf-8"))
    fit = "--fit" in sys.argv[1:]
    chosen = [a for a in sys.argv[1:] if a != "--fit"] or list(runs)
    home = os.getcwd()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the runs' own cluster figures go in this folder's pyproject.toml
        try:
            if fit:
                fit_all(runs, Path(tmp))
                return 0
            rows = [evaluate(name, runs[name], Path(tmp)) for name in chosen]
        finally:
            os.chdir(home)
    def group_of(name: str) -> str:
        return "fit" if "fit" in runs[name] else runs[name].get("batch", "original")

    titles = {"original": "held out (the first set)", "fit": "fit (set a calibration.py constant: not held out)"}
    for group in dict.fromkeys(group_of(r["name"]) for r in rows):
        members = [r for r in rows if group_of(r["name"]) == group]
        title = titles.get(group, "held out (issue 40 additions)")
        within = _print_rows(members, title)
        print(f"{title}: within +-{TOLERANCE:.0%} with the published layout: {within} of {len(members)}")
    held = [r for r in rows if group_of(r["name"]) != "fit"]
    within = sum(abs(r["predicted"] / r["published"] - 1) <= TOLERANCE for r in held)
    print(f"held-out rows: within +-{TOLERANCE:.0%} with the published layout: {within} of {len(held)} "
          f"({within / max(1, len(held)):.0%}; acceptance: at least 80 %), {len(rows) - len(held)} fit rows left out; "
          f"search picks more than {SEARCH_MARGIN:.0%} faster carry the --explain terms above")
    return 0


if __name__ == "__main__":
    raise SystemExit(main_())
