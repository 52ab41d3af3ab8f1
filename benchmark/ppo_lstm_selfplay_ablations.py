"""OpenAI Five's data-quality ablations (Figure 5, Appendix M) at small scale, with cleanfive/ppo_lstm_selfplay.py.

Each group varies one flag around the script's defaults, every other flag equal, for several seeds:

* batch size: ``--num-envs`` 32, 64, 128 (batches of 2,048 / 4,096 / 8,192 steps; baseline the smallest);
* sample reuse: ``--update-epochs`` 1, 2, 4, 8 (passes over each batch; baseline 1). Reported twice: per version
  (each pass over the same fresh batch) and per gradient step (versions × passes), the paper's axis: there the
  optimizers ran at a fixed rate and reuse K meant K times less fresh data per step;
* staleness: ``--policy-lag`` 0, 1, 4, 8 (versions between the acting and the trained policy; baseline 0);
* team spirit: τ fixed at 0, annealed 0.3 → 1 (the default), fixed at 1 (baseline the annealed one); only on worlds
  with more than one hero per side, where τ changes anything.

Every run trains for ``--updates`` versions and rates itself against the fixed references every ``--eval-every``
versions (TrueSkill, Appendix J). The table gives speedup(T) of Equation 2 (versions for the baseline to first
reach TrueSkill T ÷ versions for the experiment) at each ``--thresholds`` value, per seed against the baseline of
the same seed, as mean ± std over the seeds where both reached T. A configuration shared by several groups (the
defaults) runs once. The plot shows mean TrueSkill against versions per group. Writes both into
docs/ppo_lstm_selfplay.md between the BENCHMARK:ablations markers unless --no-docs.

Each finished run's curve is read from its TensorBoard events (``charts/trueskill_mu``) and kept as a JSON file
under --results (default benchmark/results/ablations/<env-id>/, committed), with its commit, date and machine. A
rerun reuses the files whose flags, extra flags, --updates and --eval-every match and trains only the missing runs,
so a long set (the lane world's) can be completed over several sittings; ``--from-results`` remakes the table and
plot from the files alone (e.g. with other thresholds). ``--block`` names the docs block and the plot.

    uv run --all-extras python benchmark/ppo_lstm_selfplay_ablations.py --seeds 1 2 3 --updates 60 --jobs 2
"""

import argparse
import datetime
import os
import subprocess
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from provenance import code_version, keep, kept_provenance, load_kept, require_block, usage_error, write_block
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from cleanfive.trueskill_league import speedup  # Equation 2, from the league helper

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
DOC = ROOT / "docs" / "ppo_lstm_selfplay.md"
# group -> (label, [(value label, flags)], index of the baseline); a group in PER_STEP is also reported per gradient
# step, its versions multiplied by the passes per batch
GROUPS = {
    "batch": (
        "batch size (--num-envs, 64 steps each)",
        [(str(e), ["--num-envs", str(e)]) for e in (32, 64, 128)],
        0,
    ),
    "reuse": ("sample reuse (passes per batch)", [(str(k), ["--update-epochs", str(k)]) for k in (1, 2, 4, 8)], 0),
    "staleness": ("staleness (policy lag, versions)", [(str(k), ["--policy-lag", str(k)]) for k in (0, 1, 4, 8)], 0),
    "team_spirit": (
        "team spirit τ",
        [
            ("0", ["--team-spirit-start", "0", "--team-spirit-end", "0"]),
            ("0.3 → 1", []),
            ("1", ["--team-spirit-start", "1", "--team-spirit-end", "1"]),
        ],
        1,
    ),
}
DEFAULTS = {"--num-envs": "64", "--update-epochs": "4", "--policy-lag": "0"}  # flags equal to the script's defaults
PER_STEP = {"reuse": "sample reuse, per gradient step (versions × passes)"}


def canonical(flags: list[str]) -> tuple[str, ...]:
    """The flags with the script's default values left out, so that identical configurations run once."""
    pairs = [(flags[i], flags[i + 1]) for i in range(0, len(flags), 2)]
    return tuple(x for k, v in pairs if DEFAULTS.get(k) != v for x in (k, v))


def flag_value(flags: list[str], name: str, default: int) -> int:
    """The value of ``name`` in a list of flags (the last one given), else ``default``."""
    values = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == name]
    return int(values[-1]) if values else default


def run_name(flags: tuple[str, ...]) -> str:
    """The --exp-name of a configuration's runs (runs started in one second need their own)."""
    return "ablation_" + ("_".join(flag.lstrip("-") for flag in flags) or "defaults")


def per_version(flags: tuple[str, ...], extra: list[str]) -> int:
    """Environment steps per version (PPO update): --num-envs x --num-steps, the script's defaults 64 x 64."""
    given = [*flags, *extra]
    return flag_value(given, "--num-envs", 64) * flag_value(given, "--num-steps", 64)


def read_curve(flags: tuple[str, ...], seed: int, args: argparse.Namespace) -> dict:
    """TrueSkill against versions of the latest run of this configuration and seed, from its TensorBoard events."""
    runs = sorted(
        (ROOT / "runs").glob(f"{args.env_id}__{run_name(flags)}__{seed}__*"),
        key=lambda d: int(d.name.rsplit("_", 1)[1]),
    )
    events = EventAccumulator(str(runs[-1]), size_guidance={"scalars": 0})
    events.Reload()
    if "charts/trueskill_mu" not in events.Tags()["scalars"]:
        sys.exit(f"error: {runs[-1]} has no TrueSkill evaluations")
    mu = events.Scalars("charts/trueskill_mu")
    step = per_version(flags, args.extra)
    return {"versions": [e.step // step for e in mu], "mu": [e.value for e in mu]}


def run_one(flags: tuple[str, ...], seed: int, args: argparse.Namespace) -> dict | None:
    """The kept TrueSkill curve (versions, mu) of one configuration and seed if it was trained with these flags and
    this budget; else, unless --from-results, train it for args.updates versions and keep its curve."""
    path = args.results / args.env_id / f"{run_name(flags)}__seed{seed}.json"
    budget = {"flags": list(flags), "extra": args.extra, "updates": args.updates, "eval_every": args.eval_every}
    label, kept = f"{' '.join(flags) or 'defaults'} seed {seed}", load_kept(path, **budget)
    if kept is not None:
        print(f"  {label}: kept from {kept['date']} (commit {kept['code']})", flush=True)
        return kept
    if args.from_results:
        return None
    total = args.updates * per_version(flags, args.extra)
    cmd = [sys.executable, "-u", str(SCRIPT), "--env-id", args.env_id, "--seed", str(seed), *flags, *args.extra]
    cmd += ["--total-timesteps", str(total), "--eval-every", str(args.eval_every)]
    cmd += ["--save-every", "0", "--exp-name", run_name(flags)]
    threads = {"OMP_NUM_THREADS": "1"} if args.jobs > 1 else {}  # parallel runs: one torch thread each
    code, start = code_version(SCRIPT, "cleanfive/envs", "cleanfive/trueskill_league.py"), time.time()
    env, tail = {**os.environ, **threads}, deque(maxlen=40)
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        for line in proc.stdout:
            tail.append(line)
            if line.startswith("eval "):  # progress: one line per TrueSkill evaluation
                print(f"  {label}: {line.strip()}", flush=True)
    if proc.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{''.join(tail)}")
    kept = read_curve(flags, seed, args) | budget | {"seed": seed, "wall": time.time() - start}
    kept = keep(path, kept, code)
    print(f"  {label}: final mu {kept['mu'][-1]:.2f}", flush=True)
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env-id", default="ConnectFour-v1", help="any two-sided world of the script")
    parser.add_argument("--groups", nargs="+", default=list(GROUPS), choices=list(GROUPS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--updates", type=int, default=60, help="versions (PPO updates) per run")
    parser.add_argument("--eval-every", type=int, default=2, help="versions between TrueSkill evaluations")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[3.0, 5.0, 7.0], help="TrueSkill values T")
    parser.add_argument("--jobs", type=int, default=1, help="runs in parallel (each gets one torch thread)")
    parser.add_argument("--no-docs", action="store_true", help="print the table only; do not touch docs/")
    parser.add_argument("--block", default="ablations", help="docs block (and plot name) to write")
    parser.add_argument("--from-results", action="store_true", help="remake the table from the kept results only")
    parser.add_argument(
        "--results", type=Path, default=ROOT / "benchmark" / "results" / "ablations", help="folder of the kept runs"
    )
    parser.add_argument("extra", nargs="*", help="extra flags for the script, after --")
    args = parser.parse_args()
    groups = [g for g in args.groups if g != "team_spirit" or args.env_id.startswith(("Moba", "Vmas"))]
    if skipped := set(args.groups) - set(groups):
        print(f"skipped {sorted(skipped)}: {args.env_id} has one hero per side, so team spirit changes nothing")
    varied = {flag for g in groups for _, flags in GROUPS[g][1] for flag in flags[::2]}
    # extra flags come last on the command line and would win, also as --flag=value
    if clash := sorted(varied & {arg.split("=")[0] for arg in args.extra}):
        usage_error(f"{' '.join(clash)} after -- would override what --groups {' '.join(groups)} varies; drop it")
    begin, end = f"<!-- BENCHMARK:{args.block} BEGIN -->", f"<!-- BENCHMARK:{args.block} END -->"
    if not args.no_docs:
        require_block(DOC, begin, end)

    started = datetime.datetime.now(datetime.UTC)
    configs = {canonical(flags) for g in groups for _, flags in GROUPS[g][1]}
    jobs = [(flags, seed) for flags in sorted(configs) for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        curves = dict(zip(jobs, pool.map(lambda job: run_one(*job, args), jobs), strict=True))
    if missing := [job for job, kept in curves.items() if kept is None]:
        usage_error(
            f"{len(missing)} of the {len(jobs)} runs are not kept in {args.results / args.env_id}; run without "
            "--from-results first"
        )
    wall = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    command = (
        f"uv run --all-extras python benchmark/{Path(__file__).name} --env-id {args.env_id} --groups "
        f"{' '.join(groups)} --seeds {' '.join(map(str, args.seeds))} --updates {args.updates} --eval-every "
        f"{args.eval_every} --thresholds {' '.join(f'{t:g}' for t in args.thresholds)}"
        + (" --from-results" if args.from_results else f" --jobs {args.jobs}")
        + (f" --block {args.block}" if args.block != "ablations" else "")
        + (f" -- {' '.join(args.extra)}" if args.extra else "")
    )
    where = os.path.relpath(args.results.resolve() / args.env_id, ROOT)
    run_hours = sum(kept["wall"] for kept in curves.values()) / 3600
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC "
        f"from {len(jobs)} runs kept in `{where}`, {kept_provenance(list(curves.values()))}; {run_hours:.1f} "
        f"run-hours; this sitting {wall / 60:.0f} min.",
        "",
        f"Command: `{command}`. {len(args.seeds)} seeds per configuration, {args.updates} versions each. Cells: "
        "speedup(T) against the group's baseline (b), mean ± std over the seeds where both runs reached T, with "
        "how many did (— where none did), and the seeds where only one of the two reached T. Final μ: mean ± "
        "std of the last evaluation.",
        "",
        "| ablation | value | " + " | ".join(f"speedup(T = {t:g})" for t in args.thresholds) + " | final μ |",
        "|---|---|" + "---|" * (len(args.thresholds) + 1),
    ]

    def curve(flags: list[str], seed: int, per_step: bool) -> tuple[list[int], list[float]]:
        """(versions, TrueSkill) of one run; per gradient step, the versions times the passes per batch."""
        run = curves[(canonical(flags), seed)]
        passes = flag_value(flags, "--update-epochs", 4) if per_step else 1
        return [v * passes for v in run["versions"]], run["mu"]

    views = [(g, GROUPS[g][0], False) for g in groups] + [(g, PER_STEP[g], True) for g in groups if g in PER_STEP]
    for g, label, per_step in views:
        _, values, base = GROUPS[g]
        for i, (name, flags) in enumerate(values):
            cells = []
            for t in args.thresholds:
                ratios = []
                for seed in args.seeds:
                    b, e = curve(values[base][1], seed, per_step), curve(flags, seed, per_step)
                    ratios.append(speedup(b, e, t))
                ok = np.array([r for r in ratios if 0 < r < np.inf])  # both reached T
                missed, beyond = sum(r == 0 for r in ratios), sum(r == np.inf for r in ratios)  # only one reached T
                cell = f"{ok.mean():.2f} ± {ok.std():.2f} ({ok.size}/{len(ratios)})" if ok.size else "—"
                cell += f", {missed} never reached T" if missed else ""
                cells.append(cell + (f", {beyond} reached T and the baseline not" if beyond else ""))
            final = [curves[(canonical(flags), seed)]["mu"][-1] for seed in args.seeds]
            value = f"{name} (b)" if i == base else name
            lines.append(
                f"| {label} | {value} | " + " | ".join(cells) + f" | {np.mean(final):.2f} ± {np.std(final):.2f} |"
            )
    table = "\n".join(lines)
    print(table)
    if args.no_docs:
        return

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(views), figsize=(4.2 * len(views), 3.6), squeeze=False)
    for ax, (g, label, per_step) in zip(axes[0], views, strict=True):
        for name, flags in GROUPS[g][1]:
            runs = [curve(flags, seed, per_step) for seed in args.seeds]
            mus = np.array([mu for _, mu in runs])
            (line,) = ax.plot(runs[0][0], mus.mean(0), label=name)
            ax.fill_between(runs[0][0], mus.min(0), mus.max(0), color=line.get_color(), alpha=0.15, linewidth=0)
        xlabel = "gradient steps (versions × passes)" if per_step else "versions (PPO updates)"
        ylabel = f"TrueSkill μ, mean of {len(args.seeds)} seeds (band: min to max)"
        ax.set(title=label, xlabel=xlabel, ylabel=ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    plot = ROOT / "docs" / "img" / f"ppo_lstm_selfplay_{args.block}.png"
    plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(plot, dpi=110)
    block = f"{table}\n\n![TrueSkill against versions, per ablation]({Path('img') / plot.name})"
    write_block(DOC, begin, end, block)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
