"""Tests for the search bots of cleanfive/envs/board.py (``search1`` .. ``search4``, ``centre1`` .. ``centre4``): their
bitboards against the board helpers, tactics on hand-made positions, strength rising with depth, and the perturbed
bots (random moves, random openings)."""

from __future__ import annotations

import numpy as np
import pytest
from test_board import _positions

from cleanfive.envs import board
from cleanfive.envs.board import BOARD_ENV_IDS, BOT_NAMES, bot_actions, has_won, legal_actions, play_all, winning_moves
from cleanfive.envs.teams import make_team_env, play_bots, rate_bots

SEARCH = ("search1", "search2", "search3", "search4", "centre1", "centre2", "centre3", "centre4")


def _board(*rows: str) -> np.ndarray:
    """One board int (1, H, W) from rows drawn top to bottom: '.' empty, 'X' side 0, 'O' side 1."""
    return np.array([[".XO".index(c) - 1 for c in row] for row in rows])[None]


def _moves(name, position, player, env_id, n=64):
    """The distinct moves of bot ``name`` on ``n`` copies of one position (its ties broken at random)."""
    moves = bot_actions(name, np.repeat(position, n, 0), player, env_id, np.random.default_rng(0))
    return set(moves.tolist())


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_bitboards_agree_with_the_board_helpers(env_id):
    boards, players = _positions(env_id, num_envs=32, steps=60)
    bits = board._bitboards(env_id)
    for side in (0, 1):
        stones = board._to_bits(boards == side, bits)
        assert np.array_equal(board._bits_won(stones, bits), has_won(boards, side, env_id))
    moves = board._playable(board._to_bits(boards >= 0, bits), bits)[:, None] & bits.span
    assert np.array_equal(moves != 0, legal_actions(boards, env_id))
    mine = board._to_bits(boards == players[:, None, None], bits)
    after = play_all(boards, players, env_id) == players[:, None, None, None]
    assert np.array_equal(board._to_bits(after, bits), mine[:, None] | moves)


def test_search_bots_take_wins_block_threats_and_skip_full_columns():
    # X (side 0) wins at column 3 (row 5); O (side 1) to move must block there
    wins = _board(".......", ".......", ".......", ".......", "....O..", "XXX.OO.")
    # O threatens column 2 (three on top of each other); X cannot win at once
    vertical = _board(".......", ".......", ".......", "..O....", "..O.X..", "X.OXO..")
    # O would win at (row 4, column 3) once column 3 has a stone: X must not play column 3 (nothing else is forced)
    under = _board(".......", ".......", ".......", "XX.....", "OOO....", "XXO..XO")
    # only column 6 is open
    full = _board("XOXOXO.", "XOXOXO.", "OXOXOX.", "OXOXOX.", "XOXOXO.", "XOXOXO.")
    positions = np.concatenate([wins, vertical, under, full])
    assert not has_won(positions, 0, "ConnectFour-v1").any() and not has_won(positions, 1, "ConnectFour-v1").any()
    assert not winning_moves(under, 0, "ConnectFour-v1").any() and not winning_moves(under, 1, "ConnectFour-v1").any()
    for name in SEARCH:
        assert _moves(name, wins, 0, "ConnectFour-v1") == {3}, name
        assert _moves(name, wins, 1, "ConnectFour-v1") == {3}, name
        assert _moves(name, vertical, 0, "ConnectFour-v1") == {2}, name
        assert 3 not in _moves(name, under, 0, "ConnectFour-v1"), name
        assert _moves(name, full, 0, "ConnectFour-v1") == {6}, name
    # TicTacToe: X wins on the top row (cell 2); O to move blocks it; a full board gives 0 (no legal move)
    ttt = _board("XX.", "OO.", "X..")
    for name in SEARCH:
        assert _moves(name, ttt, 0, "TicTacToe-v1") == {2}, name
        assert _moves(name, ttt, 1, "TicTacToe-v1") == {5}, name  # O wins at cell 5 before blocking
        assert _moves(name, _board("XX.", "O..", "..."), 1, "TicTacToe-v1") == {2}, name
        assert _moves(name, _board("XOX", "XOO", "OXX"), 0, "TicTacToe-v1") == {0}, name


def test_draw_ends_a_line_inside_the_search():
    # one empty cell: filling it is a draw (score 0), not a leaf scored by its windows
    last = _board("XOX", "XOO", "OX.")
    bits = board._bitboards("TicTacToe-v1")
    x, o = (board._to_bits(last == side, bits) for side in (0, 1))
    for depth in (1, 2, 3, 4):
        scores = board._negamax(x, o, depth, 1, bits)[0]
        assert scores[8] == 0.0 and np.isneginf(scores[:8]).all()


def test_depth_three_finds_a_double_threat_that_depth_one_misses():
    # X (side 0) to move: column 3 makes three in row 4 (columns 3-5) with both ends (columns 2 and 6) playable
    position = _board(".......", "....O..", "....X..", "....O..", "O...XX.", "OOXXOXO")
    assert not winning_moves(position, 0, "ConnectFour-v1").any()
    after = play_all(position, 0, "ConnectFour-v1")[:, 3]
    assert not winning_moves(after, 1, "ConnectFour-v1").any()
    replies = play_all(after, 1, "ConnectFour-v1")[0][legal_actions(after, "ConnectFour-v1")[0]]
    assert winning_moves(replies, 0, "ConnectFour-v1").any(1).all(), "every reply of O leaves X a win"
    assert 3 not in _moves("search1", position, 0, "ConnectFour-v1")
    for name in ("search2", "search3", "search4"):  # depth 2 sees it too: its leaves ask whether X can win at once
        assert _moves(name, position, 0, "ConnectFour-v1") == {3}, name


def test_deeper_search_beats_shallower_on_connect_four():
    """Seats alternate (play_bots puts the first bot on side e % 2; the side to move first is random per game)."""
    pairs = [("search1", "lookahead"), ("search2", "search1"), ("search3", "search2"), ("search4", "search3")]
    scores = {pair: play_bots("ConnectFour-v1", *pair, num_games=200, seed=0).mean() for pair in pairs}
    assert all(score > 0.6 for score in scores.values()), scores


def test_tic_tac_toe_search_never_loses_to_the_rule_bots():
    for name in ("search2", "search3", "search4"):
        for other in ("random", "greedy", "lookahead"):
            scores = play_bots("TicTacToe-v1", name, other, 200, seed=0)
            assert scores.min() >= 0.5, (name, other)
    assert play_bots("TicTacToe-v1", "search4", "random", 200, seed=0).mean() > 0.9


@pytest.mark.slow
def test_connect_four_ratings_rise_along_the_bot_names(tmp_path):
    """From 32 games a pair, played here. The default run checks the same order on the shipped ratings, 400 games a
    pair of the code as it is (tests/test_reference_ratings.py)."""
    ratings = rate_bots(make_team_env("ConnectFour-v1", 1, 0), "ConnectFour-v1", list(BOT_NAMES), 32, str(tmp_path))
    mus = [ratings[name].mu for name in BOT_NAMES]
    assert mus[0] == 0 and (np.diff(mus) > 0).all(), dict(zip(BOT_NAMES, mus, strict=True))


@pytest.mark.parametrize("env_id", BOARD_ENV_IDS)
def test_the_centre_leaf_values_a_cell_by_the_lines_through_it(env_id):
    h, w, _, k = board._game(env_id)
    bits = board._bitboards(env_id)
    lines = np.zeros((h, w), dtype=int)  # counted here cell by cell: every line of k cells in the four directions
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(h):
            for c in range(w):
                cells = [(r + i * dr, c + i * dc) for i in range(k)]
                if all(0 <= y < h and 0 <= x < w for y, x in cells):
                    for y, x in cells:
                        lines[y, x] += 1
    values = sum(n * ((bits.cell & cells) != 0) for n, cells in bits.lines)
    assert np.array_equal(values, lines)


def test_perturbed_bots_play_at_random_in_the_opening_and_in_their_share_of_moves():
    wins = _board(".......", ".......", ".......", ".......", "....O..", "XXX.OO.")  # X (side 0) wins at column 3
    assert _moves("search2+opening6", wins, 0, "ConnectFour-v1") == {3}  # 6 stones: past the opening
    assert _moves("search2+opening7", wins, 0, "ConnectFour-v1", n=256) == set(range(7))  # uniform at random
    n = 20_000
    moves = bot_actions("search2+random30", np.repeat(wins, n, 0), 0, "ConnectFour-v1", np.random.default_rng(0))
    # the win, unless a random move (30 %) misses it: 0.7 + 0.3 / 7 of the moves; 4 standard errors either side
    assert abs((moves == 3).mean() - (0.7 + 0.3 / 7)) < 4 * np.sqrt(0.26 * 0.74 / n)
    assert set(moves.tolist()) == set(range(7))


@pytest.mark.parametrize("name", ["search5", "centre", "search2+random", "search2+opening4+random15", "greedy+eps15"])
def test_an_unknown_bot_name_is_refused(name):
    with pytest.raises(ValueError, match="unknown bot"):
        bot_actions(name, np.full((1, 6, 7), -1), 0, "ConnectFour-v1", np.random.default_rng(0))
