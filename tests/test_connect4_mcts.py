"""benchmark/connect4_mcts.py: the search's board, that it finds the moves a search must find, and a tiny match."""

import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmark"))
import connect4_mcts as mcts  # noqa: E402
from connect4_judge import replay  # noqa: E402

from cleanfive.envs.board import has_won  # noqa: E402


def test_the_bitboards_agree_with_the_world_on_random_games():
    rng = random.Random(0)
    for _ in range(300):
        position, columns, legal, won = mcts.Position(), [], [], [False]
        while not won[-1] and position.plies < mcts.HEIGHT * mcts.WIDTH:
            legal.append(position.legal())
            columns.append(rng.choice(legal[-1]))
            position, last = position.play(columns[-1])
            won.append(last)
        boards = replay([np.array(columns)])[0]  # the world's board before every ply, and after the last
        assert legal == [np.flatnonzero(board[0] == -1).tolist() for board in boards[:-1]]  # the columns with room
        movers = np.arange(len(columns)) % 2
        assert won[1:] == has_won(boards[1:], movers, mcts.ENV_ID).tolist()


def test_the_search_takes_a_win_and_blocks_a_loss():
    win = mcts.Position()
    for column in (0, 0, 1, 1, 2, 2):  # the side to move has three in the bottom row: column 3 wins
        win = win.play(column)[0]
    assert mcts.search(win, 300, random.Random(1)) == 3
    block = mcts.Position()
    for column in (0, 6, 1, 6, 2):  # the other side threatens column 3
        block = block.play(column)[0]
    assert mcts.search(block, 300, random.Random(1)) == 3


def test_the_search_beats_random_play_from_either_side():
    """Its rollouts' results are backed up for the right side: a search that backed them up for the other would
    play to lose (a win and a block in one, above, it finds without rollouts)."""
    rng, wins = random.Random(2), 0
    for game in range(10):
        position, won = mcts.Position(), False
        while not won and position.plies < mcts.HEIGHT * mcts.WIDTH:
            searching = position.plies % 2 == game % 2  # the search moves first in the even games
            column = mcts.search(position, 200, rng) if searching else rng.choice(position.legal())
            position, won = position.play(column)
        wins += won and searching
    assert wins >= 9


def test_a_tiny_match_plays_each_game_to_its_end():
    scores = mcts.match(mcts.BUNDLED, 5, 8, seed=1)
    assert scores.shape == (8,) and set(scores.tolist()) <= {0.0, 0.5, 1.0}
    # the bundled model against a search of 5 simulations: it wins most games (a weak search, not a random one)
    assert scores.mean() >= 0.75
