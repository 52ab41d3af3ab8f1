"""Connect Four models against a plain Monte Carlo tree search that no run trains against.

The engine is textbook UCT (Kocsis and Szepesvari 2006) with uniformly random rollouts, written here on bitboards
in plain Python and independent of the project's bots: from the position to play, ``--simulations`` times, it
descends the tree by the UCB1 score (a child's mean result for the side that chose it, plus ``c sqrt(ln N / n)``,
c = 1.4), adds one untried move, plays the rest of the game at random, and backs the result up; it then plays the
move visited most. A win in one move is found by the search itself (a child that wins ends there), not by a rule.

Each model (a ``--save-model`` file or a ``checkpoint.pt`` of ppo_lstm_selfplay.py) plays ``--games`` games from the
empty board, on each side in half, with sampled moves as in the Arena (``cleanfive/arena.py``: ``Policy``); the
table gives its win, draw and loss rates and its score (win + draw / 2) for each number of simulations. An opponent
only: nothing trains against it.

    uv run --all-extras python benchmark/connect4_mcts.py --models cleanfive/models/connect4.cleanfive_model
"""

import math
import random
import time

import numpy as np
import provenance as pv
import torch

from cleanfive.arena import Policy, load_model
from cleanfive.envs.teams import make_team_env

ENV_ID = "ConnectFour-v1"
HEIGHT, WIDTH = 6, 7
COLUMN_BITS = HEIGHT + 1  # a column's bits, the top one always empty, so that no line wraps to the next column
UCB_C = 1.4  # the exploration constant of UCB1
BUNDLED = "cleanfive/models/connect4.cleanfive_model"
MEASURED = ("benchmark/connect4_mcts.py", "cleanfive/arena.py", "cleanfive/ppo_lstm_selfplay.py")
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--models", nargs="+", default=[BUNDLED], help="--save-model files or checkpoints of the script")
PARSER.add_argument("--simulations", nargs="+", type=int, default=[1000], help="the searches' simulations a move")
PARSER.add_argument("--games", type=int, default=100, help="games of each model against each search (even)")
PARSER.add_argument("--seed", type=int, default=1, help="seeds the search's generator and the models' moves")


def four(stones: int) -> bool:
    """Whether the bitboard ``stones`` holds four in a line: vertical (shift 1), horizontal (7) or diagonal (6, 8)."""
    for shift in (1, COLUMN_BITS, COLUMN_BITS - 1, COLUMN_BITS + 1):
        pairs = stones & (stones >> shift)
        if pairs & (pairs >> 2 * shift):
            return True
    return False


class Position:
    """A position as two bitboards: ``mine`` (the stones of the side to move) and ``taken`` (every stone)."""

    __slots__ = ("mine", "taken", "plies")

    def __init__(self, mine: int = 0, taken: int = 0, plies: int = 0):
        self.mine, self.taken, self.plies = mine, taken, plies

    def legal(self) -> list[int]:
        return [c for c in range(WIDTH) if not (self.taken >> (c * COLUMN_BITS + HEIGHT - 1)) & 1]

    def play(self, column: int) -> tuple["Position", bool]:
        """The position after the side to move drops a stone in ``column``, and whether that move won."""
        taken = self.taken | (self.taken + (1 << (column * COLUMN_BITS)))  # the column's lowest empty bit added
        mover = self.mine | (taken ^ self.taken)
        return Position(mover ^ taken, taken, self.plies + 1), four(mover)


class Node:
    __slots__ = ("position", "children", "untried", "visits", "total", "end")

    def __init__(self, position: Position, end: float | None):
        self.position, self.children, self.visits, self.total, self.end = position, {}, 0, 0.0, end
        self.untried = [] if end is not None else position.legal()  # end: the result there for the side to move


def rollout(position: Position, rng: random.Random) -> float:
    """Uniformly random moves to the end: the result for the side to move at ``position`` (1 win, 0.5 draw, 0 loss)."""
    result = 1.0  # for the side about to move, flipped at each ply
    while position.plies < HEIGHT * WIDTH:
        position, won = position.play(rng.choice(position.legal()))
        if won:
            return result
        result = 1.0 - result
    return 0.5


def search(root_position: Position, simulations: int, rng: random.Random) -> int:
    """UCT from ``root_position``: the column visited most after ``simulations`` simulations."""
    root = Node(root_position, None)
    for _ in range(simulations):
        node, path = root, [root]
        while node.end is None and not node.untried:  # select: UCB1 of the result for the side that moves there
            log_n = math.log(node.visits)
            node = max(
                node.children.values(), key=lambda c: 1 - c.total / c.visits + UCB_C * math.sqrt(log_n / c.visits)
            )
            path.append(node)
        if node.end is None:  # expand one untried move, then roll out
            column = node.untried.pop(rng.randrange(len(node.untried)))
            position, won = node.position.play(column)
            end = 0.0 if won else 0.5 if position.plies == HEIGHT * WIDTH else None  # for the side to move next
            node.children[column] = node = Node(position, end)
            path.append(node)
        value = node.end if node.end is not None else rollout(node.position, rng)
        for visited in reversed(path):  # back up: value is the result for the side to move at `visited`
            visited.visits += 1
            visited.total += value
            value = 1.0 - value
    return max(root.children, key=lambda column: root.children[column].visits)


def match(path: str, simulations: int, games: int, seed: int) -> np.ndarray:
    """``games`` games of the model ``path`` against the search, the model on side ``g % 2`` of game g (sampled moves;
    the first game of each world counts). Returns the model's score per game: 1 win, 0.5 draw, 0 loss."""
    model, rng = load_model(path), random.Random(seed)
    torch.manual_seed(seed)  # the model's sampled moves
    env, policy = make_team_env(ENV_ID, games, seed, 1), Policy(model, games)
    rows, side = np.arange(games), np.arange(games) % 2
    positions, scores = [Position() for _ in range(games)], np.full(games, np.nan)
    obs, info = env.reset()
    while np.isnan(scores).any():
        actions = np.zeros((games, 2, 1), dtype=np.int64)
        actions[rows, side, 0] = policy.act(obs, info, side)[0][:, 0]
        for g in np.flatnonzero(info["acting"][rows, 1 - side].any(-1)):
            legal = np.flatnonzero(info["action_mask"][g, 1 - side[g], 0])
            if np.isnan(scores[g]):  # the game that counts: the search's move, on the board it tracks
                assert legal.tolist() == positions[g].legal(), "the search's board differs from the world's"
                actions[g, 1 - side[g], 0] = search(positions[g], simulations, rng)
            else:  # the world's next game, which does not count: any legal move
                actions[g, 1 - side[g], 0] = legal[0]
        for g in np.flatnonzero(np.isnan(scores)):  # each counted game's board, from the move made in it
            mover = int(np.flatnonzero(info["acting"][g].any(-1))[0])
            positions[g] = positions[g].play(int(actions[g, mover, 0]))[0]
        obs, _, _, info = env.step(actions)
        ended = info["game_over"] & np.isnan(scores)
        scores[ended] = (info["outcome"][ended, side[ended]] + 1) / 2
    return scores


def main() -> None:
    args = PARSER.parse_args()
    pv.check(args.games > 0 and args.games % 2 == 0, f"--games {args.games}: give an even number (each side in half)")
    pv.check(min(args.simulations) > 0, "--simulations: each must be > 0")
    torch.set_num_threads(1)
    rows, start = [], time.process_time()
    for path in args.models:
        for simulations in args.simulations:
            scores = match(path, simulations, args.games, args.seed)
            rates = " | ".join(f"{np.mean(scores == score):.3f}" for score in (1.0, 0.5, 0.0))  # win, draw, loss
            rows.append(f"| `{path}` | {simulations} | {rates} | {scores.mean():.3f} |")
    seconds = f"; {time.process_time() - start:.0f} CPU seconds (one torch thread)."
    lines = [
        *pv.header(PARSER, args, pv.code_version(*MEASURED), seconds, ""),
        f"{args.games} games a row from the empty board, the model on each side in half, its moves sampled; score: "
        "win + draw / 2.",
        "",
        "| model | simulations | win | draw | loss | score |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
