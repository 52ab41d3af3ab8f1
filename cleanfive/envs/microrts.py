"""The real Gym-µRTS (gym-microrts 0.6.0, Java) in Gridnet mode behind a Gymnasium-style vector interface.

What gym-microrts 0.6.0 actually does (checked by ``tests/test_microrts.py``):

* The game runs in a JVM started through JPype on the first environment of the process; a JVM can start only once
  per process, so environments here are never closed with gym-microrts' ``close()`` (it shuts the JVM down): a
  process may build several of them (training, evaluation, bot-vs-bot games) and the JVM ends with the process.
* Old Gym API underneath: ``reset() -> obs``, ``step(a) -> (obs, reward, done, infos)``; ``get_action_mask()`` must
  be called after every reset and step (``step`` sends only the actions of cells that mask marks as available).
* Observation ``(E, H, W, 27)`` int32 one-hot planes: hit points 0-4 (5), resources 0-4 (5), owner (3: plane 10 none,
  11 the observing player, 12 the opponent; in the second seat of a self-play game neutral resources are shown on
  plane 11), unit type (8: 13 none, 14 resource, 15 base, 16 barracks, 17 worker, 18 light, 19 heavy, 20 ranged),
  current action (6: 21 none, move, harvest, return, produce, attack). Player 1's view is not rotated.
* Gridnet action ``(E, H*W, 7)`` per cell: action type (NOOP, move, harvest, return, produce, attack), move, harvest,
  return and produce directions (N, E, S, W), produce unit type (7), relative attack position (7x7). Mask
  ``(E, H*W, 78)``: the legal entries of those 6+4+4+4+4+7+49 choices; all False where the cell holds no unit of the
  player that is free to act (no unit, a neutral or enemy unit, or an own unit busy with a durative action).
* Actions on cells without an available own unit are ignored. An *illegal* action on an available own unit (say
  harvest with no resource in that direction, or move into an occupied cell) raises no error and changes nothing
  on the map, but the unit stays unavailable for that action type's duration (move 10 frames, harvest 20, produce
  the product's build time, attack 5 for a worker): a wasted action. NOOP keeps the unit available next frame.
* ``num_selfplay_envs`` come first and are paired: envs ``2k`` and ``2k+1`` are the two seats of one game, both
  driven by the caller. The ``len(bots)`` bot envs follow; in them the caller plays player 0 (top-left).
* Rewards: six raw components per step (win/loss +1/-1 at the end, resources harvested and returned, workers
  produced, buildings produced, attacks, combat units produced); the reward is their dot product with
  ``reward_weight``. Rewards arrive on the frame an action *starts* (a harvest pays when it is issued).
* Autoreset is "same-step": a finished game is reset inside Java and the observation (and mask) returned with
  ``done`` is already the first of the next game. The reward and info of that step belong to the finished game.
* Each step is one game frame (gym-microrts 0.6.0 has no frame skip); a game ends when a player has no units left
  or after ``max_steps`` frames.

Shapes use E = number of envs, H x W = map size, HW = H * W.
"""

from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET
from typing import Any

import numpy as np

INSTALL_HINT = "install the extra with `uv sync --extra microrts`"
JAVA_HINT = "gym-microrts needs a Java runtime (17 works) on PATH, e.g. `apt-get install openjdk-17-jre-headless`"
ACTION_DIMS: tuple[int, ...] = (6, 4, 4, 4, 4, 7, 49)  # type, move, harvest, return, produce dir/type, attack
MASK_SIZE = sum(ACTION_DIMS)  # 78
NUM_PLANES = 27
REWARD_NAMES: tuple[str, ...] = ("win_loss", "resource", "worker", "building", "attack", "combat_unit")
# the scripted and competition bots of gym_microrts.microrts_ai; the last seven are ~5x slower per frame
BOT_NAMES: tuple[str, ...] = (
    "coacAI",
    "workerRushAI",
    "lightRushAI",
    "rojo",
    "mayari",
    "randomBiasedAI",
    "randomAI",
    "passiveAI",
    "POLightRush",
    "POWorkerRush",
    "PORangedRush",
    "naiveMCTSAI",
    "mixedBot",
    "izanagi",
    "tiamat",
    "droplet",
    "guidedRojoA3N",
    "POHeavyRush",
)


class MicrortsUnavailable(RuntimeError):
    """gym-microrts (the ``microrts`` extra) or a Java runtime is missing; the message says how to install it."""


def microrts_dir() -> str:
    """The ``microrts`` folder of the installed gym-microrts (maps live in ``maps/``); checks Java and the extra."""
    if shutil.which("java") is None:
        raise MicrortsUnavailable(JAVA_HINT)
    try:
        import gym_microrts
        import jpype  # noqa: F401
    except ImportError as exc:
        raise MicrortsUnavailable(f"gym-microrts is not installed ({exc.name} missing): {INSTALL_HINT}") from exc
    return os.path.join(gym_microrts.__path__[0], "microrts")


def map_size(map_path: str) -> tuple[int, int]:
    """(H, W) of a map given relative to the gym-microrts folder, e.g. ``maps/16x16/basesWorkers16x16.xml``."""
    try:
        full = os.path.join(microrts_dir(), map_path)
    except MicrortsUnavailable as exc:  # the hint names the map that could not be opened
        raise MicrortsUnavailable(f"cannot open map {map_path!r}: {exc}") from exc
    if not os.path.isfile(full):
        raise ValueError(f"map {map_path!r} not found under {os.path.join(microrts_dir(), 'maps')}")
    root = ET.parse(full).getroot()
    return int(root.get("height")), int(root.get("width"))


class MicrortsGridEnv:
    """E Gridnet games of µRTS stepped together, with masks, raw rewards and episode statistics in ``info``.

    ``reset() -> obs, info`` and ``step(actions) -> obs, reward, terminated, truncated, info`` with obs ``(E, H, W,
    27)`` int32, actions ``(E, HW, 7)`` ints, reward ``(E,)`` float32. ``info["action_mask"]`` is ``(E, HW, 78)``
    bool and ``info["raw_rewards"]`` ``(E, 6)``. When games end, ``info["_episode"]`` ``(E,)`` marks them and
    ``info["episode"]`` holds, per env, ``r`` (weighted return), ``l`` (frames) and ``raw`` ``(E, 6)`` (raw component
    sums; ``raw[:, 0]`` is the outcome +1 / 0 / -1 for that env's player). ``terminated`` is a game won or lost,
    ``truncated`` a game stopped at ``max_steps``. See the module docstring for autoreset and invalid actions.
    """

    def __init__(
        self,
        map_path: str,
        num_selfplay_envs: int = 0,
        bots: tuple[str, ...] | list[str] = ("passiveAI",),
        max_steps: int = 2000,
        reward_weight: tuple[float, ...] | np.ndarray = (10.0, 1.0, 1.0, 0.2, 1.0, 4.0),
    ):
        self.height, self.width = map_size(map_path)  # raises MicrortsUnavailable / ValueError first
        unknown = [b for b in bots if b not in BOT_NAMES]
        if unknown:
            raise ValueError(f"unknown bot(s) {unknown}; choose from {', '.join(BOT_NAMES)}")
        if num_selfplay_envs < 0 or num_selfplay_envs % 2:
            raise ValueError(f"num_selfplay_envs must be even and >= 0 (two seats per game), got {num_selfplay_envs}")
        if num_selfplay_envs + len(bots) == 0:
            raise ValueError("need at least one environment (self-play or bot)")
        reward_weight = np.asarray(reward_weight, dtype=np.float64)
        if reward_weight.shape != (len(REWARD_NAMES),):
            raise ValueError(f"reward_weight needs {len(REWARD_NAMES)} values ({', '.join(REWARD_NAMES)})")

        from gym_microrts import microrts_ai
        from gym_microrts.envs.vec_env import MicroRTSGridModeVecEnv

        self.num_envs = num_selfplay_envs + len(bots)
        self.num_selfplay_envs = num_selfplay_envs
        self.bots = tuple(bots)
        self.max_steps = max_steps
        self.obs_shape = (self.height, self.width, NUM_PLANES)
        self._env = MicroRTSGridModeVecEnv(
            num_selfplay_envs=num_selfplay_envs,
            num_bot_envs=len(bots),
            max_steps=max_steps,
            ai2s=[getattr(microrts_ai, b) for b in bots],
            map_paths=[map_path],
            reward_weight=reward_weight,
        )
        self._return = np.zeros(self.num_envs)
        self._length = np.zeros(self.num_envs, dtype=np.int64)
        self._raw = np.zeros((self.num_envs, len(REWARD_NAMES)))

    def _mask(self) -> np.ndarray:
        return self._env.get_action_mask().astype(bool)  # also sets the source-unit mask that step() relies on

    def reset(self) -> tuple[np.ndarray, dict[str, Any]]:
        obs = self._env.reset()
        self._return[:], self._length[:], self._raw[:] = 0, 0, 0
        return obs, {"action_mask": self._mask()}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = np.asarray(actions, dtype=np.int32).reshape(self.num_envs, self.height * self.width, -1)
        obs, reward, done, infos = self._env.step(actions)
        raw = np.stack([i["raw_rewards"] for i in infos]).astype(np.float64)
        self._return += reward
        self._length += 1
        self._raw += raw
        done = done.astype(bool)
        info: dict[str, Any] = {"action_mask": self._mask(), "raw_rewards": raw}
        terminated = done & (self._raw[:, 0] != 0)
        if done.any():
            info["_episode"] = done
            info["episode"] = {"r": self._return.copy(), "l": self._length.copy(), "raw": self._raw.copy()}
            self._return[done], self._length[done], self._raw[done] = 0, 0, 0
        return obs, reward.astype(np.float32), terminated, done & ~terminated, info

    def render(self) -> np.ndarray:
        """RGB frame (640, 640, 3) of the first game; Java's renderer needs a display (e.g. ``xvfb-run``)."""
        return self._env.render("rgb_array")

    def close(self) -> None:
        """Stop this environment's games; the JVM stays up for other environments of the process."""
        self._env.vec_client.close()


def play_bot_games(pairs: list[tuple[str, str]], map_path: str, max_steps: int = 2000) -> np.ndarray:
    """One game per ``(bot_a, bot_b)`` pair, all at once, ``bot_a`` as player 0; returns bot_a's scores 1 / 0.5 / 0."""
    map_size(map_path)
    unknown = {b for pair in pairs for b in pair} - set(BOT_NAMES)
    if unknown:
        raise ValueError(f"unknown bot(s) {sorted(unknown)}; choose from {', '.join(BOT_NAMES)}")
    from gym_microrts import microrts_ai
    from gym_microrts.envs.vec_env import MicroRTSBotVecEnv
    from jpype.types import JArray, JInt

    env = MicroRTSBotVecEnv(
        ai1s=[getattr(microrts_ai, a) for a, _ in pairs],
        ai2s=[getattr(microrts_ai, b) for _, b in pairs],
        max_steps=max_steps,
        map_paths=[map_path] * len(pairs),
        reward_weight=np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
    )
    env.reset()
    scores = np.full(len(pairs), np.nan)
    no_actions = JArray(JArray(JArray(JInt)))([JArray(JArray(JInt))([]) for _ in pairs])  # both seats are bots
    while np.isnan(scores).any():
        _, outcome, done, _ = env.step(no_actions)
        finished = done.astype(bool) & np.isnan(scores)
        scores[finished] = (np.sign(outcome[finished]) + 1) / 2
    env.vec_client.close()
    return scores
