"""Training speed of cleanfive/ppo_gridnet_masked.py at its default settings, beside the speed of µRTS alone.

Runs the script with its defaults (16x16 basesWorkers, 2 self-play + 2 CoacAI environments, 256 steps per rollout)
for ``--updates`` updates without the final evaluation, once per ``--torch-threads`` value, and reads the SPS of its
final `summary` line. Then steps the same four games with uniformly random legal actions (no network) for
``--seconds`` and reports that too, so the table shows how much of the time goes into the game and how much into
the network. Every measurement runs in its own subprocess (the JVM starts once per process), one after the other,
``--repeats`` times in alternation. Writes the table into docs/ppo_gridnet_masked.md between the BENCHMARK markers
unless --no-docs.

    uv run --all-extras python benchmark/ppo_gridnet_masked_speed.py --updates 8 --torch-threads 1 2 --repeats 2
"""

import argparse
import datetime
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from provenance import code_version, machine, write_block

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cleanfive" / "ppo_gridnet_masked.py"
DOC = ROOT / "docs" / "ppo_gridnet_masked.md"
BEGIN, END = "<!-- BENCHMARK:gridnet_speed -->", "<!-- /BENCHMARK:gridnet_speed -->"
BATCH = (2 + 2) * 256  # the script's default environments x steps per rollout

# runs in a fresh interpreter: the same four games as the script's defaults, random legal actions per cell
GAME_ONLY = """
import sys, time
import numpy as np
from cleanfive.envs.microrts import ACTION_DIMS, MicrortsGridEnv
seconds = float(sys.argv[1])
env = MicrortsGridEnv("maps/16x16/basesWorkers16x16.xml", 2, ["coacAI", "coacAI"], 2000)
rng = np.random.default_rng(0)
_, info = env.reset()
bounds = np.cumsum((0,) + ACTION_DIMS)
steps, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    mask = info["action_mask"]
    noise = np.where(mask, rng.random(mask.shape), -1.0)
    action = np.stack([noise[..., a:b].argmax(-1) for a, b in zip(bounds[:-1], bounds[1:])], -1)
    info = env.step(action)[-1]
    steps += env.num_envs
print(f"SPS={steps / (time.perf_counter() - start)}")
"""


def train_sps(updates: int, threads: int, seed: int) -> float:
    """SPS of the script at its defaults for ``updates`` updates with ``--torch-threads threads``."""
    cmd = [sys.executable, str(SCRIPT), "--total-timesteps", str(updates * BATCH), "--torch-threads", str(threads)]
    cmd += ["--eval-episodes", "0", "--eval-games", "0", "--save-every", "0", "--seed", str(seed), "--quiet"]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.startswith("summary ")]
    if result.returncode != 0 or not lines:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr[-2000:]}")
    fields = dict(kv.split("=", 1) for kv in lines[-1].split()[1:])
    return float(fields["SPS"])


def game_sps(seconds: float) -> float:
    """Steps per second of the default four games with random legal actions, no network."""
    result = subprocess.run([sys.executable, "-c", GAME_ONLY, str(seconds)], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"game-only run failed:\n{result.stderr[-2000:]}")
    return float(result.stdout.strip().splitlines()[-1].split("=", 1)[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=8, help=f"updates per training run ({BATCH} steps each)")
    parser.add_argument("--torch-threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seconds", type=float, default=30.0, help="duration of each game-only measurement")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-docs", action="store_true", help="print the table only; do not touch docs/")
    args = parser.parse_args()

    started = datetime.datetime.now(datetime.UTC)
    version = code_version(SCRIPT, "cleanfive/envs/microrts.py")
    results: dict[str, list[float]] = {f"train, --torch-threads {t}": [] for t in args.torch_threads}
    results["game only, random legal actions"] = []
    for repeat in range(args.repeats):  # alternate the configurations so that drifting load hits them alike
        for t in args.torch_threads:
            results[f"train, --torch-threads {t}"].append(train_sps(args.updates, t, seed=1 + repeat))
            print(f"  repeat {repeat}: train threads={t}: {results[f'train, --torch-threads {t}'][-1]:.0f}", flush=True)
        results["game only, random legal actions"].append(game_sps(args.seconds))
        print(f"  repeat {repeat}: game only: {results['game only, random legal actions'][-1]:.0f}", flush=True)
    game = np.mean(results["game only, random legal actions"])
    wall = (datetime.datetime.now(datetime.UTC) - started).total_seconds()

    lines = [
        f"Generated by `benchmark/{Path(__file__).name}` on {started:%Y-%m-%d %H:%M} UTC, commit `{version}`, machine: "
        f"{machine()}; {wall / 60:.0f} min in all, 1-minute load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        f"Command: `uv run --all-extras python benchmark/{Path(__file__).name} --updates {args.updates} "
        f"--torch-threads {' '.join(map(str, args.torch_threads))} --seconds {args.seconds:g} --repeats "
        f"{args.repeats}`. Training runs are the script's defaults (16x16, 2 self-play + 2 CoacAI environments, "
        f"{BATCH} steps per update) for {args.updates} updates, final evaluation off; steps are environment "
        "frames summed over the four environments. Each row: mean ± std over the repeats.",
        "",
        "| Run | steps/s | ratio to game only |",
        "|---|---|---|",
    ]
    for name, values in results.items():
        lines.append(f"| {name} | {np.mean(values):.0f} ± {np.std(values):.0f} | {np.mean(values) / game:.2f} |")
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        write_block(DOC, BEGIN, END, table)


if __name__ == "__main__":
    main()
