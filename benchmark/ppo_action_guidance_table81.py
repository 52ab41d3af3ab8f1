"""Table 8.1 of Huang's thesis (action guidance vs sparse and shaped rewards, with and without PLO) with
cleanfive/ppo_action_guidance.py on the real Gym-µRTS, at a CPU budget (--total-timesteps per run, 1% of the thesis'
10M by default; the shift and adaptation periods are fractions of it).

Runs every row of Table 8.1 on the three tasks for several seeds, each as a subprocess, and tabulates "ours / thesis"
from the final `summary` lines: the sparse return of the last 10 training episodes; then, ours only, the final
evaluation, t_first, PLO's skipped updates and the speed. Each run is kept as JSON under --results (committed); a
rerun trains only the missing runs, and --from-results tabulates the kept ones alone. Writes the tables into
docs/ppo_action_guidance.md unless --no-docs.

    uv run --all-extras python benchmark/ppo_action_guidance_table81.py --seeds 1 2 3 --jobs 2
"""

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import provenance as pv

SCRIPT = pv.ROOT / "cleanfive" / "ppo_action_guidance.py"
DOC = pv.ROOT / "docs" / "ppo_action_guidance.md"
MEASURED = (SCRIPT, "cleanfive/envs/microrts.py")  # the code a kept run is stamped with
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
PARSER = pv.parser(__file__, __doc__, results="table81")
PARSER.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS, help="the thesis' tasks to train on")
PARSER.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS), help="strategies of Table 8.1")
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds of every cell")
PARSER.add_argument("--total-timesteps", type=int, default=100_000, help="budget of every run (frames x envs)")
PARSER.add_argument("--jobs", type=int, default=1, help="runs in parallel (each uses ~1 core: torch + Java)")


def train(task: str, row: str, seed: int, args: argparse.Namespace) -> dict:
    """Train one configuration in a subprocess; its summary fields and wall time."""
    _, strategy, plo = ROWS[row]
    cmd = [sys.executable, str(SCRIPT), "--task", task, "--strategy", strategy, *(["--plo"] if plo else [])]
    cmd += ["--seed", str(seed), "--total-timesteps", str(args.total_timesteps), "--save-every", "0"]
    start, summary = time.time(), pv.last_line([*cmd, *args.extra], "summary ")
    summary = {k: float(v) for k, v in summary.items() if k not in ("task", "strategy", "plo")}  # the numbers
    print(f"  {task} {row} seed {seed}: sparse return {summary['sparse_return']:.2f}", flush=True)
    return summary | {"wall": time.time() - start, "task": task, "row": row, "seed": seed}


def kept_or_train(task: str, row: str, seed: int, args: argparse.Namespace) -> dict | None:
    """The kept result of one run if it has this budget and these extra flags; else, unless --from-results, train it."""
    path, expected = args.results / f"{task}__{row}__seed{seed}.json", {"total_timesteps": args.total_timesteps}
    run, label = partial(train, task, row, seed, args), f"{task} {row} seed {seed}"
    return pv.kept_or_run(path, label, expected | {"extra": args.extra}, args.from_results, run, MEASURED)


def mean_std(values: list[float], digits: int = 2, unit: str = "") -> str:
    """mean ± std over the seeds that have a value, with how many have one when some do not."""
    ok = np.array([v for v in values if not np.isnan(v)])
    text = f"{ok.mean():.{digits}f}{unit} ± {ok.std():.{digits}f}{unit}" if ok.size else "-"
    return text + (f" ({ok.size}/{len(values)})" if 0 < ok.size < len(values) else "")


def main() -> None:
    args, started = PARSER.parse_args(), time.time()
    # seed-major within a task, so that a partial run covers every row of a task before its next seed
    jobs = [(task, row, seed) for task in args.tasks for seed in args.seeds for row in args.rows]
    with ThreadPoolExecutor(args.jobs) as pool:
        found = list(pool.map(lambda job: kept_or_train(*job, args), jobs))
    runs = {(task, row): [] for task, row, _ in jobs}  # one entry per seed asked, {} where not run
    for job, kept in zip(jobs, found, strict=True):
        runs[job[:2]].append(kept or {})
    done = [kept for kept in found if kept is not None]
    pv.check(bool(done), f"no kept results in {args.results} for these runs; run without --from-results first")

    def cells(row: str, key: str, digits: int = 2, unit: str = "") -> list[str]:
        return [mean_std([kept.get(key, np.nan) for kept in runs[(task, row)]], digits, unit) for task in args.tasks]

    walls = [kept["wall"] / 60 for kept in done]
    where = args.results.resolve()
    where = where.relative_to(pv.ROOT) if where.is_relative_to(pv.ROOT) else where
    source = f" from {len(done)} of the {len(jobs)} runs asked for, kept in `{where}` and "
    source += f"{pv.kept_provenance(done)}; {min(walls):.1f}-{max(walls):.1f} min per run, {sum(walls) / 60:.1f} "
    source += f"run-hours in all; this sitting {(time.time() - started) / 60:.0f} min"
    note = (
        ". Every cell is **ours / thesis**: the sparse return (R_M) of the last 10 training episodes, mean ± std over "
        f"the seeds run (of {len(args.seeds)} asked; the count is given where some are missing), "
        f"{args.total_timesteps:,} steps each; thesis: Table 8.1 (10 seeds of 10M steps, one unit per decision)."
    )
    header = ["| Strategy | " + " | ".join(args.tasks) + " |", "|---" * (1 + len(args.tasks)) + "|"]
    lines = [*pv.header(PARSER, args, None, source, note), *header]
    for row in args.rows:
        thesis = [THESIS[row][TASKS.index(task)] for task in args.tasks]
        ours = [f"{c} / {m:.2f} ± {s:.2f}" for c, (m, s) in zip(cells(row, "sparse_return"), thesis, strict=True)]
        lines.append(f"| {ROWS[row][0]} | " + " | ".join(ours) + " |")
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
        columns = [cells(row, "eval_sparse_return"), cells(row, "t_first", 1, "%"), cells(row, "plo_skips_main", 0)]
        ours = [" · ".join(c) for c in zip(*columns, cells(row, "SPS", 0), strict=True)]
        lines.append(f"| {ROWS[row][0]} | " + " | ".join(ours) + " |")
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, "table81", table)


if __name__ == "__main__":
    main()
