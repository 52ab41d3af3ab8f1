"""Every world driven with random actions, illegal ones included where the world has masks, and random resets.

Each step is checked against the interface the scripts rely on (cleanfive/envs/teams.py, microrts.py, atari.py):
no crash, masks of the right shape and dtype with at least one legal action per hero or unit (and the no-op legal
where the world has one), finite observations and rewards, outcomes in {-1, 0, +1} and opposite for the two sides,
game lengths within the world's cap and equal to the steps actually played.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from needs import needs_microrts

from cleanfive.envs.atari import EpisodeStatistics, make_atari
from cleanfive.envs.board import BOARD_ENV_IDS
from cleanfive.envs.football import FOOTBALL_ENV_IDS, FootballTeamEnv
from cleanfive.envs.moba import MAX_STEPS, NOOP
from cleanfive.envs.teams import make_team_env

FOOTBALL_CAP = 100  # VMAS football games capped at 100 steps here (500 in training): the same code, less physics
# world -> (heroes per side, envs, steps, cap on a game's length, what an illegal action does)
TEAM_WORLDS = {
    "Moba5v5-v0": (5, 8, 1000, MAX_STEPS, "no-op"),
    "Moba5v5-v1": (3, 8, 1000, MAX_STEPS, "no-op"),
    "VmasFootball-v0": (2, 2, 250, FOOTBALL_CAP, None),  # every action of the space is legal
    "ConnectFour-v1": (None, 8, 1500, 42, "raises"),  # 6 x 7 stones
    "TicTacToe-v1": (None, 8, 1500, 9, "raises"),
}


def check_team_step(env, obs, scores, done, info):
    """The interface of cleanfive.envs.teams for one step's returns."""
    E, N, A = env.num_envs, env.num_heroes, env.num_actions
    assert obs.shape == (E, 2, N, *env.obs_shape) and obs.dtype == np.float32 and np.isfinite(obs).all()
    assert scores.shape == (E, 2, N, len(env.score_names)) and np.isfinite(scores).all()
    assert done.shape == (E,) and done.dtype == bool
    mask, acting = info["action_mask"], info["acting"]
    assert mask.shape == (E, 2, N, A) and mask.dtype == bool and mask.any(-1).all(), "a hero without a legal action"
    assert acting.shape == (E, 2, N) and acting.dtype == bool
    over = info["game_over"]
    assert over.shape == (E,) and over.dtype == bool and (done | ~over).all(), "a game ended without done"
    outcome = info["outcome"]
    assert set(np.unique(outcome[over])) <= {-1, 0, 1} and (outcome[over, 0] == -outcome[over, 1]).all()
    assert (outcome[~over] == 0).all() and (info["game_length"][~over] == 0).all()
    assert np.isfinite(info["time"]).all() and (info["time"] >= 0).all()


def a_few_moves_in(env_id):
    """The world ``env_id`` after 3 steps of random moves, so that both sides have something to do: (env, obs, info)."""
    heroes, E, *_ = TEAM_WORLDS[env_id]
    env = make_team_env(env_id, E, seed=3, num_heroes=heroes)
    obs, info = env.reset()
    for _ in range(3):
        actions = np.stack(
            [env.bot_actions("random", obs, info, np.full(E, s), np.random.default_rng(s)) for s in (0, 1)], 1
        )
        obs, _, _, info = env.step(actions)
    return env, obs, info


@pytest.mark.parametrize("env_id", list(TEAM_WORLDS))
def test_a_bot_moves_in_its_own_games_only(env_id):
    """bot_actions(..., games): legal moves in `games` where its side acts, 0 in the other games; the vectorised
    rules (lane world, football) give the same moves there as without `games`, from the same draws (asked of a twin
    of the world at the same point: a bot may keep a plan from call to call, as VMAS's scripted team does)."""
    env, obs, info = a_few_moves_in(env_id)
    E = env.num_envs
    side, games = np.arange(E) % 2, np.arange(E) % 3 != 1
    legal = info["action_mask"][np.arange(E), side]  # (E, N, A)
    twin, twin_obs, twin_info = a_few_moves_in(env_id)
    for name in env.bot_names:
        mine = env.bot_actions(name, obs, info, side, np.random.default_rng(0), games)
        assert mine.shape == (E, env.num_heroes) and (mine[~games] == 0).all(), name
        moves = games[:, None] & info["acting"][np.arange(E), side]
        assert np.take_along_axis(legal, mine[..., None], -1)[..., 0][moves].all(), f"{name}: an illegal move"
        if env_id not in BOARD_ENV_IDS:
            every = twin.bot_actions(name, twin_obs, twin_info, side, np.random.default_rng(0))
            np.testing.assert_array_equal(mine[games], every[games], err_msg=name)


@pytest.mark.parametrize("env_id", list(TEAM_WORLDS))
def test_team_world_survives_random_and_illegal_actions_and_resets(env_id):
    heroes, E, steps, cap, illegal = TEAM_WORLDS[env_id]
    if env_id in FOOTBALL_ENV_IDS:
        env = FootballTeamEnv(E, seed=7, num_heroes=heroes, max_steps=cap)
    else:
        env = make_team_env(env_id, E, seed=7, num_heroes=heroes)
    rng = np.random.default_rng(7)
    resets = set(rng.integers(1, steps - cap - 1, size=2))  # early enough to leave room for whole games
    obs, info = env.reset()
    played = np.zeros(E, dtype=np.int64)  # steps of each env's current game, counted here
    lengths = []
    for t in range(steps):
        if t in resets:
            obs, info = env.reset()
            played[:] = 0
        mask = info["action_mask"]
        actions = (rng.random(mask.shape) * mask).argmax(-1)  # a random legal action per hero
        if illegal == "no-op":  # and random, often illegal or out-of-range, actions for some heroes
            wild = rng.random(actions.shape) < 0.3
            actions = np.where(wild, rng.integers(-2, env.num_actions + 2, size=actions.shape), actions)
        if illegal == "raises":  # the board wrapper refuses an illegal move of the side to move...
            acting_env = np.flatnonzero(info["acting"][..., 0].any(1))
            if acting_env.size and t % 7 == 0:
                e = acting_env[0]
                side = int(np.flatnonzero(info["acting"][e, :, 0])[0])
                bad = actions.copy()
                bad[e, side, 0] = np.flatnonzero(~mask[e, side, 0])[0] if not mask[e, side, 0].all() else -1
                with pytest.raises(ValueError):
                    env.step(bad)
            # ...and ignores whatever the side not to move sends
            actions = np.where(info["acting"], actions, rng.integers(-5, 50, size=actions.shape))
        obs, scores, done, info = env.step(actions)
        check_team_step(env, obs, scores, done, info)
        over = info["game_over"]
        played += 1
        length = info["game_length"][over]
        assert ((1 <= length) & (length <= cap)).all(), length
        if env_id in BOARD_ENV_IDS:  # next-step autoreset: the final board holds one stone per move of the game
            assert (length == (info["board"][over] >= 0).sum((1, 2))).all()
            assert (info["acting"].sum((1, 2)) == ~over).all(), "exactly one side moves, none on a final board"
        else:  # same-step autoreset: the game lasted the steps played since it began
            assert (length == played[over]).all(), (length, played[over])
            played[over] = 0
        if env_id.startswith("Moba"):  # the no-op is always legal; a dead hero may only no-op
            assert info["action_mask"][..., NOOP].all()
            assert not info["action_mask"][~info["acting"]][:, NOOP + 1 :].any()
        lengths += length.tolist()
    assert lengths, f"no game of {env_id} ended in {steps} steps: the checks of outcomes and lengths did not run"


def test_atari_survives_random_actions_and_resets():
    envs = make_atari("Breakout-v5", 4, 3)
    rng = np.random.default_rng(3)
    obs, _ = envs.reset()
    stats = EpisodeStatistics(4)
    returns, lengths = [], []
    resets = set(rng.integers(1, 600, size=2))
    for t in range(1500):
        if t in resets:
            obs, _ = envs.reset()
            stats = EpisodeStatistics(4)
        obs, reward, terminated, truncated, info = envs.step(rng.integers(envs.action_space.n, size=4))
        assert obs.shape == (4, 4, 84, 84) and obs.dtype == np.uint8 and (info["env_id"] == np.arange(4)).all()
        assert set(np.unique(reward)) <= {-1.0, 0.0, 1.0} and np.isfinite(info["reward"]).all()
        _, game_returns, game_lengths = stats.update(info, truncated)
        returns += game_returns.tolist()
        lengths += game_lengths.tolist()
    assert returns, "no game ended"
    assert np.isfinite(returns).all() and min(returns) >= 0  # Breakout scores only go up
    assert 1 <= min(lengths) and max(lengths) <= 27_000  # envpool's max_episode_steps


def fuzz_microrts():
    """Run in a subprocess of its own (a JVM starts once per process): raises AssertionError on a failed check."""
    from cleanfive.envs.microrts import ACTION_DIMS, MicrortsGridEnv

    offsets = np.cumsum((0,) + ACTION_DIMS[:-1])
    # the components each action type reads: NOOP none, move, harvest, return, produce direction + type, attack
    uses = [[], [1], [2], [3], [4, 5], [6]]
    max_steps, E = 100, 4
    env = MicrortsGridEnv("maps/4x4/basesWorkers4x4.xml", 2, ["randomAI", "passiveAI"], max_steps, (10, 1, 1, 1, 1, 1))
    rng = np.random.default_rng(5)
    obs, info = env.reset()
    finished = 0
    resets = set(rng.integers(1, 300, size=2))
    for t in range(600):
        if t in resets:
            obs, info = env.reset()
        mask = info["action_mask"]
        cells = obs.reshape(E, -1, 27)
        assert obs.shape == (E, 4, 4, 27) and mask.shape == (E, 16, 78) and mask.dtype == bool
        assert (cells[..., 13:21].sum(-1) == 1).all() and (cells[..., 10:13].sum(-1) == 1).all(), "one-hot planes"
        available = mask.any(-1)
        assert (cells[available][:, 15:21].sum(-1) == 1).all(), "an available cell that holds no own unit"
        assert mask[available][:, 0].all(), "an available unit that cannot NOOP"
        for kind, components in enumerate(uses):  # a legal action type has a legal choice in every component
            legal = mask[..., kind]
            for c in components:
                assert mask[legal][:, offsets[c] : offsets[c] + ACTION_DIMS[c]].any(-1).all(), (kind, c)
        # random actions on every cell, most of them illegal, and masked random ones on some cells
        actions = np.stack([rng.integers(d, size=(E, 16)) for d in ACTION_DIMS], -1)
        noisy = rng.random(mask.shape) * mask
        masked = np.stack([noisy[..., o : o + d].argmax(-1) for o, d in zip(offsets, ACTION_DIMS, strict=True)], -1)
        actions = np.where(rng.random((E, 16, 1)) < 0.5, masked, actions)
        obs, reward, terminated, truncated, info = env.step(actions)
        assert reward.shape == (E,) and np.isfinite(reward).all() and np.isfinite(info["raw_rewards"]).all()
        ended = info.get("_episode", np.zeros(E, dtype=bool))
        assert ((terminated | truncated) == ended).all() and not (terminated & truncated).any()
        if ended.any():
            episode = info["episode"]
            assert ((1 <= episode["l"][ended]) & (episode["l"][ended] <= max_steps)).all()
            assert np.isfinite(episode["r"][ended]).all() and set(episode["raw"][ended, 0]) <= {-1.0, 0.0, 1.0}
            assert (ended[0] == ended[1]) and (episode["raw"][0, 0] == -episode["raw"][1, 0] or not ended[0])
            finished += int(ended.sum())
    assert finished >= E, "too few games ended for the outcome checks to mean anything"
    env.close()


@needs_microrts
def test_microrts_survives_random_and_illegal_actions_and_resets():
    here = Path(__file__).parent
    code = f"import sys; sys.path.insert(0, {str(here)!r}); from test_worlds_fuzz import fuzz_microrts; fuzz_microrts()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
