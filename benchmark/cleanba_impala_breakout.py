"""Learning curves of cleanfive/cleanba_impala.py on Breakout-v5 with its default settings, several seeds.

Runs one seed after the other (each has the whole machine) under benchmark/out/cleanba_impala_breakout/, and
tabulates per seed and across seeds the games played, the mean return of the last 100 games, the best 100-game mean,
wall time and steps per second. Writes a return-vs-steps plot and the table into docs/cleanba_impala.md.

    uv run --all-extras python benchmark/cleanba_impala_breakout.py --total-timesteps 2048 --no-docs   # a smoke run
"""

import os
import shutil
import sys

import numpy as np
import provenance as pv

SCRIPT = pv.ROOT / "cleanfive" / "cleanba_impala.py"
DOC = pv.ROOT / "docs" / "cleanba_impala.md"
PLOT = pv.ROOT / "docs" / "img" / "cleanba_impala_breakout.png"
OUT = pv.ROOT / "benchmark" / "out" / "cleanba_impala_breakout"
WINDOW = 100  # games in the moving mean
PARSER = pv.parser(__file__, __doc__)
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds, one run each")
PARSER.add_argument("--total-timesteps", type=int, default=None, help="per seed (default: the script's)")


def run_seed(seed: int, flags: list[str]) -> dict:
    """Run one seed to the end; its games (steps, returns) and final numbers."""
    out = OUT / f"seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [sys.executable, str(SCRIPT), "--env-id", "Breakout-v5", "--seed", str(seed), *flags]
    print("$", " ".join(cmd), flush=True)
    final = pv.last_line(cmd, "final ", cwd=out)
    games = pv.scalars(next((out / "runs").iterdir())).get("charts/episodic_return", [])
    steps, returns = np.array([s for s, _ in games]), np.array([v for _, v in games])
    row = {"steps": steps, "returns": returns, "total": int(final["global_step"]), "sps": float(final["SPS"])}
    print(f"  seed {seed}: {len(games)} games, {row['total']} steps, {row['sps']:.0f} steps/s", flush=True)
    return row | {"wall": float(final["wall"][:-1])}


def moving_mean(x: np.ndarray) -> np.ndarray:
    """Mean of the last WINDOW values (fewer at the start)."""
    cumsum = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, len(x) + 1)
    return (cumsum[idx] - cumsum[np.maximum(idx - WINDOW, 0)]) / np.minimum(idx, WINDOW)


def main() -> None:
    args = PARSER.parse_args()

    # the code being measured: the commit, and whether the script or its env helper differ from it
    code, load_before = pv.code_version(SCRIPT, "cleanfive/envs/atari.py"), os.getloadavg()[0]
    steps = ["--total-timesteps", str(args.total_timesteps)] if args.total_timesteps is not None else []
    runs = {seed: run_seed(seed, [*args.extra, *steps]) for seed in args.seeds}

    played = [r["returns"] for r in runs.values()]
    rows = [
        ("env steps", [r["total"] for r in runs.values()], ".0f", 1.0),
        ("games played", [len(g) for g in played], ".0f", 1.0),
        (f"mean return, last {WINDOW} games", [g[-WINDOW:].mean() if len(g) else np.nan for g in played], ".1f", 1.0),
        (f"best {WINDOW}-game mean return", [moving_mean(g).max() if len(g) else np.nan for g in played], ".1f", 1.0),
        ("wall time of the training loop (min)", [r["wall"] for r in runs.values()], ".1f", 60.0),
        ("steps per second", [r["sps"] for r in runs.values()], ".0f", 1.0),
    ]
    note = " (seeds run one after the other; each has the whole machine). Returns are real game scores (unclipped, all "
    source = f"; 1-minute load average before the runs: {load_before:.2f}."
    table = "\n".join(
        [*pv.header(PARSER, args, code, source, note + "lives)."), *pv.seed_table(args.seeds, rows, counts=False)]
    )
    print(table)
    if args.no_docs:
        return

    fig, ax = pv.subplots(figsize=(7, 4))
    for seed, r in runs.items():
        ax.plot(r["steps"] / 1e6, moving_mean(r["returns"]), label=f"seed {seed}")
    ax.set(xlabel="environment steps (millions)", ylabel=f"episodic return (mean of {WINDOW} games)")
    ax.set_title("cleanba_impala.py on Breakout-v5")
    pv.save_plot(fig, PLOT)
    image = f"![Breakout-v5 episodic return against environment steps](img/{PLOT.name})"
    pv.write_block(DOC, "breakout", f"{table}\n\n{image}")


if __name__ == "__main__":
    main()
