"""The rerun experiment of OpenAI Five (section 4.2), small: surgery against training from scratch after a change.

For each seed: train cleanfive/ppo_lstm_selfplay.py on Moba5v5-v0 and save the model ("v0"); then (a) operate on it
with cleanfive/five_surgery.py (the new inputs and action of Moba5v5-v1) and go on training on Moba5v5-v1; and (b)
train ppo_lstm_selfplay.py from scratch on Moba5v5-v1. The table gives the steps, CPU time (one torch thread per
run: fair when --jobs runs share the cores) and wall time each arm needed to first reach (a)'s final TrueSkill mu,
(a) counted after the switch and in total, and their ratios; both arms rate the same bots with the same seed, so
their scales agree. Writes a plot and the table into docs/five_surgery.md between the BENCHMARK:rerun markers.

Every arm of a seed is kept as JSON under --results (committed; v0's model stays under runs/); a rerun trains only
what is missing, and --from-results builds the table from the files alone. A kept (a) is reused only with the v0 it
operated on; a v0 whose model is gone is trained again if its (a) is missing.

    uv run --all-extras python benchmark/five_surgery_rerun.py --seeds 1 2 3 --jobs 2
    cp docs/five_surgery.md runs/rerun_tiny.md  # a tiny run, to check the pipeline: the page it writes into
    uv run --all-extras python benchmark/five_surgery_rerun.py --seeds 1 --v0-steps 4096 --surgery-steps 2048 \\
        --scratch-steps 6144 --jobs 2 --results runs/rerun_tiny --doc runs/rerun_tiny.md --plot runs/rerun_tiny.png \\
        -- --num-envs 8 --eval-games 4
"""

import argparse
import ast
import os
import re
import shlex
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np
import provenance as pv

PARENT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
SURGERY = pv.ROOT / "cleanfive" / "five_surgery.py"
MEASURED = (PARENT, SURGERY, "cleanfive/envs/moba.py", "cleanfive/trueskill_league.py")
CHECK_LINE = re.compile(r"^surgery .*max \|delta logits\| (?P<logits>\S+), .*score (?P<score>[\d.]+) over")
# a lane world and network small enough for a 2-core CPU (3 heroes a side), every bot as a reference; five_surgery.py
# takes the heroes and the network from its checkpoint
NETWORK = ["--num-heroes", "3", "--hidden-size", "64"]
COMMON = ["--num-envs", "32", "--num-steps", "64", "--eval-every", "10", "--eval-games", "32"]
COMMON += ["--reference-games", "64", "--no-cuda", "--save-every", "0"]
TARGET = "target: final TrueSkill μ of (a) on Moba5v5-v1"
PARSER = pv.parser(__file__, __doc__, docs=False, results="rerun")
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds of every arm")
PARSER.add_argument("--v0-steps", type=int, default=2_500_000, help="training on Moba5v5-v0 before the switch")
PARSER.add_argument("--surgery-steps", type=int, default=500_000, help="(a): training after surgery on v1")
PARSER.add_argument("--scratch-steps", type=int, default=3_000_000, help="(b): training from scratch on v1")
PARSER.add_argument("--surgery-flags", default="--add-inputs --add-actions", help="operations for (a)")
BOTS = "bot curriculum of v0 and (b), annealed to 0 (ppo_lstm_selfplay.py --bot-fraction); (a) goes on without"
PARSER.add_argument("--bot-fraction", type=float, default=0.2, help=BOTS)
PARSER.add_argument("--jobs", type=int, default=1, help="runs at a time ((b) beside the v0 -> (a) chains)")
PARSER.add_argument("--doc", type=Path, default=pv.ROOT / "docs" / "five_surgery.md", help="page to write into")
PARSER.add_argument(
    "--plot", type=Path, default=pv.ROOT / "docs" / "img" / "five_surgery_rerun.png", help="where to write the plot"
)


def train(label: str, script: Path, flags: list[str], **stamp) -> dict:
    """Run one script to its end with one torch thread; its evaluations (wall and CPU seconds, step, mu), wall and CPU
    time, saved model, surgery check and reference ratings, with ``stamp``."""
    out, started = {"evals": [], "model": None, "check": None, "references": None, "cpu": 0.0}, time.time()
    for line, cpu in pv.stream([sys.executable, "-u", str(script), *flags], threads=1):
        out["cpu"] = cpu  # the last line printed (the saved model or the last evaluation) ends it
        if line.startswith("eval "):
            f = pv.fields(line)
            out["evals"].append({"time": float(f["time"][:-1]), "cpu": cpu, "step": int(f["global_step"])})
            out["evals"][-1]["mu"] = float(f["trueskill_mu"])
        elif line.startswith("model saved to "):
            out["model"] = str(Path(line.removeprefix("model saved to ")))
        elif line.startswith("reference ratings: "):
            out["references"] = ast.literal_eval(line.removeprefix("reference ratings: "))
        elif match := CHECK_LINE.match(line):  # the last one: the scale kept
            out["check"] = (float(match["logits"]), float(match["score"]))
        if line.startswith(("eval", "surgery", "model saved", "reference ratings")):
            print(f"  {label}: {line}", flush=True)
    return out | {"wall": time.time() - started} | stamp


def arm_flags(args: argparse.Namespace, seed: int, arm: str, model: str = "") -> list[str]:
    """The flags of one arm of one seed: "v0" on Moba5v5-v0, "a" surgery on ``model`` into Moba5v5-v1, "b" from
    scratch on Moba5v5-v1. A kept result is reused only when its flags equal these."""
    # the bot curriculum is annealed to 0 by the end of each run from scratch; (a) goes on from v0's end without it
    # (explicitly: the lane world's own default is 0.2 since fa0e9e6, 0 when the kept arms ran)
    bots = ["--bot-fraction", "0" if arm == "a" else str(args.bot_fraction)]
    common = [*COMMON, *bots, *args.extra, "--seed", str(seed)]
    if arm == "v0":
        return [*NETWORK, *common, "--save-model", "--env-id", "Moba5v5-v0", "--total-timesteps", str(args.v0_steps)]
    if arm == "a":
        steps = ["--total-timesteps", str(args.surgery_steps)]
        return [*common, "--checkpoint", model, "--env-id", "Moba5v5-v1", *steps, *shlex.split(args.surgery_flags)]
    return [*NETWORK, *common, "--env-id", "Moba5v5-v1", "--total-timesteps", str(args.scratch_steps)]


def arm(args: argparse.Namespace, seed: int, name: str, model: str = "") -> dict | None:
    """The kept result of one arm of one seed if its flags match, else (unless --from-results) train it."""
    flags, script, label = arm_flags(args, seed, name, model), SURGERY if name == "a" else PARENT, f"seed {seed} {name}"
    run, path = partial(train, label, script, flags, seed=seed, arm=name), args.results / f"seed{seed}__{name}.json"
    return pv.kept_or_run(path, label, {"flags": flags}, args.from_results, run, MEASURED)


def chain(args: argparse.Namespace, seed: int) -> tuple[dict | None, dict | None]:
    """v0, then (a) on its model; a kept (a) needs its v0's result, not its model file."""
    v0 = arm(args, seed, "v0")
    if v0 is not None and not args.from_results and not (pv.ROOT / v0["model"]).exists():
        if pv.load_kept(args.results / f"seed{seed}__a.json", flags=arm_flags(args, seed, "a", v0["model"])) is None:
            print(
                f"  seed {seed} v0: its model {v0['model']} is gone and (a) is missing: training v0 again", flush=True
            )
            (args.results / f"seed{seed}__v0.json").unlink()
            v0 = arm(args, seed, "v0")
    return v0, None if v0 is None else arm(args, seed, "a", v0["model"])


def reach(v0: dict, a: dict, b: dict) -> dict[str, float]:
    """The table's rows for one seed: (a)'s final mu as the target, and when each arm first reached it."""
    target = a["evals"][-1]["mu"]
    a_at, b_at = pv.first_reach(a["evals"], "mu", target), pv.first_reach(b["evals"], "mu", target)
    a_steps, a_time, a_cpu = (a_at.get(key, np.nan) for key in ("step", "time", "cpu"))
    b_steps, b_time, b_cpu = (b_at.get(key, np.nan) for key in ("step", "time", "cpu"))
    v0_steps, v0_cpu = v0["evals"][-1]["step"], v0["cpu"]
    return {
        TARGET: target,
        "(a) surgery: M steps after the switch to reach it": a_steps / 1e6,
        "(a) surgery: M steps in total (Moba5v5-v0 training included)": (a_steps + v0_steps) / 1e6,
        "(b) from scratch: M steps to reach it": b_steps / 1e6,
        "(b) steps ÷ (a) steps after the switch": b_steps / a_steps,
        "(b) steps ÷ (a) steps in total": b_steps / (a_steps + v0_steps),
        "(a) CPU minutes after the switch": a_cpu / 60,
        "(a) CPU minutes in total": (a_cpu + v0_cpu) / 60,
        "(b) CPU minutes": b_cpu / 60,
        "(b) CPU minutes ÷ (a) CPU minutes in total": b_cpu / (a_cpu + v0_cpu),
        "(a) wall minutes after the switch": a_time / 60,
        "(a) wall minutes in total": (a_time + v0["wall"]) / 60,
        "(b) wall minutes": b_time / 60,
        "final TrueSkill μ of (b)": b["evals"][-1]["mu"],
        "final TrueSkill μ on Moba5v5-v0 (its own reference ratings)": v0["evals"][-1]["mu"],
        "surgery check: max abs Δlogits on recorded games": a["check"][0],
        "surgery check: score of operated vs unoperated": a["check"][1],
    }


def main() -> None:
    args = PARSER.parse_args()
    pv.check(args.jobs >= 1 and 0 <= args.bot_fraction <= 1, "--jobs must be at least 1 and --bot-fraction in [0, 1]")
    for script in [] if args.from_results else [PARENT, SURGERY]:  # every run gets the flags after --
        unknown = sorted({f.split("=")[0] for f in args.extra if f.startswith("--")} - pv.script_flags(script))
        pv.check(
            not unknown, f"{' '.join(unknown)} after -- is not a flag of {script.name}, and every run gets those flags"
        )
    pv.markers(args.doc, "rerun")

    started = time.strftime("%H:%M", time.gmtime())
    with ThreadPoolExecutor(args.jobs) as pool:
        chains = {seed: pool.submit(chain, args, seed) for seed in args.seeds}
        scratches = {seed: pool.submit(arm, args, seed, "b") for seed in args.seeds}
        results = {seed: (*chains[seed].result(), scratches[seed].result()) for seed in args.seeds}
    done = {seed: runs for seed, runs in results.items() if None not in runs}
    pv.check(bool(done), f"no seed has all three arms kept in {args.results}; run without --from-results first")
    for seed, (_, a, b) in done.items():
        if a["references"] != b["references"]:  # both rate the same bots with the same seed
            sys.exit(f"seed {seed}: the arms rated the references differently; their TrueSkill is not comparable")
    values = {seed: reach(*done[seed]) if seed in done else {} for seed in args.seeds}
    rows = [(label, [values[s].get(label, np.nan) for s in args.seeds], ".3g", 1.0) for label in values[min(done)]]

    source = f" from {len(done)} of {len(args.seeds)} seeds with all three arms kept in "
    source += f"`{os.path.relpath(args.results.resolve(), pv.ROOT)}`, "
    kept = [run for arms in done.values() for run in arms]
    source += f"{pv.kept_provenance(kept)}; this sitting started {started} UTC."
    bots = f"; v0 and (b) also `--bot-fraction {args.bot_fraction}`, (a) `--bot-fraction 0`"
    note = (
        f" (flags of every run `{' '.join([*COMMON, *args.extra])}`, network `{' '.join(NETWORK)}`, one torch thread "
        f'per run{bots}). A step moves every hero of one game; "—" means the arm never reached the target within its '
        "budget (a seed without all three arms kept shows it in every row). CPU minutes are each run's own CPU time, "
        "the fair measure when runs share the cores."
    )
    lines = [
        *pv.header(PARSER, args, None, source, note),
        *pv.seed_table(args.seeds, rows),
    ]
    table = "\n".join(lines)
    print(table)

    fig, axes = pv.subplots(1, 2, figsize=(11, 4))
    for i, (seed, (v0, a, b)) in enumerate(done.items()):
        for ax, key, scale in ((axes[0], "step", 1e6), (axes[1], "cpu", 60)):
            shift = v0["evals"][-1]["step"] / 1e6 if key == "step" else v0["cpu"] / 60  # (a) goes on from v0's end
            for run, style, x0, name in [
                (v0, ":", 0, "on Moba5v5-v0 (its own references)"),
                (a, "-", shift, "(a) surgery"),
                (b, "--", 0, "(b) scratch"),
            ]:
                x, mu = [e[key] / scale + x0 for e in run["evals"]], [e["mu"] for e in run["evals"]]
                ax.plot(x, mu, style, color=f"C{i}", label=f"seed {seed} {name}")
            ax.axhline(values[seed][TARGET], color=f"C{i}", lw=0.5)
    axes[0].set(xlabel="environment steps (M), (a) after its Moba5v5-v0 training (dotted)", ylabel="TrueSkill μ")
    axes[1].set(xlabel="CPU time of the run (minutes, one torch thread)", ylabel="TrueSkill μ")
    fig.suptitle("Moba5v5-v1: surgery from a Moba5v5-v0 model (a) against training from scratch (b)")
    pv.save_plot(fig, args.plot)
    print(f"wrote {args.plot}")
    image = os.path.relpath(args.plot, args.doc.parent)
    pv.write_block(args.doc.resolve(), "rerun", f"{table}\n\n![TrueSkill against steps and CPU time]({image})")


if __name__ == "__main__":
    main()
