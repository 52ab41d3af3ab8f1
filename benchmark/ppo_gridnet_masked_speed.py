"""Training speed of cleanfive/ppo_gridnet_masked.py at its default settings, beside the speed of µRTS alone.

Runs the script at its defaults for ``--updates`` updates once per ``--torch-threads`` value (the SPS of its final
`summary` line), then steps the same four games with random legal actions for ``--seconds``, each in its own process
(one JVM each), ``--repeats`` times in alternation. Writes the table into docs/ppo_gridnet_masked.md.

    uv run --all-extras python benchmark/ppo_gridnet_masked_speed.py --updates 8 --torch-threads 1 2 --repeats 2
"""

import os
import sys
import time

import numpy as np
import provenance as pv

SCRIPT = pv.ROOT / "cleanfive" / "ppo_gridnet_masked.py"
DOC = pv.ROOT / "docs" / "ppo_gridnet_masked.md"
BATCH = (2 + 2) * 256  # the script's default environments x steps per rollout
GAME = "game only, random legal actions"
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
PARSER = pv.parser(__file__, __doc__, extra=False)
PARSER.add_argument("--updates", type=int, default=8, help=f"updates per training run ({BATCH} steps each)")
PARSER.add_argument("--torch-threads", type=int, nargs="+", default=[1, 2], help="torch threads of each measurement")
PARSER.add_argument("--seconds", type=float, default=30.0, help="duration of each game-only measurement")
PARSER.add_argument("--repeats", type=int, default=2, help="rounds of every measurement, alternating")


def main() -> None:
    args = PARSER.parse_args()

    code, started = pv.code_version(SCRIPT, "cleanfive/envs/microrts.py"), time.time()
    train = [sys.executable, str(SCRIPT), "--total-timesteps", str(args.updates * BATCH), "--eval-episodes", "0"]
    train += ["--eval-games", "0", "--save-every", "0"]
    results: dict[str, list[float]] = {f"train, --torch-threads {t}": [] for t in args.torch_threads} | {GAME: []}
    for repeat in range(args.repeats):  # alternate the configurations so that drifting load hits them alike
        for t in args.torch_threads:
            flags = ["--torch-threads", str(t), "--seed", str(1 + repeat)]
            results[f"train, --torch-threads {t}"].append(float(pv.last_line([*train, *flags], "summary ")["SPS"]))
            print(f"  repeat {repeat}: train threads={t}: {results[f'train, --torch-threads {t}'][-1]:.0f}", flush=True)
        results[GAME].append(float(pv.last_line([sys.executable, "-c", GAME_ONLY, str(args.seconds)], "SPS=")["SPS"]))
        print(f"  repeat {repeat}: game only: {results[GAME][-1]:.0f}", flush=True)
    game = np.mean(results[GAME])
    source = (
        f"; {(time.time() - started) / 60:.0f} min in all, 1-minute load average at the end {os.getloadavg()[0]:.1f}."
    )
    note = (
        f". Training runs are the script's defaults (16x16, 2 self-play + 2 CoacAI environments, {BATCH} steps per "
        f"update) for {args.updates} updates, final evaluation off; steps are environment frames summed over the four "
        "environments. Each row: mean ± std over the repeats."
    )

    lines = [
        *pv.header(PARSER, args, code, source, note),
        "| Run | steps/s | ratio to game only |",
        "|---|---|---|",
        *(f"| {name} | {np.mean(v):.0f} ± {np.std(v):.0f} | {np.mean(v) / game:.2f} |" for name, v in results.items()),
    ]
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, "gridnet_speed", table)


if __name__ == "__main__":
    main()
