"""OpenAI Five's data-quality ablations (Figure 5, Appendix M) at small scale, with cleanfive/ppo_lstm_selfplay.py.

Each group varies one flag around the script's defaults, every other flag equal, for several seeds:

* batch size: ``--num-envs`` 32, 64, 128 (batches of 2,048 / 4,096 / 8,192 steps; baseline the smallest);
* sample reuse: ``--update-epochs`` 1, 2, 4, 8 (passes over each batch; baseline 1);
* staleness: ``--policy-lag`` 0, 1, 4, 8 (versions between the acting and the trained policy; baseline 0);
* team spirit: τ fixed at 0, annealed 0.3 → 1 (the default), fixed at 1 (baseline the annealed one); only on worlds
  with more than one hero per side, where τ changes anything.

Every run trains for ``--updates`` versions and rates itself against the fixed references every ``--eval-every``
versions (TrueSkill, Appendix J). The table gives speedup(T) of Equation 2 (versions for the baseline to first
reach TrueSkill T ÷ versions for the experiment) at each ``--thresholds`` value, per seed against the baseline of
the same seed, as mean ± std over the seeds where both reached T. A configuration shared by several groups (the
defaults) runs once. The plot shows mean TrueSkill against versions per group. Writes both into
docs/ppo_lstm_selfplay.md between the BENCHMARK:ablations markers unless --no-docs.

    uv run --all-extras python benchmark/ppo_lstm_selfplay_ablations.py --seeds 1 2 3 --updates 60 --jobs 2
"""

import argparse
import datetime
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from provenance import code_version, machine, write_block

from cleanfive.trueskill_league import speedup  # Equation 2, from the league helper

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
DOC = ROOT / "docs" / "ppo_lstm_selfplay.md"
PLOT = ROOT / "docs" / "img" / "ppo_lstm_selfplay_ablations.png"
EVAL_LINE = re.compile(r"^eval time=([\d.]+)s global_step=(\d+) trueskill_mu=([-\d.]+) ")
# group -> (label, [(value label, flags)], index of the baseline)
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


def canonical(flags: list[str]) -> tuple[str, ...]:
    """The flags with the script's default values left out, so that identical configurations run once."""
    pairs = [(flags[i], flags[i + 1]) for i in range(0, len(flags), 2)]
    return tuple(x for k, v in pairs if DEFAULTS.get(k) != v for x in (k, v))


def flag_value(flags: list[str], name: str, default: int) -> int:
    """The value of ``name`` in a list of flags (the last one given), else ``default``."""
    values = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == name]
    return int(values[-1]) if values else default


def run_one(flags: tuple[str, ...], seed: int, args: argparse.Namespace) -> dict:
    """Train one configuration for args.updates versions; return its TrueSkill curve (versions, mu) and wall time."""
    given = [*flags, *args.extra]
    per_version = flag_value(given, "--num-envs", 64) * flag_value(given, "--num-steps", 64)  # the script's defaults
    cmd = [sys.executable, "-u", str(SCRIPT), "--env-id", args.env_id, "--seed", str(seed), *given]
    cmd += ["--total-timesteps", str(args.updates * per_version), "--eval-every", str(args.eval_every)]
    name = "_".join(flag.lstrip("-") for flag in flags) or "defaults"  # runs started in one second need their own
    cmd += ["--save-every", "0", "--exp-name", f"ablation_{name}"]
    start = time.time()
    threads = {"OMP_NUM_THREADS": "1"} if args.jobs > 1 else {}  # parallel runs: one torch thread each
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **threads})
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr[-2000:]}")
    evals = [EVAL_LINE.match(line) for line in result.stdout.splitlines()]
    curve = [(int(m[2]) // per_version, float(m[3])) for m in evals if m]
    print(f"  {' '.join(flags) or 'defaults'} seed {seed}: final mu {curve[-1][1]:.2f}", flush=True)
    return {"versions": [v for v, _ in curve], "mu": [mu for _, mu in curve], "wall": time.time() - start}


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
    parser.add_argument("extra", nargs="*", help="extra flags for the script, after --")
    args = parser.parse_args()
    groups = [g for g in args.groups if g != "team_spirit" or args.env_id.startswith(("Moba", "Vmas"))]
    if skipped := set(args.groups) - set(groups):
        print(f"skipped {sorted(skipped)}: {args.env_id} has one hero per side, so team spirit changes nothing")

    started = datetime.datetime.now(datetime.UTC)
    version = code_version(SCRIPT, "cleanfive/envs", "cleanfive/trueskill_league.py")
    configs = {canonical(flags) for g in groups for _, flags in GROUPS[g][1]}
    jobs = [(flags, seed) for flags in sorted(configs) for seed in args.seeds]
    with ThreadPoolExecutor(args.jobs) as pool:
        curves = dict(zip(jobs, pool.map(lambda job: run_one(*job, args), jobs), strict=True))
    wall = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    command = (
        f"uv run --all-extras python benchmark/{Path(__file__).name} --env-id {args.env_id} --groups "
        f"{' '.join(groups)} --seeds {' '.join(map(str, args.seeds))} --updates {args.updates} --eval-every "
        f"{args.eval_every} --thresholds {' '.join(f'{t:g}' for t in args.thresholds)} --jobs {args.jobs}"
        + (f" -- {' '.join(args.extra)}" if args.extra else "")
    )
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {started:%Y-%m-%d %H:%M} UTC, commit `{version}`, "
        f"machine: {machine()}; {wall / 60:.0f} min in all, {args.jobs} run(s) at a time.",
        "",
        f"Command: `{command}`. {len(args.seeds)} seeds per configuration, {args.updates} versions each. Cells: "
        "speedup(T) against the group's baseline (b), mean ± std over the seeds where both runs reached T, with "
        "how many did (— where none did), and the seeds where only one of the two reached T. Final μ: mean ± "
        "std of the last evaluation.",
        "",
        "| ablation | value | " + " | ".join(f"speedup(T = {t:g})" for t in args.thresholds) + " | final μ |",
        "|---|---|" + "---|" * (len(args.thresholds) + 1),
    ]
    for g in groups:
        label, values, base = GROUPS[g]
        for i, (name, flags) in enumerate(values):
            cells = []
            for t in args.thresholds:
                ratios = []
                for seed in args.seeds:
                    b, e = curves[(canonical(values[base][1]), seed)], curves[(canonical(flags), seed)]
                    ratios.append(speedup((b["versions"], b["mu"]), (e["versions"], e["mu"]), t))
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

    fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.6), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        label, values, _ = GROUPS[g]
        for name, flags in values:
            runs = [curves[(canonical(flags), seed)] for seed in args.seeds]
            versions = runs[0]["versions"]
            ax.plot(versions, np.mean([r["mu"] for r in runs], 0), label=name)
        ax.set(title=label, xlabel="versions (PPO updates)", ylabel=f"mean TrueSkill μ ({len(args.seeds)} seeds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    PLOT.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PLOT, dpi=110)
    block = f"{table}\n\n![TrueSkill against versions, per ablation]({Path('img') / PLOT.name})"
    write_block(DOC, "<!-- BENCHMARK:ablations -->", "<!-- /BENCHMARK:ablations -->", block)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
