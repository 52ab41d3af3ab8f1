"""Learning benchmark of cleanfive/ppo_lstm_selfplay.py on one world: TrueSkill and win rates against time.

Runs the script once per seed, each for a fixed budget of wall-clock time or (``--clock cpu``) of its own CPU time
(``--jobs`` seeds at a time; with more than one job every run gets one torch thread), records the machine's load
average and the run's own CPU time at every evaluation, reads the evaluation lines it prints, and reports per seed
and across seeds: the wall time, CPU time and steps at which the win rate against a reference bot first reached a
threshold, and the TrueSkill reached. Writes a TrueSkill-vs-time plot and the generated table into the script's docs
page between the world's BENCHMARK markers.

    uv run --all-extras python benchmark/ppo_lstm_selfplay_learning.py --env-id ConnectFour-v1 --minutes 30
    uv run --all-extras python benchmark/ppo_lstm_selfplay_learning.py --env-id Moba5v5-v0 --seeds 1 2 3 --minutes 60 \
        --jobs 2 -- --num-heroes 3 --num-envs 32 --hidden-size 128
"""

import argparse
import ast
import datetime
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from provenance import code_version, cpu_seconds, machine, over_seeds, require_block, write_block

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
DOC = ROOT / "docs" / "ppo_lstm_selfplay.md"
EVAL_LINE = re.compile(r"^eval time=(?P<time>[\d.]+)s global_step=(?P<step>\d+) trueskill_mu=(?P<mu>[-\d.]+) .*$")
WIN = re.compile(r"win_vs_(\w+)=([\d.]+)")
# per world: its references weakest first (the script's default --references), the win-rate targets, the docs block
WORLDS = {
    "ConnectFour-v1": {
        "references": ["random", "greedy", "lookahead"],
        "targets": [("random", 0.95), ("lookahead", 0.60)],
        "block": "connect4",
        "world": "cleanfive/envs/board.py",
    },
    "Moba5v5-v0": {
        "references": ["random", "push", "lasthit"],
        "targets": [("random", 0.95), ("push", 0.5), ("lasthit", 0.5)],
        "block": "moba",
        "world": "cleanfive/envs/moba.py",
    },
    "VmasFootball-v0": {  # a goal ends the game, so a win is a goal scored first (draw: no goal in 500 steps)
        "references": ["random", "chase"],
        "targets": [("random", 0.5), ("chase", 0.5)],
        "block": "football",
        "world": "cleanfive/envs/football.py",
    },
}


def run_seed(
    env_id: str, seed: int, minutes: float, clock: str, threads: int | None, extra: list[str]
) -> tuple[list[dict], dict[str, float]]:
    """Run one seed for `minutes` of wall time (or of its own CPU time, when `clock` is "cpu"); return its
    evaluations (time, CPU time, step, mu, win rates) and the references' ratings it printed at start."""
    cmd = [sys.executable, "-u", str(SCRIPT), "--env-id", env_id, "--seed", str(seed), "--save-every", "0", *extra]
    env = os.environ | ({"OMP_NUM_THREADS": str(threads)} if threads else {})
    print("$", " ".join(cmd), flush=True)
    rows, ratings = [], {}
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env) as proc:
        start = time.time()
        try:
            for line in proc.stdout:
                if line.startswith("reference ratings: "):
                    ratings = ast.literal_eval(line.split(": ", 1)[1])
                match = EVAL_LINE.match(line.strip())
                if match:
                    row = {"time": float(match["time"]), "step": int(match["step"]), "mu": float(match["mu"])}
                    row["cpu"], row["load"] = cpu_seconds(proc.pid), os.getloadavg()[0]
                    row.update({k: float(v) for k, v in WIN.findall(line)})
                    rows.append(row)
                    print(f"  seed {seed}: {line.strip()}", flush=True)
                if (cpu_seconds(proc.pid) if clock == "cpu" else time.time() - start) > minutes * 60:
                    break
        finally:
            proc.kill()
    return rows, ratings


def first_reach(rows: list[dict], key: str, threshold: float) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, steps) of the first evaluation with rows[key] >= threshold, or nans."""
    for row in rows:
        if row.get(key, -np.inf) >= threshold:
            return row["time"], row["cpu"], row["step"]
    return np.nan, np.nan, np.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", choices=sorted(WORLDS), default="ConnectFour-v1")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--minutes", type=float, default=30.0, help="budget per seed, on --clock")
    parser.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="cpu: the run's own CPU time, fair on a shared machine"
    )
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once (>1: one torch thread each)")
    parser.add_argument("--no-docs", action="store_true", help="print the table only; do not touch docs/")
    parser.add_argument("--block", help="docs block (and plot) to write, if not the world's own: a variant's results")
    parser.add_argument("extra", nargs="*", help="extra flags for the script, after --")
    args = parser.parse_args()
    world = WORLDS[args.env_id]
    block = args.block or world["block"]
    if not args.no_docs:
        require_block(DOC, f"<!-- BENCHMARK:{block} BEGIN -->", f"<!-- BENCHMARK:{block} END -->")

    started = datetime.datetime.now(datetime.UTC)
    version = code_version(SCRIPT, world["world"], "cleanfive/envs/teams.py", "cleanfive/trueskill_league.py")
    threads = 1 if args.jobs > 1 else None
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            s: pool.submit(run_seed, args.env_id, s, args.minutes, args.clock, threads, args.extra) for s in args.seeds
        }
        results = {s: f.result() for s, f in futures.items()}
    runs = {s: rows for s, (rows, _) in results.items()}
    ratings = results[args.seeds[0]][1]
    # references weakest first; a reference appears in an evaluation only when it is within 10 TrueSkill points of
    # the agent (Appendix J)
    order = world["references"]
    references = sorted(
        {k for s in args.seeds for r in runs[s] for k in r if k not in ("time", "cpu", "step", "mu", "load")},
        key=lambda k: order.index(k) if k in order else len(order),
    )

    how = "one after the other" if args.jobs == 1 else f"{args.jobs} at a time, one torch thread each"
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {started:%Y-%m-%d %H:%M} UTC, commit "
        f"`{version}`, machine: {machine()}.",
        "",
        "Command: `uv run --all-extras python benchmark/"
        + Path(__file__).name
        + f" --env-id {args.env_id} --seeds {' '.join(map(str, args.seeds))} --minutes {args.minutes:g}"
        + (f" --clock {args.clock}" if args.clock != "wall" else "")
        + (f" --jobs {args.jobs}" if args.jobs > 1 else "")
        + (f" --block {args.block}" if args.block else "")
        + (f" -- {' '.join(args.extra)}" if args.extra else "")
        + f"` (seeds run {how}). Each evaluation plays the references within 10 TrueSkill points of the agent, "
        "so a win rate against a strong reference exists only once the agent is close to it. CPU time is the "
        "run's own (all its threads).",
        "",
        "| metric | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean ± std |",
        "|---|" + "---|" * (len(args.seeds) + 1),
    ]
    for key, threshold in world["targets"]:
        reach = {s: first_reach(runs[s], key, threshold) for s in args.seeds}
        for index, scale, unit in [(0, 60.0, "min"), (1, 60.0, "CPU min"), (2, 1e6, "M steps")]:
            cells = [reach[s][index] for s in args.seeds]
            lines.append(
                f"| first win rate ≥ {threshold:.0%} vs `{key}` ({unit}) | "
                + " | ".join("—" if np.isnan(c) else f"{c / scale:.2f}" for c in cells)
                + f" | {over_seeds(cells, '.2f', scale)} |"
            )
    for key in ["mu", *references]:
        played = {s: [r[key] for r in runs[s] if key in r] for s in args.seeds}
        finals = [played[s][-1] if played[s] else np.nan for s in args.seeds]
        best = [max(played[s]) if played[s] else np.nan for s in args.seeds]
        label = "TrueSkill μ" if key == "mu" else f"win rate vs `{key}`"
        for kind, values in [("final", finals), ("best", best)]:  # "—": never played (never within 10 points)
            cells = " | ".join("—" if np.isnan(v) else f"{v:.2f}" for v in values)
            lines.append(f"| {kind} {label} | {cells} | {over_seeds(values, '.2f')} |")
    for label, values in [
        ("environment steps per second", [r[-1]["step"] / r[-1]["time"] if r else np.nan for r in runs.values()]),
        ("CPU minutes used", [r[-1]["cpu"] / 60 if r else np.nan for r in runs.values()]),
        (
            "mean 1-minute load average (2 = both cores busy)",
            [np.mean([x["load"] for x in r]) if r else np.nan for r in runs.values()],
        ),
    ]:
        lines.append(f"| {label} | " + " | ".join(f"{v:.0f}" if v > 10 else f"{v:.2f}" for v in values) + " | |")
    table = "\n".join(lines)
    print(table)

    if args.no_docs:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plot = ROOT / "docs" / "img" / f"ppo_lstm_selfplay_{block}_trueskill.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    x, xlabel = ("cpu", "CPU time of the run (minutes)") if args.clock == "cpu" else ("time", "wall time (minutes)")
    for s in args.seeds:
        t = [r[x] / 60 for r in runs[s]]
        axes[0].plot(t, [r["mu"] for r in runs[s]], label=f"seed {s}")
        for ref in references:
            rows = [r for r in runs[s] if ref in r]
            axes[1].plot([r[x] / 60 for r in rows], [r[ref] for r in rows], ".-", label=f"seed {s} vs {ref}")
    for ref, mu in ratings.items():  # the references' ratings, fitted at the start of each run
        axes[0].axhline(mu, ls=":", color="gray")
        axes[0].annotate(ref, (0, mu), fontsize=7, color="gray", va="bottom")
    axes[0].set(xlabel=xlabel, ylabel="TrueSkill μ (random = 0)", title=f"TrueSkill, {args.env_id}")
    axes[1].set(xlabel=xlabel, ylabel="win rate", title="win rate vs references", ylim=(0, 1))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(plot, dpi=110)

    begin, end = f"<!-- BENCHMARK:{block} BEGIN -->", f"<!-- BENCHMARK:{block} END -->"
    write_block(
        DOC, begin, end, f"{table}\n\n![TrueSkill and win rates against {xlabel.split(' (')[0]}](img/{plot.name})"
    )


if __name__ == "__main__":
    main()
