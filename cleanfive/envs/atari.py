"""envpool's Atari games with CleanRL's settings, a collision-free seed scheme, and real-game episode statistics.

What envpool 1.2.5 actually does (checked by ``tests/test_cleanba_impala.py``):

* ``envpool.make(..., env_type="gymnasium")`` returns a Gymnasium-style pool: ``reset() -> (obs, info)`` and
  ``step(a) -> (obs, reward, terminated, truncated, info)``. ``num_envs`` is fixed at creation (read-only).
* Observations are uint8 ``(E, 4, 84, 84)``: 84x84 grayscale, 4 stacked frames, action repeat 4; noop starts
  (up to 30) and FIRE on reset are done inside envpool.
* ``episodic_life=True``: losing a life returns ``terminated=True`` (a "done" for the learner) while the game goes on;
  ``info["terminated"]`` is True only when the *game* is over (``info["lives"] == 0``), ``truncated`` when the game
  hits ``max_episode_steps`` (27,000 agent steps = 108,000 frames). Games without lives (Pong) report
  ``info["lives"] == 0`` throughout and never a life-loss done.
* ``reward_clip=True`` clips the returned ``reward`` to its sign; ``info["reward"]`` is the unclipped game reward.
* Autoreset is Gymnasium "next-step": the step *after* a done (life lost or game over) does not play the action it
  is given; it resets (noops + FIRE, or a new game) and returns the first observation with reward 0 and
  ``terminated=False``. That transition is not a real one and must not be learned from.
* Stepping all E envs at once (the synchronous API used here), rows come back in env order:
  ``info["env_id"] == arange(E)``.
* An integer ``seed`` seeds env ``i`` of the pool with ``seed + i``: two pools whose seeds differ by less than
  ``num_envs`` share environments. :func:`pool_seed` gives every env of every pool its own seed.

Shapes use E = number of envs in a pool.
"""

from __future__ import annotations

from typing import Any

import envpool
import numpy as np
from envpool.registration import registry

# every Atari v5 id of envpool (the ones whose spec lives in envpool.atari), e.g. "Breakout-v5", "Pong-v5"
ATARI_ENV_IDS: tuple[str, ...] = tuple(
    sorted(k for k, (module, _, _) in registry.specs.items() if module == "envpool.atari" and k.endswith("-v5"))
)


def make_atari(env_id: str, num_envs: int, seed: int) -> Any:
    """CleanRL's `ppo_atari_envpool.py` settings: episodic life, reward clipping, envpool's default preprocessing.

    Env ``i`` is seeded with ``seed + i`` (envpool's own rule). Returns a pool of ``num_envs`` envs with observations
    uint8 (E, 4, 84, 84) and a Discrete action space; raises ValueError for an id not in :data:`ATARI_ENV_IDS`.
    """
    if env_id not in ATARI_ENV_IDS:
        raise ValueError(f"unknown Atari env id {env_id!r}")
    return envpool.make(
        env_id,
        env_type="gymnasium",
        num_envs=num_envs,
        episodic_life=True,
        reward_clip=True,
        seed=seed,
    )


def pool_seed(base_seed: int, pool_index: int, envs_per_pool: int) -> int:
    """Seed of env pool ``pool_index`` such that no two envs of any two pools share a seed.

    Pools are numbered across processes and actor threads, ``pool_index = rank * num_actor_threads + thread``;
    env ``i`` of that pool gets ``base_seed + pool_index * envs_per_pool + i``, i.e. ``base_seed`` plus the env's
    global index. Must stay in int32 (envpool's limit).
    """
    seed = base_seed + pool_index * envs_per_pool
    if not -(2**31) <= seed <= 2**31 - envs_per_pool:
        raise ValueError(f"env seeds {seed}..{seed + envs_per_pool - 1} leave envpool's int32 range")
    return seed


class EpisodeStatistics:
    """Real-game returns and lengths from envpool's info, as CleanRL's envpool `RecordEpisodeStatistics` does.

    Returns sum ``info["reward"]`` (unclipped) over the whole game, across lost lives; a game ends on
    ``info["terminated"]`` (last life lost) or ``truncated``. The length is ``info["elapsed_step"]`` at the end:
    agent steps of the game as envpool counts them (the reset steps after a lost life are not counted).
    """

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs, dtype=np.float64)  # (E,) return of the game in progress

    def update(self, info: dict, truncated: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Account one step. info: envpool's info of the step; truncated: bool (E,).

        Returns ``(env_indices, returns, lengths)`` of the games that ended on this step, each of shape (F,).
        """
        self.returns += info["reward"]
        over = np.flatnonzero(info["terminated"].astype(bool) | truncated)
        finished = (over, self.returns[over].copy(), info["elapsed_step"][over].astype(np.int64))
        self.returns[over] = 0.0
        return finished
