"""The rerun experiment of OpenAI Five (section 4.2), small: surgery against training from scratch after a change.

For each seed: train cleanfive/ppo_lstm_selfplay.py on Moba5v5-v0 and save the model ("v0"); then (a) operate on it
with cleanfive/five_surgery.py (new inputs and the new action of Moba5v5-v1) and continue training on Moba5v5-v1; and
(b) train ppo_lstm_selfplay.py from scratch on Moba5v5-v1. The target is the final TrueSkill mu of (a). The table
gives the environment steps and the time each arm needed to first reach it, (a) counted after the switch and in total
(its Moba5v5-v0 training included), and their ratios; both arms rate the same reference bots on Moba5v5-v1 with the
same seed, so their TrueSkill scales agree. Time is given as each run's own CPU time (every run has one torch
thread, so this is about the wall time it would take alone on one core, and stays fair when --jobs runs share the
cores) and as wall time. Writes a plot and the table into docs/five_surgery.md between the BENCHMARK markers.

Every finished run (one arm of one seed) is kept as a JSON file under --results (default benchmark/results/rerun/,
committed) with its evaluations, commit, date and machine; v0's saved model stays under runs/. A rerun of the same
command reuses the files whose budget and flags match and trains only what is missing, so the experiment can be
completed over several sittings; --from-results builds the table from the files alone. A kept (a) is reused only
together with the v0 it operated on; a v0 whose model file is gone is trained again if its (a) is still missing.
(b) does not depend on v0, so with --jobs 2 or more it trains beside the v0 -> (a) chains.

    uv run --all-extras python benchmark/five_surgery_rerun.py --seeds 1 2 3 --jobs 2
    cp docs/five_surgery.md runs/rerun_tiny.md  # a tiny run, to check the pipeline: the page it writes into
    uv run --all-extras python benchmark/five_surgery_rerun.py --seeds 1 --v0-steps 4096 --surgery-steps 2048 \\
        --scratch-steps 6144 --jobs 2 --results runs/rerun_tiny --doc runs/rerun_tiny.md --plot runs/rerun_tiny.png \\
        -- --num-envs 8 --eval-games 4
"""

import argparse
import ast
import datetime
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from provenance import (
    code_version,
    cpu_seconds,
    keep,
    kept_provenance,
    load_kept,
    over_seeds,
    require_block,
    usage_error,
    write_block,
)

ROOT = Path(__file__).resolve().parents[1]
PARENT = ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
SURGERY = ROOT / "cleanfive" / "five_surgery.py"
MEASURED = (PARENT, SURGERY, "cleanfive/envs/moba.py", "cleanfive/trueskill_league.py")
EVAL_LINE = re.compile(r"^eval time=(?P<time>[\d.]+)s global_step=(?P<step>\d+) trueskill_mu=(?P<mu>[-\d.]+) ")
SAVED_LINE = re.compile(r"^model saved to (?P<path>\S+)$")
REFERENCES_LINE = re.compile(r"^reference ratings: (?P<ratings>.*)$")
CHECK_LINE = re.compile(r"^surgery .*max \|delta logits\| (?P<logits>\S+), .*score (?P<score>[\d.]+) over")
# a lane world and network small enough for a 2-core CPU (3 heroes a side), every bot as a reference; five_surgery.py
# takes the heroes and the network from its checkpoint
NETWORK = ["--num-heroes", "3", "--hidden-size", "64"]
COMMON = ["--num-envs", "32", "--num-steps", "64", "--eval-every", "10", "--eval-games", "32"]
COMMON += ["--reference-games", "64", "--no-cuda", "--save-every", "0"]


LABELS = [
    ("target", "target: final TrueSkill μ of (a) on Moba5v5-v1"),
    ("a_steps", "(a) surgery: M steps after the switch to reach it"),
    ("a_total", "(a) surgery: M steps in total (Moba5v5-v0 training included)"),
    ("b_steps", "(b) from scratch: M steps to reach it"),
    ("ratio", "(b) steps ÷ (a) steps after the switch"),
    ("ratio_total", "(b) steps ÷ (a) steps in total"),
    ("a_cpu", "(a) CPU minutes after the switch"),
    ("a_total_cpu", "(a) CPU minutes in total"),
    ("b_cpu", "(b) CPU minutes"),
    ("ratio_cpu", "(b) CPU minutes ÷ (a) CPU minutes in total"),
    ("a_min", "(a) wall minutes after the switch"),
    ("a_total_min", "(a) wall minutes in total"),
    ("b_min", "(b) wall minutes"),
    ("b_final", "final TrueSkill μ of (b)"),
    ("v0_final", "final TrueSkill μ on Moba5v5-v0 (its own reference ratings)"),
    ("delta", "surgery check: max abs Δlogits on recorded games"),
    ("parity", "surgery check: score of operated vs unoperated"),
]


def train(label: str, script: Path, flags: list[str]) -> dict:
    """Run one script to its end with one torch thread; return its evaluations (wall and CPU seconds, step, mu),
    wall and CPU time, saved model, surgery check and reference ratings."""
    cmd = [sys.executable, "-u", str(script), *flags]
    print("$", " ".join(cmd), flush=True)
    out = {"evals": [], "model": None, "check": None, "references": None, "cpu": 0.0}
    started = time.time()
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True, env=env) as proc:
        for line in proc.stdout:
            line = line.strip()
            out["cpu"] = cpu_seconds(proc.pid)  # the last line printed (the saved model or the last evaluation) ends it
            if match := EVAL_LINE.match(line):
                row = {"time": float(match["time"]), "cpu": out["cpu"], "step": int(match["step"])}
                out["evals"].append(row | {"mu": float(match["mu"])})
            elif match := SAVED_LINE.match(line):
                out["model"] = str(Path(match["path"]))
            elif match := REFERENCES_LINE.match(line):
                out["references"] = ast.literal_eval(match["ratings"])
            elif match := CHECK_LINE.match(line):  # the last one: the scale kept
                out["check"] = (float(match["logits"]), float(match["score"]))
            if line.startswith(("eval", "surgery", "model saved", "reference ratings")):
                print(f"  {label}: {line}", flush=True)
    if proc.returncode != 0:
        sys.exit(f"{label} failed with exit code {proc.returncode}: {' '.join(cmd)}")
    out["wall"] = time.time() - started
    return out


def arm_flags(args: argparse.Namespace, seed: int, arm: str, model: str = "") -> list[str]:
    """The flags of one arm of one seed: "v0" on Moba5v5-v0, "a" surgery on ``model`` into Moba5v5-v1, "b" from
    scratch on Moba5v5-v1. A kept result is reused only when its flags equal these."""
    # the bot curriculum is annealed to 0 by the end of each run from scratch; (a) goes on from v0's end without it
    bots = ["--bot-fraction", str(args.bot_fraction)] if args.bot_fraction > 0 and arm != "a" else []
    common = [*COMMON, *bots, *args.extra, "--seed", str(seed)]
    if arm == "v0":
        return [*NETWORK, *common, "--save-model", "--env-id", "Moba5v5-v0", "--total-timesteps", str(args.v0_steps)]
    if arm == "a":
        steps = ["--total-timesteps", str(args.surgery_steps)]
        return [*common, "--checkpoint", model, "--env-id", "Moba5v5-v1", *steps, *shlex.split(args.surgery_flags)]
    return [*NETWORK, *common, "--env-id", "Moba5v5-v1", "--total-timesteps", str(args.scratch_steps)]


def check_extra(extra: list[str]) -> None:
    """Every flag after -- must exist in both scripts, which each see them: checked before hours of training."""
    for script in (PARENT, SURGERY):
        helptext = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True).stdout
        names = {name.split("=")[0] for name in extra if name.startswith("--")}
        if unknown := sorted(name for name in names if not re.search(rf"{re.escape(name)}\b", helptext)):
            usage_error(f"{' '.join(unknown)} after -- is not a flag of {script.name}, and every run gets those flags")


def first_reach(evals: list[dict], target: float) -> tuple[float, float, float]:
    """(steps, wall seconds, CPU seconds) of the first evaluation with mu >= target, or nans."""
    return next(((e["step"], e["time"], e["cpu"]) for e in evals if e["mu"] >= target), (np.nan,) * 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--v0-steps", type=int, default=2_500_000, help="training on Moba5v5-v0 before the switch")
    parser.add_argument("--surgery-steps", type=int, default=500_000, help="(a): training after surgery on v1")
    parser.add_argument("--scratch-steps", type=int, default=3_000_000, help="(b): training from scratch on v1")
    parser.add_argument("--surgery-flags", default="--add-inputs --add-actions", help="operations for (a)")
    parser.add_argument(
        "--bot-fraction",
        type=float,
        default=0.2,
        help="bot curriculum of the runs from scratch, v0 and (b) (ppo_lstm_selfplay.py --bot-fraction; annealed "
        "to 0 by their end); (a) continues v0 in self-play only, five_surgery.py has no curriculum",
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time ((b) beside the v0 -> (a) chains)")
    parser.add_argument("--from-results", action="store_true", help="build the table from the kept results only")
    parser.add_argument(
        "--results", type=Path, default=ROOT / "benchmark" / "results" / "rerun", help="folder of the kept runs"
    )
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "five_surgery.md", help="page to write into")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "five_surgery_rerun.png")
    parser.add_argument("extra", nargs="*", help="flags for every run after the common ones, after --")
    args = parser.parse_args()
    if args.jobs < 1:
        usage_error("--jobs must be at least 1")
    if not 0 <= args.bot_fraction <= 1:
        usage_error("--bot-fraction must be in [0, 1]")
    if not args.from_results:
        check_extra(args.extra)
    begin, end = "<!-- BENCHMARK:rerun BEGIN -->", "<!-- BENCHMARK:rerun END -->"
    require_block(args.doc, begin, end)

    def arm(seed: int, name: str, script: Path, run_flags: list[str]) -> dict | None:
        """The kept result of one arm of one seed if its flags match, else (unless --from-results) train it."""
        path = args.results / f"seed{seed}__{name}.json"
        kept = load_kept(path, flags=run_flags)
        if kept is not None:
            print(f"  seed {seed} {name}: kept from {kept['date']} (commit {kept['code']})", flush=True)
            return kept
        if args.from_results:
            return None
        code = code_version(*MEASURED)
        out = train(f"seed {seed} {name}", script, run_flags) | {"seed": seed, "arm": name, "flags": run_flags}
        return keep(path, out, code)

    def chain(seed: int) -> tuple[dict | None, dict | None]:
        """v0, then (a) on its model; a kept (a) needs its v0's result, not its model file."""
        v0 = arm(seed, "v0", PARENT, arm_flags(args, seed, "v0"))
        if v0 is not None and not args.from_results and not (ROOT / v0["model"]).exists():
            if load_kept(args.results / f"seed{seed}__a.json", flags=arm_flags(args, seed, "a", v0["model"])) is None:
                print(
                    f"  seed {seed} v0: its model {v0['model']} is gone and (a) is missing: training v0 again",
                    flush=True,
                )
                (args.results / f"seed{seed}__v0.json").unlink()
                v0 = arm(seed, "v0", PARENT, arm_flags(args, seed, "v0"))
        return v0, None if v0 is None else arm(seed, "a", SURGERY, arm_flags(args, seed, "a", v0["model"]))

    def scratch(seed: int) -> dict | None:
        return arm(seed, "b", PARENT, arm_flags(args, seed, "b"))

    started = datetime.datetime.now(datetime.UTC)
    with ThreadPoolExecutor(args.jobs) as pool:
        chains = {seed: pool.submit(chain, seed) for seed in args.seeds}
        scratches = {seed: pool.submit(scratch, seed) for seed in args.seeds}
        results = {seed: (*chains[seed].result(), scratches[seed].result()) for seed in args.seeds}
    done = {seed: runs for seed, runs in results.items() if None not in runs}
    if not done:
        usage_error(f"no seed has all three arms kept in {args.results}; run without --from-results first")
    for seed, (_, surgery, scratch_run) in done.items():
        if surgery["references"] != scratch_run["references"]:  # both rate the same bots with the same seed
            sys.exit(f"seed {seed}: the arms rated the references differently; their TrueSkill is not comparable")

    rows: dict[str, list[float]] = {}
    for seed in args.seeds:
        v0, surgery, scratch_run = done.get(seed, (None, None, None))
        if v0 is None:
            values = {}
        else:
            target = surgery["evals"][-1]["mu"]
            a_steps, a_time, a_cpu = first_reach(surgery["evals"], target)
            b_steps, b_time, b_cpu = first_reach(scratch_run["evals"], target)
            values = {
                "target": target,
                "a_steps": a_steps / 1e6,
                "a_total": (a_steps + v0["evals"][-1]["step"]) / 1e6,
                "b_steps": b_steps / 1e6,
                "ratio": b_steps / a_steps,
                "ratio_total": b_steps / (a_steps + v0["evals"][-1]["step"]),
                "a_cpu": a_cpu / 60,
                "a_total_cpu": (a_cpu + v0["cpu"]) / 60,
                "b_cpu": b_cpu / 60,
                "ratio_cpu": b_cpu / (a_cpu + v0["cpu"]),
                "a_min": a_time / 60,
                "a_total_min": (a_time + v0["wall"]) / 60,
                "b_min": b_time / 60,
                "b_final": scratch_run["evals"][-1]["mu"],
                "v0_final": v0["evals"][-1]["mu"],
                "delta": surgery["check"][0],
                "parity": surgery["check"][1],
            }
        for key, _ in LABELS:
            rows.setdefault(key, []).append(values.get(key, np.nan))

    command = (
        f"uv run --all-extras python benchmark/{Path(__file__).name} --seeds {' '.join(map(str, args.seeds))} "
        f"--v0-steps {args.v0_steps} --surgery-steps {args.surgery_steps} --scratch-steps {args.scratch_steps} "
        f"--surgery-flags '{args.surgery_flags}' --bot-fraction {args.bot_fraction}"
        + (" --from-results" if args.from_results else f" --jobs {args.jobs}")
        + (f" -- {' '.join(shlex.quote(f) for f in args.extra)}" if args.extra else "")
    )
    kept = [run for runs in done.values() for run in runs]
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC "
        f"from {len(done)} of {len(args.seeds)} seeds with all three arms kept in "
        f"`{os.path.relpath(args.results.resolve(), ROOT)}`, {kept_provenance(kept)}; this sitting started "
        f"{started:%H:%M} UTC.",
        "",
        f"Command: `{command}` (flags of every run `{' '.join([*COMMON, *args.extra])}`, network "
        f"`{' '.join(NETWORK)}`, one torch thread per run"
        + (f"; v0 and (b) also `--bot-fraction {args.bot_fraction}`, (a) none" if args.bot_fraction > 0 else "")
        + "). "
        'A step moves every hero of one game; "—" means the arm never reached the target within its '
        "budget (a seed without all three arms kept shows it in every row). CPU minutes are each run's own CPU time, "
        "the fair measure when runs share the cores.",
        "",
        "| metric | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean ± std |",
        "|---|" + "---|" * (len(args.seeds) + 1),
    ]
    for key, label in LABELS:
        cells = " | ".join("—" if not np.isfinite(v) else f"{v:.3g}" for v in rows[key])
        lines.append(f"| {label} | {cells} | {over_seeds(rows[key], '.3g')} |")
    table = "\n".join(lines)
    print(table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (seed, (v0, surgery, scratch_run)) in enumerate(done.items()):
        colour = f"C{i}"
        shift = {"step": v0["evals"][-1]["step"] / 1e6, "cpu": v0["cpu"] / 60}
        for ax, key, scale in ((axes[0], "step", 1e6), (axes[1], "cpu", 60)):
            v0_x, v0_mu = [e[key] / scale for e in v0["evals"]], [e["mu"] for e in v0["evals"]]
            ax.plot(v0_x, v0_mu, ":", color=colour, label=f"seed {seed} on Moba5v5-v0 (its own references)")
            a = [e[key] / scale + shift[key] for e in surgery["evals"]]
            ax.plot(a, [e["mu"] for e in surgery["evals"]], "-", color=colour, label=f"seed {seed} (a) surgery")
            b = [e[key] / scale for e in scratch_run["evals"]]
            ax.plot(b, [e["mu"] for e in scratch_run["evals"]], "--", color=colour, label=f"seed {seed} (b) scratch")
            ax.axhline(rows["target"][args.seeds.index(seed)], color=colour, lw=0.5)
    axes[0].set(xlabel="environment steps (M), (a) after its Moba5v5-v0 training (dotted)", ylabel="TrueSkill μ")
    axes[1].set(xlabel="CPU time of the run (minutes, one torch thread)", ylabel="TrueSkill μ")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Moba5v5-v1: surgery from a Moba5v5-v0 model (a) against training from scratch (b)")
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)
    print(f"wrote {args.plot}")

    image = os.path.relpath(args.plot, args.doc.parent)
    write_block(args.doc.resolve(), begin, end, f"{table}\n\n![TrueSkill against steps and CPU time]({image})")


if __name__ == "__main__":
    main()
