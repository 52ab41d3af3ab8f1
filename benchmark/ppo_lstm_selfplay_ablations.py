"""OpenAI Five's data-quality ablations (Figure 5, Appendix M) at small scale, with cleanfive/ppo_lstm_selfplay.py.

Each group varies one flag around the script's defaults, for several seeds: batch size (``--num-envs`` 32, 64, 128),
sample reuse (``--update-epochs`` 1, 2, 4, 8; also per gradient step, the paper's axis), staleness (``--policy-lag``
0, 1, 4, 8) and team spirit (τ 0, annealed 0.3 → 1, 1; only on worlds with more than one hero per side). Every run
trains ``--updates`` versions and rates itself against the fixed references every ``--eval-every`` versions. The
table gives speedup(T) of Equation 2 (versions for the baseline to first reach TrueSkill T ÷ versions for the
experiment) per seed against the same seed's baseline, mean ± std over the seeds where both reached T; the plot,
mean TrueSkill against versions. Both go into docs/ppo_lstm_selfplay.md between the ``--block`` markers.

Each curve is kept as JSON under --results/<env-id>/ (committed); a rerun trains only the runs with no kept file of
these flags and budget, and ``--from-results`` remakes the table and plot from the files alone.

    uv run --all-extras python benchmark/ppo_lstm_selfplay_ablations.py --seeds 1 2 3 --updates 60 --jobs 2
"""

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import numpy as np
import provenance as pv

from cleanfive.envs.teams import world_defaults

SCRIPT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
DOC = pv.ROOT / "docs" / "ppo_lstm_selfplay.md"
MEASURED = (SCRIPT, "cleanfive/envs", "cleanfive/trueskill_league.py")  # the code a kept curve is stamped with
TAU_0 = ["--team-spirit-start", "0", "--team-spirit-end", "0"]
TAU_1 = ["--team-spirit-start", "1", "--team-spirit-end", "1"]
# group -> (label, [(value label, flags)], index of the baseline)
GROUPS = {
    "batch": ("batch size (--num-envs, 64 steps each)", [(str(e), ["--num-envs", str(e)]) for e in (32, 64, 128)], 0),
    "reuse": ("sample reuse (passes per batch)", [(str(k), ["--update-epochs", str(k)]) for k in (1, 2, 4, 8)], 0),
    "staleness": ("staleness (policy lag, versions)", [(str(k), ["--policy-lag", str(k)]) for k in (0, 1, 4, 8)], 0),
    "team_spirit": ("team spirit τ", [("0", TAU_0), ("0.3 → 1", []), ("1", TAU_1)], 1),
}
DEFAULTS = {"--update-epochs": "4", "--policy-lag": "0"}  # script defaults (--num-envs: the world's, see canonical)
PER_STEP = {"reuse": "sample reuse, per gradient step (versions × passes)"}  # also per gradient step
PARSER = pv.parser(__file__, __doc__, results="ablations")
PARSER.add_argument("--env-id", default="ConnectFour-v1", help="any two-sided world of the script")
PARSER.add_argument(
    "--groups", nargs="+", default=list(GROUPS), choices=list(GROUPS), help="groups of ablations to run"
)
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds of every arm")
PARSER.add_argument("--updates", type=int, default=60, help="versions (PPO updates) per run")
PARSER.add_argument("--eval-every", type=int, default=2, help="versions between TrueSkill evaluations")
PARSER.add_argument("--thresholds", type=float, nargs="+", default=[3.0, 5.0, 7.0], help="TrueSkill values T")
PARSER.add_argument("--jobs", type=int, default=1, help="runs in parallel (each gets one torch thread)")
PARSER.add_argument("--block", default="ablations", help="docs block (and plot name) to write")


def canonical(flags: list[str], env_id: str) -> tuple[str, ...]:
    """The flags with the script's default values in world ``env_id`` left out, so that identical configurations run
    once."""
    defaults = DEFAULTS | {"--num-envs": str(world_defaults(env_id)["num_envs"])}
    pairs = [(flags[i], flags[i + 1]) for i in range(0, len(flags), 2)]
    return tuple(x for k, v in pairs if defaults.get(k) != v for x in (k, v))


def flag_value(flags: list[str], name: str, default: int) -> int:
    """The value of ``name`` in a list of flags (the last one given), else ``default``."""
    values = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == name]
    return int(values[-1]) if values else default


def run_name(flags: tuple[str, ...]) -> str:
    """The --exp-name of a configuration's runs (runs started in one second need their own)."""
    return "ablation_" + ("_".join(flag.lstrip("-") for flag in flags) or "defaults")


def train(flags: tuple[str, ...], seed: int, args: argparse.Namespace) -> dict:
    """Train one configuration and seed for args.updates versions; its TrueSkill curve against versions."""
    num_envs = flag_value([*flags, *args.extra], "--num-envs", world_defaults(args.env_id)["num_envs"])
    step = num_envs * flag_value([*flags, *args.extra], "--num-steps", 64)
    cmd = [sys.executable, "-u", str(SCRIPT), "--env-id", args.env_id, "--seed", str(seed), *flags, *args.extra]
    cmd += ["--total-timesteps", str(args.updates * step), "--eval-every", str(args.eval_every)]
    start = time.time()
    for line, _ in pv.stream([*cmd, "--save-every", "0", "--exp-name", run_name(flags)], 1 if args.jobs > 1 else None):
        if line.startswith("eval "):  # progress: one line per TrueSkill evaluation
            print(f"  {' '.join(flags) or 'defaults'} seed {seed}: {line}", flush=True)
    runs = (pv.ROOT / "runs").glob(f"{args.env_id}__{run_name(flags)}__{seed}__*")
    run = max(runs, key=lambda d: int(d.name.rsplit("_", 1)[1]))  # the latest: its name ends in its start time
    if not (mu := pv.scalars(run).get("charts/trueskill_mu")):
        sys.exit(f"error: {run} has no TrueSkill evaluations")
    return {"versions": [s // step for s, _ in mu], "mu": [v for _, v in mu], "seed": seed, "wall": time.time() - start}


def kept_or_train(flags: tuple[str, ...], seed: int, args: argparse.Namespace) -> dict | None:
    """The kept curve of one configuration and seed if it has this budget; else, unless --from-results, train it."""
    expected = {"flags": list(flags), "extra": args.extra, "updates": args.updates, "eval_every": args.eval_every}
    path = args.results / args.env_id / f"{run_name(flags)}__seed{seed}.json"
    label = f"{' '.join(flags) or 'defaults'} seed {seed}"
    return pv.kept_or_run(path, label, expected, args.from_results, partial(train, flags, seed, args), MEASURED)


def main() -> None:
    args = PARSER.parse_args()
    groups = [g for g in args.groups if g != "team_spirit" or args.env_id.startswith(("Moba", "Vmas"))]
    if skipped := set(args.groups) - set(groups):
        print(f"skipped {sorted(skipped)}: {args.env_id} has one hero per side, so team spirit changes nothing")
    varied = {flag for g in groups for _, flags in GROUPS[g][1] for flag in flags[::2]}
    # extra flags come last on the command line and would win, also as --flag=value
    if clash := sorted(varied & {arg.split("=")[0] for arg in args.extra}):
        pv.usage_error(f"{' '.join(clash)} after -- would override what --groups {' '.join(groups)} varies; drop it")
    if not args.no_docs:
        pv.markers(DOC, args.block)

    started = time.time()
    configs = sorted({canonical(flags, args.env_id) for g in groups for _, flags in GROUPS[g][1]})
    jobs = [(flags, seed) for flags in configs for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        curves = dict(zip(jobs, pool.map(lambda job: kept_or_train(*job, args), jobs), strict=True))
    where = os.path.relpath(args.results.resolve() / args.env_id, pv.ROOT)
    if missing := [job for job, kept in curves.items() if kept is None]:
        pv.usage_error(f"{len(missing)} of the {len(jobs)} runs are not kept in {where}; run without --from-results")

    run_hours = sum(kept["wall"] for kept in curves.values()) / 3600
    source = f" from {len(jobs)} runs kept in `{where}`, {pv.kept_provenance(list(curves.values()))}; "
    source += f"{run_hours:.1f} run-hours; this sitting {(time.time() - started) / 60:.0f} min."
    note = (
        f". {len(args.seeds)} seeds per configuration, {args.updates} versions each. Cells: speedup(T) against the "
        "group's baseline (b), mean ± std over the seeds where both runs reached T, with how many did (— where none "
        "did), and the seeds where only one of the two reached T. Final μ: mean ± std of the last evaluation."
    )
    lines = [
        *pv.header(PARSER, args, None, source, note),
        "| ablation | value | " + " | ".join(f"speedup(T = {t:g})" for t in args.thresholds) + " | final μ |",
        "|---|---|" + "---|" * (len(args.thresholds) + 1),
    ]

    def curve(flags: list[str], seed: int, per_step: bool) -> tuple[list[int], list[float]]:
        """(versions, TrueSkill) of one run; per gradient step, the versions times the passes per batch."""
        kept = curves[(canonical(flags, args.env_id), seed)]
        passes = flag_value(flags, "--update-epochs", 4) if per_step else 1
        return [v * passes for v in kept["versions"]], kept["mu"]

    views = [(g, GROUPS[g][0], False) for g in groups] + [(g, PER_STEP[g], True) for g in groups if g in PER_STEP]
    for g, label, per_step in views:
        _, values, base = GROUPS[g]
        for i, (name, flags) in enumerate(values):
            cells = []
            for t in args.thresholds:
                ratios = [
                    pv.speedup(curve(values[base][1], s, per_step), curve(flags, s, per_step), t) for s in args.seeds
                ]
                ok = np.array([r for r in ratios if 0 < r < np.inf])  # both reached T
                missed, beyond = sum(r == 0 for r in ratios), sum(r == np.inf for r in ratios)  # only one reached T
                cell = f"{ok.mean():.2f} ± {ok.std():.2f} ({ok.size}/{len(ratios)})" if ok.size else "—"
                cell += f", {missed} never reached T" if missed else ""
                cells.append(cell + (f", {beyond} reached T and the baseline not" if beyond else ""))
            final = [curves[(canonical(flags, args.env_id), seed)]["mu"][-1] for seed in args.seeds]
            value = f"{name} (b)" if i == base else name
            lines.append(f"| {label} | {value} | {' | '.join(cells)} | {np.mean(final):.2f} ± {np.std(final):.2f} |")
    table = "\n".join(lines)
    print(table)
    if args.no_docs:
        return

    fig, axes = pv.subplots(1, len(views), figsize=(4.2 * len(views), 3.6), squeeze=False)
    for ax, (g, label, per_step) in zip(axes[0], views, strict=True):
        for name, flags in GROUPS[g][1]:
            runs = [curve(flags, seed, per_step) for seed in args.seeds]
            mus = np.array([mu for _, mu in runs])
            (line,) = ax.plot(runs[0][0], mus.mean(0), label=name)
            ax.fill_between(runs[0][0], mus.min(0), mus.max(0), color=line.get_color(), alpha=0.15, linewidth=0)
        xlabel = "gradient steps (versions × passes)" if per_step else "versions (PPO updates)"
        ax.set(title=label, xlabel=xlabel, ylabel=f"TrueSkill μ, mean of {len(args.seeds)} seeds (band: min to max)")
    plot = pv.ROOT / "docs" / "img" / f"ppo_lstm_selfplay_{args.block}.png"
    pv.save_plot(fig, plot)
    pv.write_block(DOC, args.block, f"{table}\n\n![TrueSkill against versions, per ablation](img/{plot.name})")


if __name__ == "__main__":
    main()
