"""One entry point to the "2 sides x N heroes" worlds, and bot-vs-bot games on any of them.

Every world returned by :func:`make_team_env` has the same interface (the training scripts rely on nothing else):

* attributes ``num_envs``, ``num_sides`` (2), ``num_heroes`` (N), ``num_actions`` (A), ``obs_shape`` (per hero),
  ``seconds_per_step``, ``score_names`` (C components, one of them ``"win"``), ``DEFAULT_SCORE_WEIGHTS``, ``bot_names``;
* ``reset() -> (obs, info)`` and ``step(actions int (E, 2, N)) -> (obs, scores, done, info)`` with ``obs`` float32
  (E, 2, N, *obs_shape), ``scores`` float32 (E, 2, N, C) (score-component changes of this step), ``done`` bool (E,)
  (reset the recurrent state and cut bootstrapping before the returned observation);
* ``info``: ``action_mask`` bool (E, 2, N, A), ``acting`` bool (E, 2, N) (whose action is applied), ``game_over``
  bool (E,) and ``outcome`` (E, 2) (+1 win, 0 draw, -1 loss) of games that ended on this step, ``game_length`` (E,),
  ``time`` (E,) (game seconds when this step's scores were earned, for the time decay);
* ``bot_actions(name, obs, info, side int (E,), rng, games=None) -> int (E, N)``: a scripted bot playing side
  ``side[e]`` in the games ``games`` (bool (E,); None: every game), 0 in the others (``name``: see :func:`plays`).

How each world resets a finished game (same-step or next-step autoreset) is documented in its module; ``done``
hides the difference from a training loop.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from cleanfive.envs.board import _BOT_NAME, BOARD_ENV_IDS, HELD_OUT_NAMES, BoardTeamEnv
from cleanfive.envs.football import FOOTBALL_ENV_IDS, FootballTeamEnv
from cleanfive.envs.moba import MOBA_ENV_IDS, make_moba
from cleanfive.trueskill_league import cached_ratings, fit_reference_ratings, rating_from_dict

TEAM_ENV_IDS: tuple[str, ...] = MOBA_ENV_IDS + FOOTBALL_ENV_IDS + BOARD_ENV_IDS


def world_defaults(env_id: str) -> dict:
    """The values of a training script's flags marked (world) in world ``env_id``: its ``world_args`` puts them in
    ``Args``, so that ``--help`` shows them, and its first line prints them. Raises ValueError for an unknown id."""
    # the board games', which the team worlds change; half of the games against the bots to the end: annealed to 0,
    # Connect Four stalled near `greedy`; a horizon of 10 plies (gamma 0.9), so that a win taken now beats the same win
    # later, and twice the team worlds' learning rate: with both, 62 % of Connect Four games against `lookahead` late
    # in 30 CPU minutes, 47 % without (docs/ppo_lstm_selfplay.md, Results). Their bot games are against the three rule
    # bots and the search bots up to `search3`, named (not (): every reference, `search4` too): with the square head
    # (--square-head, on by default), Connect Four's models beat those bots' held-out variants (docs/research-log.md,
    # issue 50). With the board's mirror images (--mirror, on by default) and the head, Connect Four's 3M steps took
    # 37 CPU minutes a run on an AVX-512 core in their screen (1.5M: 14); they beat 1.5M's models head to head in
    # every seed and keep the solved outcome more often (docs/research-log-board.md, issue 88); TicTacToe keeps 1.5M;
    # every world's schedule
    board = dict(num_heroes=1, num_envs=64, bot_fraction=0.5, bot_fraction_end=0.5, horizon_seconds=10.0)
    board |= dict(bot_opponents=("random", "greedy", "lookahead", "search1", "search2", "search3"), eval_every=10)
    board |= dict(learning_rate=2e-3, total_timesteps=1_500_000, num_minibatches=4)
    if env_id in BOARD_ENV_IDS:
        return board | (dict(total_timesteps=3_000_000) if env_id == "ConnectFour-v1" else {})
    # the lane world: 5 heroes and 64 games learn too slowly for an hour of CPU; a fifth of the early games against
    # the scripted bots (not in OpenAI Five), without which most seeds farm; its 800-step games make an evaluation
    # every 10 updates cost a third of a run's time (docs/ppo_lstm_selfplay.md)
    if env_id in MOBA_ENV_IDS:
        lane = dict(num_heroes=3, num_envs=32, bot_fraction=0.2, bot_fraction_end=0.0, eval_every=40, bot_opponents=())
        return board | lane | dict(horizon_seconds=100.0, learning_rate=1e-3, total_timesteps=3_000_000)
    # football: half of the games that are not against past versions against `random` to the end, as the board games;
    # 256 games an update in 16 minibatches (the board's minibatch size) for 6M steps: 40-41 CPU minutes on an AVX-512
    # core; they beat `vmas_ai50` and score against `vmas_ai`, which 64 games in 4 did not (docs/ppo_lstm_selfplay.md)
    if env_id in FOOTBALL_ENV_IDS:
        football = dict(num_heroes=2, num_envs=256, num_minibatches=16, total_timesteps=6_000_000, eval_every=24)
        return board | football | dict(bot_opponents=("random",), learning_rate=1e-3)
    raise ValueError(f"unknown env id {env_id!r}; accepted two-sided ids: {', '.join(TEAM_ENV_IDS)}")


def make_team_env(env_id: str, num_envs: int, seed: int, num_heroes: int | None = None, device: str = "cpu"):
    """The world ``env_id`` with ``num_envs`` games of ``num_heroes`` per side (None: the world's default); ``device``
    is where VMAS football simulates (the other worlds run on the CPU).

    Raises ValueError for an unknown id or a team size the world does not support, and
    :class:`cleanfive.envs.football.FootballUnavailable` when an optional extra is missing.
    """
    heroes = world_defaults(env_id)["num_heroes"] if num_heroes is None else num_heroes
    if env_id in MOBA_ENV_IDS:
        return make_moba(env_id, num_envs, seed, heroes)
    if env_id in FOOTBALL_ENV_IDS:
        return FootballTeamEnv(num_envs, seed, heroes, device=device)
    if heroes != 1:
        raise ValueError(f"{env_id} has one hero per side; got --num-heroes {heroes}")
    return BoardTeamEnv(env_id, num_envs, seed)


def plays(env, name: str) -> bool:
    """Whether the world ``env`` has a bot ``name``: one of its ``bot_names`` (the rated ladder) or, on the board
    games, one perturbed or with another leaf evaluation (``search2+random15``, ``centre2``: board.bot_actions)."""
    return name in env.bot_names or (isinstance(env, BoardTeamEnv) and _BOT_NAME.fullmatch(name) is not None)


def rung(name: str) -> str:
    """The ladder bot a board bot's strength is claimed against: itself, the bot it perturbs (``search2+random15``:
    ``search2``), or ``search<D>`` for ``centre<D>`` (the same search, another leaf evaluation)."""
    return name.split("+")[0].replace("centre", "search")


def held_out_bots(env) -> dict[str, str]:
    """The held-out references of the world ``env`` (issue 50), bots that no default trains against, each with the
    ladder bot whose :func:`rung` it sits on: the board games' perturbed bots (``board.HELD_OUT_NAMES``); none in the
    other worlds."""
    return {name: rung(name) for name in HELD_OUT_NAMES} if isinstance(env, BoardTeamEnv) else {}


def play_bots(
    env_id: str, bot_a: str, bot_b: str, num_games: int, seed: int, num_heroes: int | None = None
) -> np.ndarray:
    """Play ``num_games`` games of ``bot_a`` against ``bot_b``, one game per env, ``bot_a`` on side ``e % 2``.

    Returns float64 (num_games,): bot_a's score per game, 1 win / 0.5 draw / 0 loss.
    """
    env = make_team_env(env_id, num_games, seed, num_heroes)
    for name in (bot_a, bot_b):
        if not plays(env, name):
            raise ValueError(f"unknown bot {name!r} for {env_id}; expected one of {env.bot_names}")
    rng = np.random.default_rng(seed)
    side_a = np.arange(num_games) % 2
    rows = np.arange(num_games)
    scores = np.full(num_games, np.nan)
    obs, info = env.reset()
    while np.isnan(scores).any():
        actions = np.zeros((num_games, 2, env.num_heroes), dtype=np.int64)
        actions[rows, side_a] = env.bot_actions(bot_a, obs, info, side_a, rng)
        actions[rows, 1 - side_a] = env.bot_actions(bot_b, obs, info, 1 - side_a, rng)
        obs, _, _, info = env.step(actions)
        ended = info["game_over"] & np.isnan(scores)  # only the first game of each env counts
        scores[ended] = (info["outcome"][ended, side_a[ended]] + 1.0) / 2.0
    return scores


SHIPPED_RATINGS = Path(__file__).with_name("reference_ratings.json")  # written by benchmark/reference_ratings.py
# the code behind every world's ratings beside the world's own module: the bot games (this module) and the fit
RATING_CODE = (Path(__file__), Path(__file__).parents[1] / "trueskill_league.py")


def ratings_key(env, env_id: str, references: list[str], games: int) -> str:
    """The name of the reference ratings of the world ``env`` (``make_team_env(env_id, ...)``): world, team size, bot
    set, games per pair and the version of the code that makes a rating (a hash of the world's module, bots included,
    of this module, which plays the bot games, and of trueskill_league.py, which fits them)."""
    digest = hashlib.sha256()
    for path in (Path(sys.modules[type(env).__module__].__file__), *RATING_CODE):
        digest.update(path.read_bytes())
    return "__".join([env_id, f"{env.num_heroes}_heroes", *references, f"{games}_games", digest.hexdigest()[:8]])


def fit_bots(env_id: str, num_heroes: int, references: list[str], games: int) -> dict:
    """Ratings of the bots ``references`` from ``games`` games per pair among them (seed 0), the first pinned at
    mu = 0 (OpenAI Five, Appendix J); prints a line at the start and every 10 s while it plays."""
    pairs = [(a, b) for i, a in enumerate(references) for b in references[i + 1 :]]
    print(f"rating the references of {env_id} once: {len(pairs)} pairs x {games} games", flush=True)
    results, start, shown = [], time.time(), time.time()
    for done, (a, b) in enumerate(pairs, 1):
        results += [(a, b, float(s)) for s in play_bots(env_id, a, b, games, 0, num_heroes)]
        if time.time() - shown > 10 or done == len(pairs):
            shown = time.time()
            print(f"  {done}/{len(pairs)} pairs played in {shown - start:.0f}s", flush=True)
    ratings = fit_reference_ratings(results, anchor=references[0])
    print(f"  ratings fitted to the {len(results)} games in {time.time() - start:.0f}s in all", flush=True)
    return ratings


def rate_bots(env, env_id: str, references: list[str], games: int, cache_dir: str = "runs/reference_ratings") -> dict:
    """Ratings of the bots ``references`` of the world ``env`` (``make_team_env(env_id, ...)``) from ``games`` games
    per pair among them (:func:`fit_bots`). Those that ship with the package (``SHIPPED_RATINGS``: every world's
    default references at the scripts' default games) are read when world, team size, bot set, games and code version
    match; others are played once and kept as JSON in ``cache_dir``, which later runs read instead."""
    key = ratings_key(env, env_id, references, games)
    shipped = json.loads(SHIPPED_RATINGS.read_text()) if SHIPPED_RATINGS.exists() else {}
    if key in shipped:
        return {name: rating_from_dict(r) for name, r in shipped[key]["ratings"].items()}
    compute = functools.partial(fit_bots, env_id, env.num_heroes, list(references), games)
    return cached_ratings(f"{cache_dir}/{key}.json", compute)
