"""Screen of cleanfive/ppo_lstm_selfplay.py's settings on Connect Four: many short runs at once, 2 seeds each.

A screen, not a result: each setting runs a compressed schedule (its own --total-timesteps, so that the learning rate
and the entropy coefficient anneal within it) for at most ``--seconds`` of wall time, all settings and seeds at once
(``--jobs``), one torch thread each, on the CPU. The table gives, per setting and seed, the steps reached, the mean win
rate against ``lookahead`` over the last 4 evaluations that played it, and the last TrueSkill μ. It picks what to
benchmark with ppo_lstm_selfplay_learning.py (3 seeds x 30 CPU minutes); it was run on a lent machine's 16 cores.

    uv run --all-extras python benchmark/connect4_screen.py --screen long --jobs 16
"""

import sys
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import provenance as pv

SCRIPT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
DOC = pv.ROOT / "docs" / "ppo_lstm_selfplay.md"
# the settings, each on top of Connect Four's defaults before 36e718a (a horizon of 100 plies, learning rate 1e-3),
# named here so that a later default changes no setting; ep2: fewer epochs buy steps, hence more of them
OLD = ["--horizon-seconds", "100", "--learning-rate", "0.001"]
SETTINGS = {
    "base": [],
    "h20": ["--horizon-seconds", "20"],
    "h10": ["--horizon-seconds", "10"],
    "h5": ["--horizon-seconds", "5"],
    "ep2": ["--update-epochs", "2"],
    "h20ep2": ["--horizon-seconds", "20", "--update-epochs", "2"],
    "look": ["--bot-opponents", "lookahead"],
    "h10look": ["--horizon-seconds", "10", "--bot-opponents", "lookahead"],
    "ent": ["--ent-coef", "0.003", "--ent-coef-final", "0.0003"],
    "lr5e-4": ["--learning-rate", "0.0005"],
    "lr2e-3": ["--learning-rate", "0.002"],
    "h10lr2e-3": ["--horizon-seconds", "10", "--learning-rate", "0.002"],
    "h10looklr2e-3": ["--horizon-seconds", "10", "--bot-opponents", "lookahead", "--learning-rate", "0.002"],
}
# per screen: total timesteps (ep2's 1.8x), wall seconds per run, the settings
SCREENS = {
    "long": (1_000_000, 530, ["base", "h20", "h10", "ep2", "h20ep2", "look", "ent", "lr5e-4"]),
    "short": (400_000, 215, ["base", "h10", "h5", "h10look", "h10lr2e-3", "lr2e-3", "h10looklr2e-3", "look"]),
}
PARSER = pv.parser(__file__, __doc__, extra=False, results="connect4_screen")
PARSER.add_argument("--screen", choices=sorted(SCREENS), default="long")
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
PARSER.add_argument("--jobs", type=int, default=16, help="runs at once, one torch thread each")


def flags(setting: str, steps: int) -> list[str]:
    extra = SETTINGS[setting]
    steps = int(steps * 1.8) if "--update-epochs" in extra else steps
    return [*OLD, *extra, "--total-timesteps", str(steps), "--no-cuda", "--save-every", "0"]


def run(setting: str, seed: int, steps: int, seconds: float) -> dict:
    """One run's evaluations (step, seconds, μ, win rates) in its first ``seconds`` of wall time; then it is stopped."""
    rows = []
    for line, _ in pv.stream([sys.executable, "-u", str(SCRIPT), "--seed", str(seed), *flags(setting, steps)], 1):
        if line.startswith("eval "):
            if (row := pv.eval_row(line))["time"] > seconds:
                break
            rows.append(row)
    return {"rows": rows}


def main() -> None:
    args = PARSER.parse_args()
    steps, seconds, settings = SCREENS[args.screen]
    block = f"connect4-screen-{args.screen}"
    if not args.no_docs:
        pv.markers(DOC, block)
    jobs = [(s, seed) for s in settings for seed in args.seeds]

    def kept_or_run(setting: str, seed: int) -> dict | None:
        expected = {"setting": setting, "seed": seed, "flags": flags(setting, steps), "seconds": seconds}
        path = args.results / args.screen / f"{setting}_{seed}.json"
        train = partial(run, setting, seed, steps, seconds)
        return pv.kept_or_run(path, f"{setting} seed {seed}", expected, args.from_results, train, (SCRIPT,))

    with ThreadPoolExecutor(args.jobs) as pool:
        found = dict(zip(jobs, pool.map(lambda job: kept_or_run(*job), jobs), strict=True))
    kept = [run for run in found.values() if run is not None]
    pv.check(bool(kept), f"no kept results in {args.results / args.screen}; run without --from-results")
    codes, machines, dates = (sorted({run[k] for run in kept}) for k in ("code", "machine", "date"))
    source = f". Runs from {dates[0]} to {dates[-1]} at commit(s) {', '.join(codes)} on {'; '.join(machines)}"
    note = (
        f". Flags of every run: `{' '.join(OLD)}` (the defaults before 36e718a), the setting's, `--total-timesteps "
        f"{steps}` (1.8x that with 2 epochs), `--no-cuda`; the evaluations of each run's first {seconds} s of wall "
        "time."
    )
    lines = [*pv.header(PARSER, args, None, source, note)]
    lines += ["| setting | flags | " + " | ".join(f"seed {s}: steps, vs lookahead, μ" for s in args.seeds) + " |"]
    lines += ["|---|---|" + "---|" * len(args.seeds)]
    for setting in settings:
        cells = []
        for seed in args.seeds:
            rows = (found[setting, seed] or {"rows": []})["rows"]
            late = [r["lookahead"] for r in rows if "lookahead" in r][-4:]  # none: never within 10 μ of it
            vs = f"{np.mean(late):.2f}" if late else "—"
            cells.append(f"{rows[-1]['step'] / 1e6:.2f}M, {vs}, {rows[-1]['mu']:.1f}" if rows else "—")
        lines.append(f"| {setting} | `{' '.join(SETTINGS[setting]) or '(none)'}` | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, block, table)


if __name__ == "__main__":
    main()
