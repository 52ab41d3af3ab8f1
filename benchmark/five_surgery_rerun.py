"""The rerun experiment of OpenAI Five (section 4.2), small: surgery against training from scratch after a change.

For each seed, one after the other: train cleanfive/ppo_lstm_selfplay.py on Moba5v5-v0 and save the model; then
(a) operate on it with cleanfive/five_surgery.py (new inputs and the new action of Moba5v5-v1) and continue training
on Moba5v5-v1, and (b) train ppo_lstm_selfplay.py from scratch on Moba5v5-v1. The target is the final TrueSkill mu of
(a). The table gives the environment steps and the wall time each arm needed to first reach it, (a) counted after the
switch and in total (its Moba5v5-v0 training included), and their ratios; both arms rate the same reference bots on
Moba5v5-v1 with the same seed, so their TrueSkill scales agree. Writes a plot and the table into
docs/five_surgery.md between the BENCHMARK markers.

    uv run --all-extras python benchmark/five_surgery_rerun.py --seeds 1 2 3
    uv run --all-extras python benchmark/five_surgery_rerun.py --seeds 1 --v0-steps 4096 --surgery-steps 2048 \\
        --scratch-steps 6144 --doc runs/rerun_tiny.md --plot runs/rerun_tiny.png -- --num-envs 8 --eval-games 4
"""

import argparse
import datetime
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from provenance import code_version, machine, over_seeds, write_block

ROOT = Path(__file__).resolve().parents[1]
PARENT = ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
SURGERY = ROOT / "cleanfive" / "five_surgery.py"
EVAL_LINE = re.compile(r"^eval time=(?P<time>[\d.]+)s global_step=(?P<step>\d+) trueskill_mu=(?P<mu>[-\d.]+) ")
SAVED_LINE = re.compile(r"^model saved to (?P<path>\S+)$")
REFERENCES_LINE = re.compile(r"^reference ratings: (?P<ratings>.*)$")
CHECK_LINE = re.compile(r"^surgery .*max \|delta logits\| (?P<logits>\S+), .*score (?P<score>[\d.]+) over")
# a lane world and network small enough for a 2-core CPU (3 heroes a side), every bot as a reference; five_surgery.py
# takes the heroes and the network from its checkpoint
NETWORK = ["--num-heroes", "3", "--hidden-size", "64"]
COMMON = ["--num-envs", "32", "--num-steps", "64", "--eval-every", "10", "--eval-games", "32"]
COMMON += ["--reference-games", "64", "--no-cuda"]


def run(label: str, script: Path, flags: list[str]) -> dict:
    """Run one script to its end; return its evaluations, wall time, saved model and surgery check."""
    cmd = [sys.executable, "-u", str(script), *flags]
    print("$", " ".join(cmd), flush=True)
    out = {"evals": [], "model": None, "check": None, "references": None}
    started = time.time()
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True) as proc:
        for line in proc.stdout:
            line = line.strip()
            if match := EVAL_LINE.match(line):
                out["evals"].append(
                    {"time": float(match["time"]), "step": int(match["step"]), "mu": float(match["mu"])}
                )
            elif match := SAVED_LINE.match(line):
                out["model"] = match["path"]
            elif match := REFERENCES_LINE.match(line):
                out["references"] = match["ratings"]
            elif match := CHECK_LINE.match(line):  # the last one: the scale kept
                out["check"] = (float(match["logits"]), float(match["score"]))
            if line.startswith(("eval", "surgery", "model saved", "reference ratings")):
                print(f"  {label}: {line}", flush=True)
    if proc.returncode != 0:
        sys.exit(f"{label} failed with exit code {proc.returncode}")
    out["wall"] = time.time() - started
    return out


def first_reach(evals: list[dict], target: float) -> tuple[float, float]:
    """(steps, wall seconds) of the first evaluation with mu >= target, or (nan, nan)."""
    return next(((e["step"], e["time"]) for e in evals if e["mu"] >= target), (np.nan, np.nan))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--v0-steps", type=int, default=1_000_000, help="training on Moba5v5-v0 before the switch")
    parser.add_argument("--surgery-steps", type=int, default=500_000, help="(a): training after surgery on v1")
    parser.add_argument("--scratch-steps", type=int, default=1_500_000, help="(b): training from scratch on v1")
    parser.add_argument("--surgery-flags", default="--add-inputs --add-actions", help="operations for (a)")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "five_surgery.md", help="page to write into")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "five_surgery_rerun.png")
    parser.add_argument("extra", nargs="*", help="flags for every run after the common ones, after --")
    args = parser.parse_args()

    started = datetime.datetime.now(datetime.UTC)
    version = code_version(PARENT, SURGERY, "cleanfive/envs/moba.py", "cleanfive/trueskill_league.py")
    flags = [*COMMON, *args.extra]
    results = {}
    for seed in args.seeds:
        seeded = [*flags, "--seed", str(seed)]
        v0_flags = ["--save-model", "--env-id", "Moba5v5-v0", "--total-timesteps", str(args.v0_steps)]
        v0 = run(f"seed {seed} v0", PARENT, [*NETWORK, *seeded, *v0_flags])
        a_flags = ["--checkpoint", v0["model"], "--env-id", "Moba5v5-v1", "--total-timesteps", str(args.surgery_steps)]
        surgery = run(f"seed {seed} (a)", SURGERY, [*seeded, *a_flags, *shlex.split(args.surgery_flags)])
        b_flags = ["--env-id", "Moba5v5-v1", "--total-timesteps", str(args.scratch_steps)]
        scratch = run(f"seed {seed} (b)", PARENT, [*NETWORK, *seeded, *b_flags])
        if surgery["references"] != scratch["references"]:  # both rate the same bots with the same seed
            sys.exit(f"seed {seed}: the arms rated the references differently; their TrueSkill is not comparable")
        results[seed] = (v0, surgery, scratch)

    rows = {name: [] for name in ("target", "a_steps", "a_total", "b_steps", "a_min", "a_total_min", "b_min")}
    rows |= {"b_final": [], "v0_final": [], "delta": [], "parity": []}
    for v0, surgery, scratch in results.values():
        target = surgery["evals"][-1]["mu"]
        a_steps, a_time = first_reach(surgery["evals"], target)
        b_steps, b_time = first_reach(scratch["evals"], target)
        rows["target"].append(target)
        rows["a_steps"].append(a_steps / 1e6)
        rows["a_total"].append((a_steps + args.v0_steps) / 1e6)
        rows["b_steps"].append(b_steps / 1e6)
        rows["a_min"].append(a_time / 60)
        rows["a_total_min"].append((a_time + v0["wall"]) / 60)
        rows["b_min"].append(b_time / 60)
        rows["b_final"].append(scratch["evals"][-1]["mu"])
        rows["v0_final"].append(v0["evals"][-1]["mu"])
        rows["delta"].append(surgery["check"][0])
        rows["parity"].append(surgery["check"][1])
    rows["ratio"] = list(np.array(rows["b_steps"]) / np.array(rows["a_steps"]))
    rows["ratio_total"] = list(np.array(rows["b_steps"]) / np.array(rows["a_total"]))
    labels = [
        ("target", "target: final TrueSkill μ of (a) on Moba5v5-v1"),
        ("a_steps", "(a) surgery: M steps after the switch to reach it"),
        ("a_total", "(a) surgery: M steps in total (Moba5v5-v0 training included)"),
        ("b_steps", "(b) from scratch: M steps to reach it"),
        ("ratio", "(b) steps ÷ (a) steps after the switch"),
        ("ratio_total", "(b) steps ÷ (a) steps in total"),
        ("a_min", "(a) minutes after the switch"),
        ("a_total_min", "(a) minutes in total"),
        ("b_min", "(b) minutes"),
        ("b_final", "final TrueSkill μ of (b)"),
        ("v0_final", "final TrueSkill μ on Moba5v5-v0 (its own reference ratings)"),
        ("delta", "surgery check: max abs Δlogits on recorded games"),
        ("parity", "surgery check: score of operated vs unoperated"),
    ]
    common = " ".join(shlex.quote(f) for f in args.extra)
    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {started:%Y-%m-%d %H:%M} UTC, commit `{version}`, "
        f"machine: {machine()}.",
        "",
        f"Command: `uv run --all-extras python benchmark/{Path(__file__).name} --seeds "
        f"{' '.join(map(str, args.seeds))} --v0-steps {args.v0_steps} --surgery-steps {args.surgery_steps} "
        f"--scratch-steps {args.scratch_steps} --surgery-flags '{args.surgery_flags}'"
        + (f" -- {common}" if common else "")
        + f"` (seeds and arms run one after the other; flags of every run `{' '.join(flags)}`, network "
        f"`{' '.join(NETWORK)}`). "
        'A step moves every hero of one game; "—" means the arm never reached the target.',
        "",
        "| metric | " + " | ".join(f"seed {s}" for s in args.seeds) + " | mean ± std |",
        "|---|" + "---|" * (len(args.seeds) + 1),
    ]
    for key, label in labels:
        cells = " | ".join("—" if not np.isfinite(v) else f"{v:.3g}" for v in rows[key])
        lines.append(f"| {label} | {cells} | {over_seeds(rows[key], '.3g')} |")
    table = "\n".join(lines)
    print(table)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for i, (seed, (v0, surgery, scratch)) in enumerate(results.items()):
        colour = f"C{i}"
        shift = {"step": args.v0_steps / 1e6, "time": v0["wall"] / 60}
        for ax, key, scale in ((axes[0], "step", 1e6), (axes[1], "time", 60)):
            v0_x, v0_mu = [e[key] / scale for e in v0["evals"]], [e["mu"] for e in v0["evals"]]
            ax.plot(v0_x, v0_mu, ":", color=colour, label=f"seed {seed} on Moba5v5-v0 (its own references)")
            a = [e[key] / scale + shift[key] for e in surgery["evals"]]
            ax.plot(a, [e["mu"] for e in surgery["evals"]], "-", color=colour, label=f"seed {seed} (a) surgery")
            b = [e[key] / scale for e in scratch["evals"]]
            ax.plot(b, [e["mu"] for e in scratch["evals"]], "--", color=colour, label=f"seed {seed} (b) scratch")
            ax.axhline(rows["target"][i], color=colour, lw=0.5)
    axes[0].set(xlabel="environment steps (M), (a) after its Moba5v5-v0 training (dotted)", ylabel="TrueSkill μ")
    axes[1].set(xlabel="wall time (minutes, 2 CPU cores)", ylabel="TrueSkill μ")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Moba5v5-v1: surgery from a Moba5v5-v0 model (a) against training from scratch (b)")
    fig.tight_layout()
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.plot, dpi=110)
    print(f"wrote {args.plot}")

    image = os.path.relpath(args.plot, args.doc.parent)
    begin, end = "<!-- BENCHMARK:rerun BEGIN -->", "<!-- BENCHMARK:rerun END -->"
    write_block(args.doc.resolve(), begin, end, f"{table}\n\n![TrueSkill against steps and wall time]({image})")


if __name__ == "__main__":
    main()
