"""Table 7.2 of Huang's thesis (invalid action masking vs penalties vs naive masking vs masking removed) with
cleanfive/ppo_gridnet_masked.py on the real Gym-µRTS, at a CPU budget.

The task: harvest resources (reward weights 0 1 0 0 0 0) against the passive bot on the basesWorkers maps. Runs
every strategy x map x seed as a subprocess, parses its final `summary` line and tabulates "ours / thesis" in the
thesis' columns ("Masking removed": the masking agent evaluated without its mask). Writes the table into
docs/ppo_gridnet_masked.md unless --no-docs.

    uv run --all-extras python benchmark/ppo_gridnet_masked_table72.py --maps 4x4 10x10 --seeds 1 2 3
"""

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import provenance as pv

SCRIPT = pv.ROOT / "cleanfive" / "ppo_gridnet_masked.py"
DOC = pv.ROOT / "docs" / "ppo_gridnet_masked.md"
PENALTIES = (-1.0, -0.1, -0.01, 0.0)
COLUMNS = ("r_episode", "a_null", "a_busy", "a_owner", "t_solve", "t_first")
# Table 7.2 (UAS, 4 seeds): (r_episode, a_null, a_busy, a_owner, t_solve %, t_first %); None = "-"
THESIS = {
    ("penalty", "4x4", -1.0): (0.00, 0.00, 0.00, 0.00, None, 0.53),
    ("penalty", "4x4", -0.1): (30.00, 0.02, 0.00, 0.00, 50.94, 0.52),
    ("penalty", "4x4", -0.01): (40.00, 0.02, 0.00, 0.00, 14.32, 0.51),
    ("penalty", "4x4", 0.0): (30.25, 2.17, 0.22, 2.70, 36.00, 0.60),
    ("penalty", "10x10", -1.0): (0.00, 0.00, 0.00, 0.00, None, 3.43),
    ("penalty", "10x10", -0.1): (0.00, 0.00, 0.00, 0.00, None, 2.18),
    ("penalty", "10x10", -0.01): (0.50, 0.00, 0.00, 0.00, None, 1.57),
    ("penalty", "10x10", 0.0): (0.25, 90.10, 0.00, 102.95, None, 3.41),
    ("penalty", "16x16", -1.0): (0.25, 0.00, 0.00, 0.00, None, 0.44),
    ("penalty", "16x16", -0.1): (0.75, 0.00, 0.00, 0.00, None, 0.44),
    ("penalty", "16x16", -0.01): (1.00, 0.02, 0.00, 0.00, None, 0.44),
    ("penalty", "16x16", 0.0): (1.00, 184.68, 0.00, 2.53, None, 0.40),
    ("masking", "4x4", None): (40.00, None, None, None, 8.67, 0.07),
    ("masking", "10x10", None): (40.00, None, None, None, 11.13, 0.05),
    ("masking", "16x16", None): (40.00, None, None, None, 11.47, 0.08),
    ("removed", "4x4", None): (33.53, 63.57, 0.00, 17.57, 76.42, None),
    ("removed", "10x10", None): (25.93, 128.76, 0.00, 7.75, 94.15, None),
    ("removed", "16x16", None): (17.32, 165.12, 0.00, 0.52, None, None),
    ("naive", "4x4", None): (59.61, None, None, None, 11.74, 0.07),
    ("naive", "10x10", None): (40.00, None, None, None, 13.97, 0.05),
    ("naive", "16x16", None): (40.00, None, None, None, 30.59, 0.10),
}
LABELS = {"penalty": "Invalid action penalty", "masking": "Invalid action masking", "removed": "Masking removed"}
LABELS["naive"] = "Naive invalid action masking"
PARSER = pv.parser(__file__, __doc__)
PARSER.add_argument(
    "--maps",
    nargs="+",
    default=["4x4", "10x10"],
    choices=["4x4", "10x10", "16x16"],
    help="maps of Table 7.2 to train on",
)
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds of every cell")
PARSER.add_argument("--total-timesteps", type=int, default=100_000, help="budget of every run (frames x envs)")
PARSER.add_argument("--jobs", type=int, default=1, help="runs in parallel (each uses ~1 core: torch + Java)")


def run_one(size: str, strategy: str, penalty: float | None, seed: int, steps: int, extra: list[str]) -> dict:
    """Train one configuration in a subprocess; return its summary fields (floats) and wall time."""
    cmd = [sys.executable, str(SCRIPT), "--map-path", f"maps/{size}/basesWorkers{size}.xml"]
    cmd += ["--reward-weight", "0", "1", "0", "0", "0", "0", "--num-selfplay-envs", "0", "--num-bot-envs", "8"]
    cmd += ["--bots", "passiveAI", "--max-steps", "2000", "--num-steps", "128", "--eval-episodes", "8"]
    cmd += ["--eval-games", "0", "--total-timesteps", str(steps), "--seed", str(seed), "--strategy", strategy]
    cmd += [*(["--invalid-penalty", str(penalty)] if penalty is not None else []), *extra]
    start = time.time()
    row = {k: float(v) for k, v in pv.last_line(cmd, "summary ").items() if k != "strategy"}
    label = f"{size} {strategy} {penalty} seed {seed}"
    print(f"  {label}: r={row['r_episode']:.2f} t_solve={row['t_solve']:.3g}", flush=True)
    return row | {"wall": time.time() - start}


def cell(values: list[float], thesis: float | None, percent: bool = False, solved: bool = False) -> str:
    """'ours / thesis': mean ± std over seeds (t_solve: over solving seeds, with the count)."""
    arr = np.array(values, dtype=float)
    ok = arr[~np.isnan(arr)]
    unit = "%" if percent else ""
    if ok.size == 0:
        ours = "-" if not solved else f"- (0/{arr.size})"
    else:
        ours = f"{ok.mean():.2f}{unit}" + (f" ± {ok.std():.2f}" if ok.size > 1 else "")
        ours += f" ({ok.size}/{arr.size})" if solved else ""
    return f"{ours} / {'-' if thesis is None else f'{thesis:.2f}{unit}'}"


def main() -> None:
    args = PARSER.parse_args()
    code, started = pv.code_version(SCRIPT, "cleanfive/envs/microrts.py"), time.time()
    configs = [("masking", None), ("naive", None)] + [("penalty", penalty) for penalty in PENALTIES]
    jobs = [(size, *config, seed) for size in args.maps for config in configs for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda j: run_one(*j, args.total_timesteps, args.extra), jobs))
    runs = {job[:3]: [] for job in jobs}
    for job, row in zip(jobs, rows, strict=True):
        runs[job[:3]].append(row)

    source = f"; {(time.time() - started) / 60:.0f} min in all, {args.jobs} run(s) at a time, 1-minute load average "
    source += f"at the end {os.getloadavg()[0]:.1f}."
    note = (
        f". Every cell is **ours / thesis**; ours is the mean ± std over {len(args.seeds)} seeds, thesis is Table 7.2 "
        "(UAS action space, 4 seeds, 500k steps). Our a_null / a_busy / a_owner are the Gridnet analogues per "
        "2000-frame episode (see the implementation details); the masking strategies never issue such actions, as in "
        'the thesis ("-").'
    )
    lines = [
        *pv.header(PARSER, args, code, source, note),
        "| Strategy | Map | r_invalid | r_episode | a_null | a_busy | a_owner | t_solve | t_first | invalid (ours) "
        "| SPS (ours) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    order = [("penalty", size, penalty) for size in args.maps for penalty in PENALTIES]  # Table 7.2's row order
    order += [(strategy, size, None) for strategy in ("masking", "removed", "naive") for size in args.maps]
    for strategy, size, penalty in order:
        src = runs[(size, "masking" if strategy == "removed" else strategy, penalty)]
        prefix = "eval_nomask_" if strategy == "removed" else ""
        thesis = THESIS[(strategy, size, penalty)]
        masked, cells = strategy in ("masking", "naive"), []
        for i, name in enumerate(COLUMNS):
            key = prefix + ("return" if prefix and name == "r_episode" else name)
            values = [np.nan if masked and name.startswith("a_") else r.get(key, np.nan) for r in src]
            cells.append(cell(values, thesis[i], name.startswith("t_"), solved=name == "t_solve" and not prefix))
        cells += [f"{np.mean([r[prefix + 'invalid'] for r in src]):.1f}", f"{np.mean([r['SPS'] for r in src]):.0f}"]
        r_invalid = "-" if penalty is None else f"{penalty:g}"
        lines.append(f"| {LABELS[strategy]} | {size} | {r_invalid} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, "table72", table)


if __name__ == "__main__":
    main()
