"""Table 8.1 of Huang's thesis (action guidance vs sparse and shaped rewards, with and without PLO) with
cleanfive/ppo_action_guidance.py on the real Gym-µRTS, at a CPU budget.

Runs every strategy of Table 8.1 (sparse, sparse w/ PLO, shaped, and action guidance with long adaptation, mixed
policy and short adaptation, each with and without PLO) on the three tasks (LearnToAttack, ProduceCombatUnits,
DefeatRandomEnemy) for several seeds, each as a subprocess of the script, parses its final `summary` line, and prints
markdown tables with "ours / thesis" in every cell: the sparse return (R_M) of the last 10 training episodes, mean ±
std over seeds, as in Table 8.1; then, ours only, the final evaluation (the agent as it acts at the end of training,
`--eval-episodes` games) and t_first. Writes the tables into docs/ppo_action_guidance.md between the
BENCHMARK:table81 markers unless --no-docs.

Budget: the thesis trained 10M steps per run; here every run gets --total-timesteps (default 100,000, i.e. 1%).
The shift and adaptation periods are fractions of each run's budget (the script's presets: the thesis' steps / 10M,
e.g. long adaptation = shift 20% + adaptation 70%), so they shrink with it. Game lengths stay the thesis' (2000, 4000,
6000 frames). The default (9 strategies x 3 tasks x 3 seeds = 81 runs of 100,000 steps, --jobs 2) took 1.3-6.6
minutes per run and 5.1 run-hours in all, about 2.5-3 hours on a 2-core machine.

Every finished run is kept as one JSON file under --results (default benchmark/results/table81/, committed), with its
commit, date and machine. A rerun reuses the files whose budget and extra flags match and trains only the missing
runs, so the table can be built over several sittings; --from-results builds it from the files alone. The table says
which commits and dates its runs come from and how many of the asked runs it holds.

    uv run --all-extras python benchmark/ppo_action_guidance_table81.py --seeds 1 2 3 --jobs 2
"""

import argparse
import datetime
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from provenance import code_version, keep, kept_provenance, load_kept, usage_error, write_block

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cleanfive" / "ppo_action_guidance.py"
DOC = ROOT / "docs" / "ppo_action_guidance.md"
BEGIN, END = "<!-- BENCHMARK:table81 -->", "<!-- /BENCHMARK:table81 -->"
TASKS = ("LearnToAttack", "ProduceCombatUnits", "DefeatRandomEnemy")
# Table 8.1's rows: name -> (label, --strategy, --plo)
ROWS = {
    "sparse": ("sparse reward (first baseline)", "sparse", False),
    "sparse+plo": ("sparse reward w/ PLO", "sparse", True),
    "shaped": ("shaped reward (second baseline)", "shaped", False),
    "long": ("action guidance - long adaptation", "long-adaptation", False),
    "long+plo": ("action guidance - long adaptation w/ PLO", "long-adaptation", True),
    "mixed": ("action guidance - mixed policy", "mixed-policy", False),
    "mixed+plo": ("action guidance - mixed policy w/ PLO", "mixed-policy", True),
    "short": ("action guidance - short adaptation", "short-adaptation", False),
    "short+plo": ("action guidance - short adaptation w/ PLO", "short-adaptation", True),
}
# Table 8.1 (10 seeds of 10M steps): sparse return (mean, std) in LearnToAttack, ProduceCombatUnits, DefeatRandomEnemy
THESIS = {
    "sparse": ((3.30, 5.04), (0.00, 0.01), (-0.07, 0.03)),
    "sparse+plo": ((0.00, 0.00), (0.00, 0.01), (-0.05, 0.03)),
    "shaped": ((10.00, 0.00), (9.57, 0.30), (0.08, 0.17)),
    "long": ((11.00, 0.00), (8.31, 2.62), (0.11, 0.35)),
    "long+plo": ((11.00, 0.01), (6.96, 4.04), (0.52, 0.35)),
    "mixed": ((11.00, 0.00), (9.67, 0.17), (0.40, 0.37)),
    "mixed+plo": ((10.67, 0.12), (9.36, 0.35), (0.30, 0.42)),
    "short": ((11.00, 0.01), (2.95, 4.48), (-0.06, 0.04)),
    "short+plo": ((11.00, 0.00), (9.48, 0.51), (-0.05, 0.03)),
}


def result_path(results: Path, task: str, row: str, seed: int) -> Path:
    return results / f"{task}__{row}__seed{seed}.json"


def run_one(task: str, row: str, seed: int, steps: int, extra: list[str], results: Path) -> dict:
    """Train one configuration in a subprocess, unless its result is kept; return its summary fields and wall time."""
    path = result_path(results, task, row, seed)
    kept = load_kept(path, total_timesteps=steps, extra=extra)
    if kept is not None:
        print(f"  {task} {row} seed {seed}: kept from {kept['date']} (commit {kept['code']})", flush=True)
        return kept
    _, strategy, plo = ROWS[row]
    cmd = [sys.executable, str(SCRIPT), "--task", task, "--strategy", strategy, *(["--plo"] if plo else [])]
    cmd += ["--seed", str(seed), "--total-timesteps", str(steps), "--save-every", "0", "--quiet", *extra]
    code = code_version(SCRIPT, "cleanfive/envs/microrts.py")
    start = time.time()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("summary ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr[-2000:]}")
    fields = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    summary = {k: float(v) for k, v in fields.items() if k not in ("task", "strategy", "plo")}
    print(f"  {task} {row} seed {seed}: sparse return {summary['sparse_return']:.2f}", flush=True)
    kept = summary | {
        "wall": time.time() - start,
        "task": task,
        "row": row,
        "seed": seed,
        "total_timesteps": steps,
        "extra": extra,
    }
    return keep(path, kept, code)


def column(src: list[dict | None], key: str) -> list[float]:
    """One field of every seed's result, NaN where the seed has not been run or lacks it."""
    return [np.nan if kept is None else kept.get(key, np.nan) for kept in src]


def mean_std(values: list[float], digits: int = 2, unit: str = "") -> str:
    """mean ± std over the seeds that have a value, with how many have one when some do not."""
    arr = np.array(values, dtype=float)
    ok = arr[~np.isnan(arr)]
    if ok.size == 0:
        return "-"
    text = f"{ok.mean():.{digits}f}{unit} ± {ok.std():.{digits}f}{unit}"
    return text + (f" ({ok.size}/{arr.size})" if ok.size < arr.size else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS), help="strategies of Table 8.1")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--total-timesteps", type=int, default=100_000, help="budget of every run (frames x envs)")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (each uses ~1 core: torch + Java)")
    parser.add_argument("--no-docs", action="store_true", help="print the tables only; do not touch docs/")
    parser.add_argument(
        "--results",
        type=Path,
        default=ROOT / "benchmark" / "results" / "table81",
        help="folder of the kept per-run results (reused when budget and extra flags match)",
    )
    parser.add_argument("--from-results", action="store_true", help="train nothing: tabulate the kept results")
    parser.add_argument("extra", nargs="*", help="extra flags for the script, after --")
    args = parser.parse_args()

    started = datetime.datetime.now(datetime.UTC)
    # seed-major within a task, so that a partial run covers every row of a task before its next seed
    jobs = [(task, row, seed) for task in args.tasks for seed in args.seeds for row in args.rows]
    if args.from_results:
        found = [
            load_kept(result_path(args.results, *job), total_timesteps=args.total_timesteps, extra=args.extra)
            for job in jobs
        ]
    else:
        with ThreadPoolExecutor(args.jobs) as pool:
            found = list(pool.map(lambda job: run_one(*job, args.total_timesteps, args.extra, args.results), jobs))
    runs = {(task, row): [] for task, row, _ in jobs}  # one entry per seed asked, None where not run
    for job, kept in zip(jobs, found, strict=True):
        runs[job[:2]].append(kept)
    done = [kept for kept in found if kept is not None]
    if not done:
        usage_error(f"no kept results in {args.results} for these runs; run without --from-results first")
    finished = datetime.datetime.now(datetime.UTC)
    wall = (finished - started).total_seconds()

    command = (
        f"uv run --all-extras python benchmark/{Path(__file__).name} --tasks {' '.join(args.tasks)} "
        f"--rows {' '.join(args.rows)} --seeds {' '.join(map(str, args.seeds))} "
        f"--total-timesteps {args.total_timesteps}"
        + (" --from-results" if args.from_results else f" --jobs {args.jobs}")
        + (f" -- {' '.join(args.extra)}" if args.extra else "")
    )
    walls = [kept["wall"] / 60 for kept in done]
    where = args.results.resolve()
    where = where.relative_to(ROOT) if where.is_relative_to(ROOT) else where
    header = ["| Strategy | " + " | ".join(args.tasks) + " |", "|---" * (1 + len(args.tasks)) + "|"]
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {finished:%Y-%m-%d %H:%M} UTC from {len(done)} of the "
        f"{len(jobs)} runs asked for, kept in `{where}` and {kept_provenance(done)}; {min(walls):.1f}-"
        f"{max(walls):.1f} min per run, {sum(walls) / 60:.1f} run-hours in all; this sitting {wall / 60:.0f} min",
        "",
        f"Command: `{command}`. Every cell is **ours / thesis**: the sparse return (R_M) of the last 10 training "
        f"episodes, mean ± std over the seeds run (of {len(args.seeds)} asked; the count is given where some are "
        f"missing), {args.total_timesteps:,} steps each; thesis: Table 8.1 (10 seeds of 10M steps, one unit per "
        "decision).",
        "",
        *header,
    ]
    for row in args.rows:
        cells = []
        for task in args.tasks:
            mean, std = THESIS[row][TASKS.index(task)]
            cells.append(f"{mean_std(column(runs[(task, row)], 'sparse_return'))} / {mean:.2f} ± {std:.2f}")
        lines.append(f"| {ROWS[row][0]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Ours only, per task: the sparse return of the final evaluation (the agent as it acts at the end of "
        "training: the main policy alone for the sparse, long- and short-adaptation rows, the auxiliary one for "
        "shaped, both at ε = 0.5 for mixed policy) · t_first (% of the budget until the first positive sparse "
        "reward) · updates of the main policy skipped by PLO · steps per second.",
        "",
        *header,
    ]
    for row in args.rows:
        cells = []
        for task in args.tasks:
            src = runs[(task, row)]
            cells.append(
                f"{mean_std(column(src, 'eval_sparse_return'))} · {mean_std(column(src, 't_first'), 1, '%')} · "
                f"{mean_std(column(src, 'plo_skips_main'), 0)} · {mean_std(column(src, 'SPS'), 0)}"
            )
        lines.append(f"| {ROWS[row][0]} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if args.no_docs:
        return
    write_block(DOC, BEGIN, END, table)


if __name__ == "__main__":
    main()
