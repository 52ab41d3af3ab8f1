"""Game-only speed of VMAS football (cleanfive/envs/football.py) with VMAS simulating on the CPU and on a GPU.

For each device and batch size E, steps E games of 5 v 5 for ``--seconds`` (after a few warm-up steps) and reports
game steps per second (E games x steps; x 10 players for player-steps), with random actions for both sides and with
VMAS's own scripted team (``vmas_ai``) playing side 1. The wrapper hands the training script NumPy arrays, so on a
GPU every step copies observations and scores to the host: this measures whether moving the simulation pays.
``--threads`` sets torch's CPU threads (the CPU rows). Writes the table into docs/speed.md (block football-speed).

    uv run --all-extras python benchmark/football_speed.py --batch-sizes 64 256 1024 4096 --seconds 10
"""

import time

import numpy as np
import provenance as pv
import torch

from cleanfive.envs.football import FootballTeamEnv

DOC = pv.ROOT / "docs" / "speed.md"
PARSER = pv.parser(__file__, __doc__, extra=False)
pv.add_batch_sizes(PARSER)
PARSER.add_argument("--devices", nargs="+", default=["cpu", "cuda"], help="cuda is skipped where there is none")
PARSER.add_argument("--num-heroes", type=int, default=5, help="heroes a side")
PARSER.add_argument("--seconds", type=float, default=10.0, help="wall-clock budget per row")
PARSER.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own)")
PARSER.add_argument("--seed", type=int, default=1, help="seed of the world and of the random actions")


def measure(device: str, num_envs: int, num_heroes: int, opponent: str, seconds: float, seed: int) -> float:
    """Step ``num_envs`` games for ``seconds``: side 0 random, side 1 ``opponent`` (a bot name). Returns game steps
    per second."""
    env = FootballTeamEnv(num_envs, seed, num_heroes, device=device)
    rng, side = np.random.default_rng(seed), np.ones(num_envs, dtype=np.int64)
    obs, info = env.reset()

    def step():
        mine = rng.integers(0, env.num_actions, size=(num_envs, num_heroes))
        theirs = env.bot_actions(opponent, obs, info, side, rng)
        return env.step(np.stack([mine, theirs], 1))

    for _ in range(3):  # warm-up: kernels, caches
        obs, _, _, info = step()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs, _, _, info = step()
        steps += 1
    return num_envs * steps / (time.perf_counter() - start)


def main() -> None:
    args = PARSER.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = [d for d in args.devices if d != "cuda" or torch.cuda.is_available()]
    rows = []
    for device in devices:
        for num_envs in args.batch_sizes:
            for opponent in ("random", "vmas_ai"):
                sps = measure(device, num_envs, args.num_heroes, opponent, args.seconds, args.seed)
                rows.append((device, num_envs, opponent, sps))
                print(f"{device} E={num_envs} vs {opponent}: {sps:,.0f} game steps/s", flush=True)
    speed = {(d, e, o): s for d, e, o, s in rows}
    threads = f"{torch.get_num_threads()} torch CPU threads"
    note = f" ({args.num_heroes} v {args.num_heroes}, {args.seconds:g} s a row, {threads}; side 0 random actions)."
    lines = [
        *pv.header(PARSER, args, pv.code_version("cleanfive/envs/football.py"), f", torch {torch.__version__}.", note),
        "| device | games E | side 1 | game steps/s | player-steps/s | vs the CPU at the same E |",
        "|---|---|---|---|---|---|",
    ]
    for device, num_envs, opponent, sps in rows:
        cpu = speed.get(("cpu", num_envs, opponent))
        ratio = f"{sps / cpu:.2f}" if cpu and device != "cpu" else ""
        players = sps * 2 * args.num_heroes
        lines.append(f"| {device} | {num_envs} | {opponent} | {sps:,.0f} | {players:,.0f} | {ratio} |")
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, "football-speed", table)


if __name__ == "__main__":
    main()
