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
6000 frames). The default (9 strategies x 3 tasks x 3 seeds = 81 runs of 100,000 steps, --jobs 2) is estimated at
roughly 5-8 hours on an idle 2-core machine (from the ~115-300 steps/s of single runs read on a loaded machine).

    uv run --all-extras python benchmark/ppo_action_guidance_table81.py --seeds 1 2 3 --jobs 2
"""

import argparse
import datetime
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from provenance import code_version, machine, write_block

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


def run_one(task: str, row: str, seed: int, steps: int, extra: list[str]) -> dict:
    """Train one configuration in a subprocess; return its summary fields (floats) and wall time."""
    _, strategy, plo = ROWS[row]
    cmd = [sys.executable, str(SCRIPT), "--task", task, "--strategy", strategy, *(["--plo"] if plo else [])]
    cmd += ["--seed", str(seed), "--total-timesteps", str(steps), "--save-every", "0", "--quiet", *extra]
    start = time.time()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("summary ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr[-2000:]}")
    fields = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    summary = {k: float(v) for k, v in fields.items() if k not in ("task", "strategy", "plo")}
    print(f"  {task} {row} seed {seed}: sparse return {summary['sparse_return']:.2f}", flush=True)
    return summary | {"wall": time.time() - start}


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
    parser.add_argument("extra", nargs="*", help="extra flags for the script, after --")
    args = parser.parse_args()

    started = datetime.datetime.now(datetime.UTC)
    version = code_version(SCRIPT, "cleanfive/envs/microrts.py")
    jobs = [(task, row, seed) for task in args.tasks for row in args.rows for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda job: run_one(*job, args.total_timesteps, args.extra), jobs))
    runs = {job[:2]: [] for job in jobs}
    for job, summary in zip(jobs, results, strict=True):
        runs[job[:2]].append(summary)
    wall = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    command = (
        f"uv run --all-extras python benchmark/{Path(__file__).name} --tasks {' '.join(args.tasks)} "
        f"--rows {' '.join(args.rows)} --seeds {' '.join(map(str, args.seeds))} "
        f"--total-timesteps {args.total_timesteps} --jobs {args.jobs}"
        + (f" -- {' '.join(args.extra)}" if args.extra else "")
    )
    header = ["| Strategy | " + " | ".join(args.tasks) + " |", "|---" * (1 + len(args.tasks)) + "|"]
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {started:%Y-%m-%d %H:%M} UTC, commit `{version}`, "
        f"machine: {machine()}; {wall / 60:.0f} min in all, {args.jobs} run(s) at a time, 1-minute load average at "
        f"the end {os.getloadavg()[0]:.1f}.",
        "",
        f"Command: `{command}`. Every cell is **ours / thesis**: the sparse return (R_M) of the last 10 training "
        f"episodes, mean ± std over {len(args.seeds)} seed(s) of {args.total_timesteps:,} steps each; thesis: Table "
        "8.1 (10 seeds of 10M steps, one unit per decision).",
        "",
        *header,
    ]
    for row in args.rows:
        cells = []
        for task in args.tasks:
            mean, std = THESIS[row][TASKS.index(task)]
            cells.append(f"{mean_std([r['sparse_return'] for r in runs[(task, row)]])} / {mean:.2f} ± {std:.2f}")
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
                f"{mean_std([r.get('eval_sparse_return', np.nan) for r in src])} · "
                f"{mean_std([r['t_first'] for r in src], 1, '%')} · "
                f"{np.mean([r['plo_skips_main'] for r in src]):.0f} · {np.mean([r['SPS'] for r in src]):.0f}"
            )
        lines.append(f"| {ROWS[row][0]} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if args.no_docs:
        return
    write_block(DOC, BEGIN, END, table)


if __name__ == "__main__":
    main()
