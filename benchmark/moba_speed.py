"""Game-only speed of the built-in lane game (cleanfive/envs/moba.py) with random legal actions.

For each batch size E, steps E games with random legal actions for ``--seconds`` and reports hero-steps per second
(E x 2 sides x N heroes per step), counting ``env.step`` alone and with the action sampling; ``--processes P`` sums P
independent processes. Then (unless ``--train-updates 0``) it measures cleanfive/ppo_lstm_selfplay.py training at
its defaults on the same world. Writes the table into docs/moba.md and, with ``--frame``, docs/img/moba_frame.png.

    uv run --all-extras python benchmark/moba_speed.py --batch-sizes 64 256 1024 4096 --seconds 10 --frame
"""

import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import provenance as pv

from cleanfive.envs.moba import MOBA_ENV_IDS, bot_actions, make_moba

DOC = pv.ROOT / "docs" / "moba.md"
FRAME = pv.ROOT / "docs" / "img" / "moba_frame.png"
SCRIPT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
PARSER = pv.parser(__file__, __doc__, extra=False)
PARSER.add_argument("--env-id", default=MOBA_ENV_IDS[0], choices=MOBA_ENV_IDS, help="which version of the lane world")
pv.add_batch_sizes(PARSER)
PARSER.add_argument("--num-heroes", type=int, default=5, help="heroes a side")
PARSER.add_argument("--seconds", type=float, default=10.0, help="wall-clock budget per batch size")
PARSER.add_argument("--processes", type=int, default=1, help="independent processes per batch size")
PARSER.add_argument("--seed", type=int, default=1, help="seed of the world and of the random actions")
PARSER.add_argument("--frame", action="store_true", help=f"also save {FRAME.relative_to(pv.ROOT)}")
PARSER.add_argument("--frame-steps", type=int, default=240, help="game steps before the saved frame")
PARSER.add_argument("--train-updates", type=int, default=8, help="updates of the training run (0: none, else >= 2)")


def measure(env_id: str, num_envs: int, num_heroes: int, seconds: float, seed: int) -> tuple[float, float, int]:
    """Run ``num_envs`` games for ``seconds``; return (seconds in env.step, seconds in total, steps taken)."""
    env = make_moba(env_id, num_envs, seed, num_heroes)
    rng = np.random.default_rng(seed)
    _, info = env.reset()
    for _ in range(5):  # warm-up: first creep wave, caches
        mask = info["action_mask"]
        _, _, _, info = env.step(np.where(mask, rng.random(mask.shape), -1.0).argmax(-1))
    in_step, steps, start = 0.0, 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        mask = info["action_mask"]
        actions = np.where(mask, rng.random(mask.shape), -1.0).argmax(-1)  # uniform among legal actions
        t = time.perf_counter()
        _, _, _, info = env.step(actions)
        in_step += time.perf_counter() - t
        steps += 1
    return in_step, time.perf_counter() - start, steps


def train_sps(env_id: str, num_heroes: int, updates: int, seed: int) -> float:
    """Environment steps per second of ppo_lstm_selfplay.py with 64 games up to its next-to-last update
    (`charts/SPS` in TensorBoard; the last update also runs a TrueSkill evaluation, which is not training)."""
    cmd = [sys.executable, str(SCRIPT), "--env-id", env_id, "--num-heroes", str(num_heroes), "--num-envs", "64"]
    cmd += ["--seed", str(seed)]
    cmd += ["--total-timesteps", str(updates * 64 * 64), "--eval-every", str(updates), "--reference-games", "2"]
    cmd += ["--references", "random", "push", "--eval-games", "2", "--save-every", "0"]
    with tempfile.TemporaryDirectory() as tmp:
        if (result := subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)).returncode != 0:
            sys.exit(f"training run failed: {' '.join(cmd)}\n{result.stderr[-2000:]}")
        return pv.scalars(next(Path(tmp).glob("runs/*")))["charts/SPS"][-2][1]


def save_frame(env_id: str, steps: int) -> None:
    """Play ``lasthit`` (blue) against ``push`` (red) for ``steps`` steps and save the rendered frame."""
    env = make_moba(env_id, 1, seed=0)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(steps):
        env.step(np.stack([bot_actions("lasthit", env, 0, rng), bot_actions("push", env, 1, rng)], 1))
    from matplotlib.image import imsave

    imsave(FRAME, env.render(0).repeat(2, 0).repeat(2, 1))  # 512 x 512, nearest-neighbour
    print(f"wrote {FRAME.relative_to(pv.ROOT)} (step {steps})")


def main() -> None:
    args = PARSER.parse_args()
    if args.train_updates == 1 or args.train_updates < 0:
        PARSER.error("--train-updates must be 0 (no training run) or >= 2 (the last update also evaluates)")

    code, rows = pv.code_version("cleanfive/envs/moba.py"), []
    for num_envs in args.batch_sizes:
        jobs = [(args.env_id, num_envs, args.num_heroes, args.seconds, args.seed + i) for i in range(args.processes)]
        with multiprocessing.get_context("spawn").Pool(args.processes) as pool:  # each in a fresh process
            results = pool.starmap(measure, jobs)
        hero_steps = [num_envs * 2 * args.num_heroes * steps for _, _, steps in results]
        game_only = sum(h / in_step for h, (in_step, _, _) in zip(hero_steps, results, strict=True))
        with_actions = sum(h / total for h, (_, total, _) in zip(hero_steps, results, strict=True))
        rows.append((num_envs, sum(s for _, _, s in results), game_only, with_actions))
        print(f"E={num_envs}: {game_only:,.0f} hero-steps/s game only, {with_actions:,.0f} with action sampling")

    note = f" ({args.env_id}, N = {args.num_heroes} heroes per side, {args.processes} process(es), {args.seconds:g} s "
    lines = [
        *pv.header(PARSER, args, code, f", NumPy {np.__version__}.", note + "per batch size; random legal actions)."),
        "| batch size E | steps | hero-steps/s, game only | hero-steps/s, with action sampling |",
        "|---|---|---|---|",
        *(f"| {e} | {s} | {g:,.0f} | {w:,.0f} |" for e, s, g, w in rows),
    ]
    if args.train_updates:
        train = train_sps(args.env_id, args.num_heroes, args.train_updates, args.seed) * 2 * args.num_heroes
        game = {e: g / args.processes for e, _, g, _ in rows}  # per process: training runs in one
        ratio = f" ({train / game[64]:.3f} of one process's game-only speed at E = 64)" if 64 in game else ""
        lines += [
            "",
            f"End to end: `cleanfive/ppo_lstm_selfplay.py --env-id {args.env_id} --num-heroes {args.num_heroes}` at "
            f"its defaults (E = 64 games, 64-step segments, hidden size 256, one process) trained at "
            f"**{train:,.0f} hero-steps/s** over {args.train_updates} updates{ratio}.",
        ]
    table = "\n".join(lines)
    print(table)
    if args.frame:
        save_frame(args.env_id, args.frame_steps)
    if not args.no_docs:
        pv.write_block(DOC, "moba_speed", table)


if __name__ == "__main__":
    main()
