"""Screen of cleanfive/ppo_lstm_selfplay.py's settings on Connect Four: many short runs at once, 2 seeds each.

A screen, not a result: each setting runs a compressed schedule (its own --total-timesteps, so that the learning rate
and the entropy coefficient anneal within it) for at most ``--seconds`` of wall time, all settings and seeds at once
(``--jobs``), one torch thread each, on the CPU. The table gives, per setting and seed, the steps reached, the mean win
rate against ``lookahead`` over the last 4 evaluations that played it, and the last TrueSkill μ. It picks what to
benchmark with ppo_lstm_selfplay_learning.py (3 seeds x 30 CPU minutes); it was run on a lent machine's 16 cores.

The ``ladder`` screen runs on today's defaults (the others on those before 36e718a) and reports the search ladder
too: the waiting side's bootstrap before its fix (``boot-before``: the script of d753023, the commit before it, with
today's worlds and bots) against today's (``base``), and training opponents that follow the agent up the ladder.

    uv run --all-extras python benchmark/connect4_screen.py --screen long --jobs 16
    uv run --all-extras python benchmark/connect4_screen.py --screen ladder --seeds 1 2 3 --jobs 16
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
    "boot-before": [],  # the script at BEFORE[setting]
    "ladder": ["--bot-opponents", "random", "greedy", "lookahead", "search1", "search2"],
    "upper": ["--bot-opponents", "lookahead", "search1", "search2"],
    "ladder75": ["--bot-opponents", "random", "greedy", "lookahead", "search1", "search2"]
    + ["--bot-fraction", "0.75", "--bot-fraction-end", "0.75"],
}
BEFORE = {"boot-before": "d753023"}  # setting: the commit of the script it runs (the rest: this tree's)
# per screen: total timesteps (ep2's 1.8x), wall seconds per run, the settings, the flags under every setting, and
# the references whose win rates the table shows
SCREENS = {
    "long": (1_000_000, 530, ["base", "h20", "h10", "ep2", "h20ep2", "look", "ent", "lr5e-4"], OLD, ["lookahead"]),
    "short": (400_000, 215, ["base", "h10", "h5", "h10look", "h10lr2e-3", "lr2e-3", "h10looklr2e-3", "look"], OLD,
              ["lookahead"]),
    "ladder": (600_000, 330, ["boot-before", "base", "ladder", "upper", "ladder75"], [],
               ["lookahead", "search1", "search2"]),
}  # fmt: skip
PARSER = pv.parser(__file__, __doc__, extra=False, results="connect4_screen")
PARSER.add_argument("--screen", choices=sorted(SCREENS), default="long", help="which screen of SCREENS to run")
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="training seeds of every arm")
PARSER.add_argument("--jobs", type=int, default=16, help="runs at once, one torch thread each")


def flags(setting: str, steps: int, base: list[str]) -> list[str]:
    extra = SETTINGS[setting]
    steps = int(steps * 1.8) if "--update-epochs" in extra else steps
    return [*base, *extra, "--total-timesteps", str(steps), "--no-cuda", "--save-every", "0"]


def script(setting: str) -> str:
    """The training script of ``setting``: this tree's, or that of BEFORE[setting] (provenance.script_at)."""
    return str(pv.script_at(BEFORE[setting], SCRIPT) if setting in BEFORE else SCRIPT)


def run(setting: str, seed: int, steps: int, seconds: float, base: list[str]) -> dict:
    """One run's evaluations (step, seconds, μ, win rates) in its first ``seconds`` of wall time; then it is stopped."""
    rows = []
    command = [sys.executable, "-u", script(setting), "--seed", str(seed), *flags(setting, steps, base)]
    for line, _ in pv.stream(command, 1):
        if line.startswith("eval "):
            if (row := pv.eval_row(line))["time"] > seconds:
                break
            rows.append(row)
    return {"rows": rows}


def main() -> None:
    args = PARSER.parse_args()
    steps, seconds, settings, base, shown = SCREENS[args.screen]
    block = f"connect4-screen-{args.screen}"
    if not args.no_docs:
        pv.markers(DOC, block)
    jobs = [(s, seed) for s in settings for seed in args.seeds]

    def kept_or_run(setting: str, seed: int) -> dict | None:
        expected = {"setting": setting, "seed": seed, "flags": flags(setting, steps, base), "seconds": seconds}
        path = args.results / args.screen / f"{setting}_{seed}.json"
        train = partial(run, setting, seed, steps, seconds, base)
        return pv.kept_or_run(path, f"{setting} seed {seed}", expected, args.from_results, train, (SCRIPT,))

    with ThreadPoolExecutor(args.jobs) as pool:
        found = dict(zip(jobs, pool.map(lambda job: kept_or_run(*job), jobs), strict=True))
    kept = [run for run in found.values() if run is not None]
    pv.check(bool(kept), f"no kept results in {args.results / args.screen}; run without --from-results")
    codes, machines, dates = (sorted({run[k] for run in kept}) for k in ("code", "machine", "date"))
    source = f". Runs from {dates[0]} to {dates[-1]} at commit(s) {', '.join(codes)} on {'; '.join(machines)}"
    defaults = f"`{' '.join(base)}` (the defaults before 36e718a), " if base else "today's defaults, "
    note = (
        f". Flags of every run: {defaults}the setting's, `--total-timesteps {steps}` (1.8x that with 2 epochs), "
        f"`--no-cuda`; the evaluations of each run's first {seconds} s of wall time."
    )
    lines = [*pv.header(PARSER, args, None, source, note)]
    head = ", ".join(f"vs {name}" for name in shown)
    lines += ["| setting | flags | " + " | ".join(f"seed {s}: steps, {head}, μ" for s in args.seeds) + " |"]
    lines += ["|---|---|" + "---|" * len(args.seeds)]
    for setting in settings:
        cells = []
        for seed in args.seeds:
            rows = (found[setting, seed] or {"rows": []})["rows"]
            rates = []
            for name in shown:  # the mean of the last 4 evaluations that played it (none: never within 10 μ of it)
                late = [r[name] for r in rows if name in r][-4:]
                rates.append(f"{np.mean(late):.2f}" if late else "—")
            cells.append(f"{rows[-1]['step'] / 1e6:.2f}M, {', '.join(rates)}, {rows[-1]['mu']:.1f}" if rows else "—")
        what = (
            f"the script of {BEFORE[setting]}" if setting in BEFORE else f"`{' '.join(SETTINGS[setting]) or '(none)'}`"
        )
        lines.append(f"| {setting} | {what} | " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, block, table)


if __name__ == "__main__":
    main()
