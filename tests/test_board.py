"""Tests for cleanfive/envs/board.py: envpool's conventions, the team wrapper, win detection and the scripted bots."""

from __future__ import annotations

import itertools

import envpool
import numpy as np
import pytest
import torch

from cleanfive.envs import teams
from cleanfive.envs.board import (
    BOARD_ENV_IDS,
    BOT_NAMES,
    HELD_OUT_NAMES,
    BoardTeamEnv,
    bot_actions,
    has_won,
    legal_actions,
    mover,
    play_all,
    winning_moves,
)
from cleanfive.envs.teams import make_team_env, play_bots, plays, rate_bots
from cleanfive.trueskill_league import fit_reference_ratings

SHAPES = {"ConnectFour-v1": (6, 7), "TicTacToe-v1": (3, 3)}


# ---------------------------------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------------------------------


def _align(obs, info, reward=None, terminated=None):
    """Raw envpool output in env order: per-env arrays (E, ...) and per-player arrays (E, 2, ...)."""
    ids = info["env_id"]
    pe, pid = info["players"]["env_id"], info["players"]["id"]
    e = len(ids)
    out = {}
    for key in ("board", "current_player", "legal_action_mask", "elapsed_step"):
        out[key] = np.empty_like(info[key])
        out[key][ids] = info[key]
    out["obs"] = np.empty((e, 2, *obs.shape[1:]), dtype=obs.dtype)
    out["obs"][pe, pid] = obs
    if reward is not None:
        out["reward"] = np.full((e, 2), np.nan, dtype=np.float32)
        out["reward"][pe, pid] = reward
        out["terminated"] = np.empty(e, dtype=bool)
        out["terminated"][ids] = terminated
    return out


def _random_actions(info, rng):
    """Uniform legal action for every hero, from the wrapper's action mask: int (E, 2, 1)."""
    mask = info["action_mask"]
    return np.where(mask, rng.random(mask.shape), -1.0).argmax(-1)


def _brute_force_won(board, player, k):
    """Loop-based reference: does ``player`` have k in a row on a single (H, W) board?"""
    h, w = board.shape
    for r, c in itertools.product(range(h), range(w)):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            cells = [(r + i * dr, c + i * dc) for i in range(k)]
            if all(0 <= rr < h and 0 <= cc < w and board[rr, cc] == player for rr, cc in cells):
                return True
    return False


def _rollout(env_id, num_envs, seed, steps, actions_seed=0):
    """Random legal play through the wrapper; returns the list of (obs, reward, done, info) after reset and steps."""
    env = BoardTeamEnv(env_id, num_envs, seed)
    rng = np.random.default_rng(actions_seed)
    obs, info = env.reset()
    records = [(obs, None, None, info)]
    for _ in range(steps):
        obs, reward, done, info = env.step(_random_actions(info, rng))
        records.append((obs, reward, done, info))
    env.close()
    return records


def _positions(env_id, num_envs=64, steps=60, seed=0):
    """Random mid-game positions in side ids with the side to move: boards int (N, H, W), players int (N,)."""
    boards, players = [], []
    for _, _, _, info in _rollout(env_id, num_envs, seed, steps)[1:]:
        live = info["acting"][:, :, 0].any(1)
        boards.append(info["board"][live])
        players.append(info["acting"][live, :, 0].argmax(1))
    return np.concatenate(boards), np.concatenate(players)


# ---------------------------------------------------------------------------------------------------------------------
# envpool's own conventions (fail loudly if a future envpool changes them)
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_envpool_quirks(env_id):
    """Board holds colours (colour 0 moves first), current_player is a player id drawn at random on every reset."""
    e = 64
    raw = envpool.make(env_id, env_type="gymnasium", num_envs=e, seed=0)
    rng = np.random.default_rng(0)
    obs, info = raw.reset()
    fresh = np.ones(e, dtype=bool)  # this obs starts a game (after reset or autoreset)
    terminal = np.zeros(e, dtype=bool)  # this obs ends a game
    first_player_counts = np.zeros(2, dtype=int)
    for _ in range(400):
        # per-player rows (obs, reward) follow the info rows, in pairs (player 0, player 1)
        assert np.array_equal(np.sort(info["env_id"]), np.arange(e))
        assert np.array_equal(info["players"]["env_id"], np.repeat(info["env_id"], 2))
        assert np.array_equal(info["players"]["id"], np.tile([0, 1], e))
        cur = _align(obs, info)
        board, current = cur["board"], cur["current_player"]
        n0, n1 = (board == 0).sum((1, 2)), (board == 1).sum((1, 2))
        assert np.all((n0 - n1 == 0) | (n0 - n1 == 1)), "colour 0 always moves first"
        assert np.array_equal(n0 + n1 == 0, fresh), "a new game (empty board) starts exactly after a terminal step"
        assert (cur["elapsed_step"] == n0 + n1).all()
        first_player_counts += np.bincount(current[fresh], minlength=2)
        # the player to move owns the colour to move; each player's obs shows its own colour in plane 0
        colour_to_move = (n0 > n1).astype(int)
        for p in (0, 1):
            colour = np.where(current == p, colour_to_move, 1 - colour_to_move)
            assert np.array_equal(cur["obs"][:, p, ..., 0], board == colour[:, None, None])
            assert np.array_equal(cur["obs"][:, p, ..., 1], board == 1 - colour[:, None, None])
        legal = legal_actions(board, env_id)
        assert np.array_equal(cur["legal_action_mask"][~terminal], legal[~terminal])
        assert cur["legal_action_mask"][terminal].all(), "mask is all True on terminal steps"
        # a random legal move; on the terminal obs send an out-of-range action: the reset step ignores it
        action = np.where(legal, rng.random(legal.shape), -1).argmax(1).astype(np.int32)
        action[terminal] = -3
        obs, reward, terminated, truncated, info = raw.step(action)
        nxt = _align(obs, info, reward, terminated)
        assert not truncated.any()
        assert not nxt["terminated"][terminal].any() and (nxt["reward"][terminal] == 0).all()
        assert (nxt["reward"][~nxt["terminated"]] == 0).all()
        fresh, terminal = terminal, nxt["terminated"]
    assert first_player_counts.sum() > 400
    assert 0.35 < first_player_counts[0] / first_player_counts.sum() < 0.65, "first player is random per game"
    raw.close()


def test_envpool_illegal_move_loses():
    """envpool ends the game on an illegal move: the mover gets -1, the other player +1."""
    raw = envpool.make("ConnectFour-v1", env_type="gymnasium", num_envs=2, seed=0)
    raw.reset()
    for _ in range(6):  # alternate colours in column 0: full column, no winner
        obs, reward, terminated, _, info = raw.step(np.zeros(2, dtype=np.int32))
        assert not terminated.any()
    cur = _align(obs, info)
    current = cur["current_player"]
    assert not cur["legal_action_mask"][:, 0].any()
    obs, reward, terminated, _, info = raw.step(np.zeros(2, dtype=np.int32))
    nxt = _align(obs, info, reward, terminated)
    assert nxt["terminated"].all()
    expected = np.where(np.arange(2)[None, :] == current[:, None], -1.0, 1.0)
    assert np.array_equal(nxt["reward"], expected)
    raw.close()


# ---------------------------------------------------------------------------------------------------------------------
# the wrapper against raw envpool, step by step
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_wrapper_matches_raw_envpool(env_id):
    e = 32
    env = BoardTeamEnv(env_id, e, seed=7)
    raw = envpool.make(env_id, env_type="gymnasium", num_envs=e, seed=7)
    rng = np.random.default_rng(1)
    obs, info = env.reset()
    robs, rinfo = raw.reset()
    cur = _align(robs, rinfo)
    prev_over = np.zeros(e, dtype=bool)
    for _ in range(300):
        board, current = cur["board"], cur["current_player"]
        colour_to_move = (board == 0).sum((1, 2)) > (board == 1).sum((1, 2))
        first = current ^ colour_to_move
        assert np.array_equal(info["first_side"], first)
        assert np.array_equal(info["board"], np.where(board < 0, -1, board ^ first[:, None, None]))
        # observation planes 0/1 of side s are envpool's own-perspective obs of player s
        assert np.array_equal(obs[:, :, 0, :2], np.moveaxis(cur["obs"], -1, 2).astype(np.float32))
        live = ~info["game_over"]
        acting_side = info["acting"][:, :, 0].argmax(1)
        assert np.array_equal(acting_side[live], current[live]), "acting side is envpool's current player"
        assert np.array_equal(info["action_mask"][live, acting_side[live], 0], cur["legal_action_mask"][live])
        actions = _random_actions(info, rng)
        obs, reward, done, info = env.step(actions)
        robs, rreward, rterm, _, rinfo = raw.step(actions[np.arange(e), current, 0].astype(np.int32))
        cur = _align(robs, rinfo, rreward, rterm)
        assert np.array_equal(info["game_over"], cur["terminated"])
        assert np.array_equal(info["outcome"], cur["reward"])
        assert np.array_equal(reward[:, :, 0, 0], cur["reward"])
        assert np.array_equal(done, cur["terminated"] | prev_over)
        prev_over = info["game_over"]
    env.close()
    raw.close()


# ---------------------------------------------------------------------------------------------------------------------
# the wrapper's own invariants
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_wrapper_invariants(env_id):
    h, w = SHAPES[env_id]
    k = 4 if env_id == "ConnectFour-v1" else 3
    records = _rollout(env_id, 64, seed=3, steps=400)
    obs, _, _, info = records[0]
    env = BoardTeamEnv(env_id, 2, 0)
    assert obs.shape == (64, 2, 1, *env.obs_shape) and obs.dtype == np.float32
    assert env.obs_shape == (3, h, w) and env.board_shape == (h, w) and env.num_actions == (7 if h == 6 else 9)
    assert env.num_sides == 2 and env.num_heroes == 1
    env.close()
    assert not info["game_over"].any() and (info["board"] == -1).all()
    assert np.array_equal(info["acting"][:, :, 0].argmax(1), info["first_side"])
    prev_info = info
    firsts = []
    games = 0
    for obs, reward, done, info in records[1:]:
        board, acting, over = info["board"], info["acting"][:, :, 0], info["game_over"]
        assert obs.dtype == np.float32 and reward.dtype == np.float32 and done.dtype == bool
        assert reward.shape == (64, 2, 1, 1) and done.shape == (64,) and info["action_mask"].shape[:3] == (64, 2, 1)
        # done on the terminal step and on the following reset step
        new_game = prev_info["game_over"]
        assert np.array_equal(done, over | new_game)
        assert (board[new_game] == -1).all() and not over[new_game].any()
        # exactly one acting hero on live obs, none on terminal obs
        assert np.array_equal(acting.sum(1), np.where(over, 0, 1))
        # the mover follows from stone counts and the first side, which only changes with a new game
        first = info["first_side"]
        n_first = (board == first[:, None, None]).sum((1, 2))
        n_second = (board == 1 - first[:, None, None]).sum((1, 2))
        assert np.all((n_first - n_second == 0) | (n_first - n_second == 1))
        assert np.array_equal(first[~new_game], prev_info["first_side"][~new_game])
        firsts.append(first[new_game])
        side = mover(board, first)
        assert np.array_equal(acting.argmax(1)[~over], side[~over])
        # masks: legal moves for the acting side, all True for everyone else
        legal = legal_actions(board, env_id)
        mask = info["action_mask"][:, :, 0]
        assert np.array_equal(mask[~over, side[~over]], legal[~over])
        assert mask[np.arange(64), 1 - side].all() and mask[over].all()
        # observation planes from each side's perspective
        for s in (0, 1):
            assert np.array_equal(obs[:, s, 0, 0], board == s)
            assert np.array_equal(obs[:, s, 0, 1], board == 1 - s)
            assert np.array_equal(obs[:, s, 0, 2], np.broadcast_to(acting[:, s, None, None], (64, h, w)))
        # outcomes: own win detection agrees with envpool's terminal rewards
        won0, won1 = has_won(board, 0, env_id), has_won(board, 1, env_id)
        full = (board >= 0).all((1, 2))
        assert not (won0 | won1 | full)[~over].any(), "no win/full board on live obs"
        assert np.array_equal(over, (won0 | won1 | full) & ~new_game)
        expected = np.stack([won0.astype(np.float32) - won1, won1.astype(np.float32) - won0], 1)
        assert np.array_equal(info["outcome"], np.where(over[:, None], expected, 0.0))
        assert np.array_equal(reward[:, :, 0, 0], info["outcome"])
        assert (info["outcome"].sum(1) == 0).all()
        assert np.array_equal(info["game_length"], np.where(over, (board >= 0).sum((1, 2)), 0))
        assert (info["game_length"][over] >= 2 * k - 1).all()
        games += int(over.sum())
        prev_info = info
    assert games > 200
    firsts = np.concatenate(firsts)
    assert 0.3 < firsts.mean() < 0.7, "the first side is random per game"


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_non_mover_action_ignored(env_id):
    """Whatever the non-acting side sends (even out of range) does not change the trajectory."""
    a, b = BoardTeamEnv(env_id, 16, 5), BoardTeamEnv(env_id, 16, 5)
    rng = np.random.default_rng(0)
    _, info_a = a.reset()
    _, info_b = b.reset()
    for _ in range(100):
        actions = _random_actions(info_a, rng)
        garbage = np.where(info_a["acting"], actions, rng.integers(-5, 20, actions.shape))
        obs_a, rew_a, done_a, info_a = a.step(actions)
        obs_b, rew_b, done_b, info_b = b.step(garbage)
        assert np.array_equal(obs_a, obs_b) and np.array_equal(rew_a, rew_b) and np.array_equal(done_a, done_b)
        assert np.array_equal(info_a["board"], info_b["board"])
    a.close()
    b.close()


def test_illegal_mover_action_raises():
    env = BoardTeamEnv("TicTacToe-v1", 2, 0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((2, 2, 1), dtype=np.int64))
    _, info = env.reset()
    actions = np.zeros((2, 2, 1), dtype=np.int64)  # both play cell 0
    _, _, _, info = env.step(actions)
    with pytest.raises(ValueError, match="illegal"):
        env.step(actions)  # cell 0 is now taken in both envs
    with pytest.raises(ValueError, match="illegal"):
        env.step(np.full((2, 2, 1), 9))
    with pytest.raises(ValueError, match="shape"):
        env.step(np.zeros((2, 2), dtype=np.int64))
    env.close()


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_same_seed_same_trajectory(env_id):
    run_a, run_b = _rollout(env_id, 16, 11, 80), _rollout(env_id, 16, 11, 80)
    for (obs_a, rew_a, done_a, info_a), (obs_b, rew_b, done_b, info_b) in zip(run_a, run_b, strict=True):
        assert np.array_equal(obs_a, obs_b) and np.array_equal(rew_a, rew_b) and np.array_equal(done_a, done_b)
        for key in info_a:
            assert np.array_equal(info_a[key], info_b[key]), key
    other = _rollout(env_id, 16, 12, 80)
    assert any(not np.array_equal(x[0], y[0]) for x, y in zip(run_a, other, strict=True))


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_mirror_image_of_every_move_plays_the_mirrored_game(env_id):
    """--mirror's premise: a world that plays, from the same seed, the mirror image of every move of another is that
    world's game flipped left to right: observations flipped on their last axis, legal moves mirrored, the same
    rewards and game ends. Checked against the boards themselves, over games that end and restart."""
    env, image_env = BoardTeamEnv(env_id, 16, 5), BoardTeamEnv(env_id, 16, 5)
    image, w = env.mirror_actions, env.board_shape[1]
    assert sorted(image) == list(range(env.num_actions)) and np.array_equal(image[image], np.arange(env.num_actions))
    assert not np.array_equal(image, np.arange(env.num_actions))
    rng = np.random.default_rng(0)
    (obs, info), (image_obs, image_info) = env.reset(), image_env.reset()
    ends = 0
    for _ in range(60 if env_id == "ConnectFour-v1" else 20):
        assert np.array_equal(image_obs, obs[..., ::-1])
        assert np.array_equal(image_info["board"], info["board"][..., ::-1])
        assert np.array_equal(image_info["action_mask"], info["action_mask"][..., image])
        actions = _random_actions(info, rng)
        # the world's mirror(), which --mirror applies to a rollout's rows, gives the image world's rows
        rows = (obs.reshape(-1, *env.obs_shape), info["action_mask"].reshape(-1, env.num_actions), actions.reshape(-1))
        images = (image_obs, image_info["action_mask"], image[actions])
        for got, want in zip(env.mirror(*map(torch.as_tensor, rows)), images, strict=True):
            assert np.array_equal(got.numpy(), want.reshape(got.shape))
        obs, reward, done, info = env.step(actions)
        image_obs, image_reward, image_done, image_info = image_env.step(image[actions])
        assert np.array_equal(image_reward, reward) and np.array_equal(image_done, done)
        ends += int(info["game_over"].sum())
    assert ends > 0
    # one move by hand: the leftmost column / top-left cell is the rightmost column / top-right cell's image
    assert image[0] == w - 1 and image[w - 1] == 0 and (env.num_actions == w or image[w] == 2 * w - 1)
    env.close()
    image_env.close()


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_random_openings_are_the_worlds_moves_and_decide_no_game(env_id):
    """--random-openings: each game's first k moves, k uniform in 0..2 (L - 1), are uniform legal moves that the world
    plays whatever actions it is given, with nobody acting; no game ends inside one (no side has L stones), and the
    moves after it are the sides' own. Two worlds of one seed, given other actions in the openings only, play the same
    games; without the flag every game opens with its first side's decision."""
    plies = {"ConnectFour-v1": 6, "TicTacToe-v1": 4}[env_id]
    worlds = [BoardTeamEnv(env_id, 64, 3) for _ in range(2)]
    for world in worlds:
        world.random_openings = True
        assert world.opening_plies == plies
    (_, info), (_, other_info) = (world.reset() for world in worlds)
    rng, openings, ends = np.random.default_rng(0), [], 0
    waiting = np.ones(64, dtype=bool)  # a game whose first decision is still to come
    for _ in range(120 if env_id == "ConnectFour-v1" else 60):
        nobody = ~info["acting"].any((1, 2)) & ~info["game_over"]
        stones = (info["board"] >= 0).sum((1, 2))
        first = waiting & ~nobody & ~info["game_over"]
        openings += stones[first].tolist()  # the opening's length: the stones at the first decision
        waiting &= ~first
        assert np.array_equal(info["action_mask"][nobody], np.ones_like(info["action_mask"][nobody]))
        actions = _random_actions(info, rng)
        other = np.where(nobody[:, None, None], (actions + 1) % worlds[0].num_actions, actions)  # ignored
        (_, _, _, info), (_, _, _, other_info) = worlds[0].step(actions), worlds[1].step(other)
        assert np.array_equal(info["board"], other_info["board"])
        assert not (info["game_over"] & nobody).any()  # a game ends on a side's move, never on the world's
        ends += int(info["game_over"].sum())
        waiting |= info["game_over"]
    counts = np.bincount(openings, minlength=plies + 1)
    assert len(counts) == plies + 1 and counts.min() >= 0.5 * len(openings) / (plies + 1), counts  # each k, often
    assert ends > 64
    plain = BoardTeamEnv(env_id, 64, 3)
    _, info = plain.reset()
    assert np.array_equal(info["acting"].any((1, 2)), np.ones(64, dtype=bool))  # every game: its first decision
    for world in [*worlds, plain]:
        world.close()


def test_wrong_env_id_raises():
    with pytest.raises(ValueError) as err:
        BoardTeamEnv("Pong-v5", 2, 0)
    assert all(env_id in str(err.value) for env_id in BOARD_ENV_IDS)
    with pytest.raises(ValueError, match="ConnectFour-v1"):
        legal_actions(np.full((1, 3, 3), -1), "Othello-v1")
    with pytest.raises(ValueError, match="lookahead"):
        bot_actions("minimax", np.full((1, 3, 3), -1), 0, "TicTacToe-v1", np.random.default_rng(0))


# ---------------------------------------------------------------------------------------------------------------------
# board helpers
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_has_won_matches_brute_force(env_id):
    h, w = SHAPES[env_id]
    k = 4 if env_id == "ConnectFour-v1" else 3
    rng = np.random.default_rng(0)
    boards = rng.choice([-1, 0, 1], size=(400, h, w), p=[0.3, 0.35, 0.35])
    boards = np.concatenate([boards, _positions(env_id, steps=20)[0][:400]])
    for player in (0, 1):
        expected = np.array([_brute_force_won(b, player, k) for b in boards])
        assert np.array_equal(has_won(boards, player, env_id), expected)
        assert 0 < expected.sum() < len(boards)


def test_connect_four_helpers_by_hand():
    board = np.full((1, 6, 7), -1)
    board[0, 5] = [0, 0, 0, -1, 1, 1, -1]  # three in a row at the bottom for side 0
    board[0, 4, 4] = 1
    assert np.array_equal(legal_actions(board, "ConnectFour-v1"), np.ones((1, 7), dtype=bool))
    assert np.flatnonzero(winning_moves(board, 0, "ConnectFour-v1")[0]).tolist() == [3]
    assert not winning_moves(board, 1, "ConnectFour-v1").any()
    after = play_all(board, 1, "ConnectFour-v1")[0]
    assert after[6, 5, 6] == 1 and after[4, 3, 4] == 1 and after[3, 5, 3] == 1  # stones fall on top of columns
    assert (after != board[0]).sum((1, 2)).tolist() == [1] * 7
    rng = np.random.default_rng(0)
    for name in ("greedy", "lookahead"):
        assert bot_actions(name, board, np.array([0]), "ConnectFour-v1", rng).tolist() == [3]  # win
        assert bot_actions(name, board, np.array([1]), "ConnectFour-v1", rng).tolist() == [3]  # block
    # vertical threat: side 1 has three in column 2; side 0 must block there
    board = np.full((1, 6, 7), -1)
    board[0, 3:, 2] = 1
    board[0, 5, [0, 1, 4]] = 0
    assert np.flatnonzero(winning_moves(board, 1, "ConnectFour-v1")[0]).tolist() == [2]
    assert bot_actions("greedy", board, 0, "ConnectFour-v1", rng).tolist() == [2]
    # full column is illegal
    board = np.full((1, 6, 7), -1)
    board[0, :, 0] = [0, 1, 0, 1, 0, 1]
    assert legal_actions(board, "ConnectFour-v1")[0].tolist() == [False] + [True] * 6


def test_lookahead_does_not_play_under_opponent_win():
    # side 1 threatens the cell (row 4, col 3) once column 3 gets a stone: three in row 4 at cols 0..2 above a floor
    board = np.full((1, 6, 7), -1)
    board[0, 5] = [0, 0, 1, -1, -1, 0, 1]
    board[0, 4, :3] = 1
    board[0, 3, :2] = 0
    assert not winning_moves(board, 1, "ConnectFour-v1").any()  # (4, 3) is not playable yet
    assert not winning_moves(board, 0, "ConnectFour-v1").any()
    rng = np.random.default_rng(0)
    moves = bot_actions("lookahead", np.repeat(board, 200, 0), 0, "ConnectFour-v1", rng)
    assert 3 not in moves
    greedy = bot_actions("greedy", np.repeat(board, 200, 0), 0, "ConnectFour-v1", rng)
    assert 3 in greedy


@pytest.mark.parametrize(
    ("env_id", "weights"),
    [("ConnectFour-v1", [1, 2, 4, 8, 4, 2, 1]), ("TicTacToe-v1", [4, 1, 4, 1, 16, 1, 4, 1, 4])],
)
def test_lookahead_samples_safe_moves_in_proportion_to_its_weights(env_id, weights):
    # on an empty board every move is safe: frequencies follow the weights (3 standard errors)
    n = 20_000
    h, w, a, _ = {"ConnectFour-v1": (6, 7, 7, 4), "TicTacToe-v1": (3, 3, 9, 3)}[env_id]
    moves = bot_actions("lookahead", np.full((n, h, w), -1), 0, env_id, np.random.default_rng(0))
    expected = np.array(weights) / sum(weights)
    assert np.all(np.abs(np.bincount(moves, minlength=a) / n - expected) < 3 * np.sqrt(expected * (1 - expected) / n))


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_bots_legal_and_greedy_wins_or_blocks(env_id):
    boards, players = _positions(env_id)
    legal = legal_actions(boards, env_id)
    win = winning_moves(boards, players, env_id)
    block = winning_moves(boards, 1 - players, env_id)
    assert win.any() and (block.any(1) & ~win.any(1)).any(), "positions cover both cases"
    a = legal.shape[1]
    opp_wins = winning_moves(
        play_all(boards, players, env_id).reshape(-1, *boards.shape[1:]), np.repeat(1 - players, a), env_id
    )
    safe = legal & ~opp_wins.any(1).reshape(-1, a)  # moves after which the opponent cannot win at once
    rng = np.random.default_rng(0)
    rows = np.arange(len(boards))
    for name in BOT_NAMES:
        moves = bot_actions(name, boards, players, env_id, rng)
        assert moves.shape == (len(boards),)
        assert bot_actions(name, boards[:0], players[:0], env_id, rng).shape == (0,)  # no env on this bot's turn
        assert legal[rows, moves].all(), name
        if name != "random":
            has_win = win.any(1)
            assert win[rows, moves][has_win].all(), f"{name} misses a win"
            must_block = ~has_win & block.any(1)
            if name.startswith("search"):  # where every move loses at once (two threats), any move scores the same
                must_block &= (block & safe).any(1)
            assert block[rows, moves][must_block].all(), f"{name} misses a block"
    # lookahead never hands the opponent an immediate win when it has a choice
    moves = bot_actions("lookahead", boards, players, env_id, rng)
    after = play_all(boards, players, env_id)[rows, moves]
    gives_win = winning_moves(after, 1 - players, env_id).any(1)
    has_safe = safe.any(1)
    free = ~win.any(1) & ~block.any(1) & has_safe
    assert free.any() and not gives_win[free].any()


# ---------------------------------------------------------------------------------------------------------------------
# bot strength
# ---------------------------------------------------------------------------------------------------------------------


def test_play_bots_grading_connect_four():
    n = 300
    scores = {
        pair: play_bots("ConnectFour-v1", *pair, num_games=n, seed=0)
        for pair in (("random", "greedy"), ("greedy", "lookahead"), ("random", "lookahead"))
    }
    for s in scores.values():
        assert s.shape == (n,) and set(np.unique(s).tolist()) <= {0.0, 0.5, 1.0}
    assert scores["random", "greedy"].mean() < 0.2
    assert scores["greedy", "lookahead"].mean() < 0.25
    assert scores["random", "lookahead"].mean() < 0.1


def test_play_bots_grading_tic_tac_toe_and_symmetry():
    assert play_bots("TicTacToe-v1", "random", "greedy", 400, 0).mean() < 0.3
    assert play_bots("TicTacToe-v1", "greedy", "lookahead", 400, 0).mean() < 0.45
    # identical bots: about even, and bot_a plays both sides
    assert 0.4 < play_bots("ConnectFour-v1", "random", "random", 400, 1).mean() < 0.6


def test_plays_knows_the_ladder_and_its_perturbations_on_boards_only():
    """teams.plays (what --bot-opponents accepts): a world's ladder bots; on the board games also their perturbations
    and centre<D>, which play_bots then plays (greedy+opening42 moves at random while the board holds fewer than 42
    stones, that is always: random plays it even)."""
    board, moba = make_team_env("ConnectFour-v1", 1, 0), make_team_env("Moba5v5-v0", 1, 0, 1)
    known = (*board.bot_names, *HELD_OUT_NAMES, "search2+random30+opening6", "centre1")
    assert all(plays(board, name) for name in known)
    unknown = ("search5", "greedy+random", "random+opening4+random15", "vmas_ai", "push")
    assert not any(plays(board, name) for name in unknown)
    assert all(plays(moba, name) for name in moba.bot_names) and not plays(moba, "push+random15")
    assert 0.4 < play_bots("ConnectFour-v1", "random", "greedy+opening42", 400, 1).mean() < 0.6


def test_rate_bots_fits_the_games_among_the_references_and_keeps_them(tmp_path, monkeypatch):
    """rate_bots: every pair's games fitted with the first bot at mu = 0; the second call reads the kept file (no game
    played); another game count is another file."""
    env, refs = make_team_env("TicTacToe-v1", 1, 0), ["random", "greedy", "lookahead"]
    ratings = rate_bots(env, "TicTacToe-v1", refs, 20, cache_dir=str(tmp_path))
    games = [
        (a, b, float(s))
        for i, a in enumerate(refs)
        for b in refs[i + 1 :]
        for s in play_bots("TicTacToe-v1", a, b, 20, 0)
    ]
    expected = fit_reference_ratings(games, anchor="random")
    assert {k: (r.mu, r.sigma) for k, r in ratings.items()} == {k: (r.mu, r.sigma) for k, r in expected.items()}
    assert ratings["random"].mu == 0 and ratings["lookahead"].mu > ratings["greedy"].mu > 0
    (kept,) = tmp_path.glob("TicTacToe-v1__1_heroes__random__greedy__lookahead__20_games__*.json")
    monkeypatch.setattr(teams, "play_bots", lambda *a, **k: pytest.fail("played again instead of reading the file"))
    again = rate_bots(env, "TicTacToe-v1", refs, 20, cache_dir=str(tmp_path))
    assert {k: r.mu for k, r in again.items()} == pytest.approx({k: r.mu for k, r in ratings.items()}, abs=1e-12)
    with pytest.raises(pytest.fail.Exception):
        rate_bots(env, "TicTacToe-v1", refs, 21, cache_dir=str(tmp_path))
