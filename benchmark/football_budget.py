"""The budget VMAS football's best recipe would need against `vmas_ai` (issue 51), read from its kept runs.

Trains nothing: for each seed of a learning-benchmark block (benchmark/results/learning/<block>/seed*.json, kept by
`benchmark/ppo_lstm_selfplay_learning.py`) it fits a straight line, by least squares, to the in-run win rates against
`vmas_ai` (64 games an evaluation, sampled actions) over the last quarter of the run's steps, and extrapolates it to
the step where it reaches --target, priced at the run's own CPU seconds a step. A trend, not a result: the line may
bend. Prints the table and (unless --no-docs) writes it and a plot to the script page's football_budget block.

    uv run --all-extras python benchmark/football_budget.py --blocks football_ladder_top2_16m football_bot_ladder_16m
"""

import json

import numpy as np
import provenance as pv

PARSER = pv.parser(__file__, __doc__, extra=False, results="learning")
PARSER.add_argument("--blocks", nargs="+", default=["football_ladder_top2_16m"], help="kept learning blocks")
PARSER.add_argument("--bot", default="vmas_ai", help="the reference whose in-run win rate is fitted")
PARSER.add_argument("--target", type=float, default=0.40, help="the win rate (of all games) to extrapolate to")
PARSER.add_argument("--block", default="football_budget", help="the docs block to write")
DOC = pv.ROOT / "docs" / "ppo_lstm_selfplay.md"
PLOT = pv.ROOT / "docs" / "img" / "ppo_lstm_selfplay_football_budget.png"
LAST = 0.25  # the share of the run's steps (its last) whose evaluations the line is fitted to


def trend(run: dict, bot: str, target: float) -> dict:
    """The fitted line of one kept run, its value at the run's end, and where (M steps, never before the end) and at
    what CPU cost it reaches ``target``; ``points``: every evaluation's (M steps, win rate), for the plot."""
    rows = [row for row in run["rows"] if bot in row]
    points = np.array([(row["step"] / 1e6, row[bot]) for row in rows])
    end = points[-1, 0]
    tail = points[points[:, 0] >= (1 - LAST) * end]
    (slope, intercept), cov = np.polyfit(tail[:, 0], tail[:, 1], 1, cov=True)
    reach = max((target - intercept) / slope, end) if slope > 0 else float("inf")
    won, _, lost = run["final"]["results"][bot]
    return {
        "points": points,
        "start": tail[0, 0],
        "end": end,
        "line": (slope, intercept),
        "slope_se": float(np.sqrt(cov[0, 0])),
        "at_end": slope * end + intercept,
        "reach": reach,
        "cpu_end": rows[-1]["cpu"] / 60,
        "cpu_reach": reach / end * rows[-1]["cpu"] / 60,  # at the run's own CPU time a step
        "final": (won, won / max(won + lost, 1e-9), run["final"]["games"]),
        "evaluations": len(tail),
    }


def main() -> None:
    args = PARSER.parse_args()
    runs = {}
    for block in args.blocks:
        paths = sorted((args.results / block).glob("seed*.json"))
        pv.check(bool(paths), f"no kept runs in {args.results / block}: run the learning benchmark for that block")
        runs |= {(block, int(p.stem[4:])): json.loads(p.read_text()) for p in paths}
    fits = {key: trend(run, args.bot, args.target) for key, run in runs.items()}
    source = (
        f" from the kept runs of {', '.join(f'`{b}`' for b in args.blocks)}: {pv.kept_provenance([*runs.values()])}"
    )
    note = (
        f" Each seed's in-run win rates against `{args.bot}` (64 games an evaluation, sampled actions) over the last "
        f"quarter of its steps, fitted by a straight line and extrapolated to {args.target:.2f} of all games won, at "
        "the run's own CPU minutes a step (its machine's: the seeds did not all run on one). A trend, not a "
        "measurement: the line may bend or flatten past the runs' end."
    )
    lines = pv.header(PARSER, args, None, source, note)
    lines += [
        f"| block | seed | final: won (of decided), games | evaluations fitted | slope (per M steps) "
        f"| fitted at the end | fitted {args.target:.2f} at (M steps) | CPU min at the end | CPU min there |",
        "|---|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    for (block, seed), f in fits.items():
        reach = "already" if f["reach"] <= f["end"] else f"{f['reach']:.1f}" if np.isfinite(f["reach"]) else "never"
        won, decided, games = f["final"]
        lines.append(
            f"| `{block}` | {seed} | {won:.2f} ({decided:.2f}), {games} | {f['evaluations']} "
            f"| {f['line'][0]:+.3f} ± {f['slope_se']:.3f} | {f['at_end']:.2f} | {reach} | {f['cpu_end']:.0f} "
            f"| {f['cpu_reach']:.0f} |"
        )
    fig, ax = pv.subplots(figsize=(7, 4))
    for (block, seed), f in fits.items():
        (points,) = ax.plot(*f["points"].T, lw=0.8, alpha=0.6)
        x = np.array([f["start"], f["reach"] if np.isfinite(f["reach"]) else f["end"]])
        ax.plot(x, f["line"][0] * x + f["line"][1], "--", color=points.get_color(), label=f"{block} seed {seed}")
    ax.axhline(args.target, color="k", lw=0.8, label=f"target {args.target:.2f}")
    ax.legend(loc="upper left", fontsize=7)
    ax.set(xlabel="M environment steps", ylabel=f"in-run win rate vs {args.bot}", ylim=(0, 0.6))
    pv.save_plot(fig, PLOT)
    lines += ["", f"![In-run win rate against {args.bot}, and each seed's fitted line](img/{PLOT.name})"]
    text = "\n".join(lines)
    print(text)
    if not args.no_docs:
        pv.write_block(DOC, args.block, text)


if __name__ == "__main__":
    main()
