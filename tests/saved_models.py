"""Untrained models in ppo_lstm_selfplay.py's --save-model format, made in the test's own process.

A training run would cost an interpreter start, the imports and a rating of the references (about 10 s of CPU) for a
file whose weights no test needs trained: the arena plays it, the surgery operates it and checks that the operated
network computes what it computed.
"""

from pathlib import Path

import torch

from cleanfive.envs.teams import make_team_env
from cleanfive.ppo_lstm_selfplay import Agent, world_args


def save_selfplay_model(path: Path, env_id: str, num_heroes: int | None = None, seed: int = 0, hidden: int = 16):
    """An Agent of `env_id` with random weights (seeded), saved as ppo_lstm_selfplay.py --save-model saves one: {script,
    args, model}. Returns the path as a string."""
    env = make_team_env(env_id, 1, 0, num_heroes)
    torch.manual_seed(seed)
    board = len(env.obs_shape) == 3  # the script's --square-head (on by default) on a board only
    agent = Agent(env.obs_shape, env.num_actions, env.num_heroes, hidden, env.move_squares if board else None)
    args = vars(world_args(["--env-id", env_id]))  # its world's settings, as a run of it saves them
    args |= dict(num_heroes=env.num_heroes, hidden_size=hidden, seed=seed, square_head=board)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"script": "ppo_lstm_selfplay.py", "args": args, "model": agent.state_dict()}, path)
    return str(path)
