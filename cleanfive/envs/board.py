"""envpool's two-player board games as a "2 sides x 1 hero" team environment, plus vectorised scripted bots.

Games: ``ConnectFour-v1`` (board 6x7, 7 actions = columns, 4 in a row) and ``TicTacToe-v1`` (board 3x3, 9 actions =
cells ``row * 3 + col``, 3 in a row), both from envpool 1.2.5 (ports of pgx).

What envpool actually does (checked by ``tests/test_board.py``):

* ``info["board"]`` holds *colours*, not player ids: colour 0 is always the first mover of the game, so the stone
  counts satisfy ``n0 - n1 in {0, 1}``. ``info["current_player"]`` is the envpool *player id* (0 or 1) to move; which
  player id gets colour 0 is drawn at random at every reset, autoresets included. That is why ``current_player`` looks
  like it "disagrees" with the board. Observations (``obs[row]``) and rewards are per player id.
* Rows of a batch may come permuted: ``info`` rows follow ``info["env_id"]`` and the per-player rows (obs, reward)
  follow ``info["players"]["env_id"]`` / ``["id"]`` (in the same order, two rows per env). Actions are sent in env
  order 0..E-1.
* Gymnasium "next-step" autoreset: the step after a terminal one returns the first observation of a new game, with
  zero rewards and ``terminated=False``; the action sent on that step is ignored.
* Rewards are +1 / -1 per player on the move that ends the game with a win, 0 for both on a draw, 0 otherwise.
  An illegal move ends the game: the mover gets -1 and the other player +1 (this wrapper refuses illegal moves).
* On the terminal step ``legal_action_mask`` is all True (meaningless); otherwise it equals the board's legal moves.

Conventions of this module:

* Side ``s`` is envpool player id ``s``. ``info["board"]`` of :class:`BoardTeamEnv` is re-coded in *side* ids
  (-1 empty, ``s`` = a stone of side ``s``), so bots and networks never see colours. The side that moves first is
  random per game (50/50) and is reported in ``info["first_side"]``; ``mover(board, first_side)`` recovers the side to
  move from stone counts (the board alone cannot tell who moved first on an empty board).
* Shapes use E = number of envs, A = number of actions, H x W = board shape.

Bots, weakest first: ``random``, ``greedy``, ``lookahead`` (rules) and ``search1`` .. ``search4`` (negamax to 1-4 plies
on bitboards, see :func:`bot_actions`): the ladder of reference bots. Perturbed bots, which no default trains against
(the held-out references of a final table): a ladder bot with a share of random moves (``search2+random15``) or a
random opening (``search2+opening4``), and ``centre1`` .. ``centre4``, the search with another leaf evaluation.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

import numpy as np
import torch

BOARD_ENV_IDS: tuple[str, ...] = ("ConnectFour-v1", "TicTacToe-v1")
BOT_NAMES: tuple[str, ...] = ("random", "greedy", "lookahead", "search1", "search2", "search3", "search4")
# held-out references (issue 50): perturbed bots that no default trains against, each on the rung of the ladder bot
# it perturbs (centre<D>: search<D>'s). A bot name is a ladder bot or centre<D>, then optionally "+random<P>" (P % of
# its moves uniform at random) and "+opening<K>" (uniform random moves while the board holds fewer than K stones)
HELD_OUT_NAMES: tuple[str, ...] = (  # every ladder bot perturbed but random (its own perturbation) and search4 (slow)
    *(f"{bot}+{perturbation}" for bot in BOT_NAMES[1:-1] for perturbation in ("random15", "opening4")),
    "centre2",
    "centre3",
)
_BOT_NAME = re.compile(r"(?P<base>random|greedy|lookahead|(?:search|centre)[1-4])(?:\+random(?P<random>\d\d?))?"
                       r"(?:\+opening(?P<opening>\d\d?))?")  # fmt: skip

# env_id -> (H, W, num_actions, stones in a row needed to win)
_GAMES: dict[str, tuple[int, int, int, int]] = {"ConnectFour-v1": (6, 7, 7, 4), "TicTacToe-v1": (3, 3, 9, 3)}
OPENING_SEED = 7919  # random openings: their generator's seed is the world's + this (apart from envpool's games)

# lookahead's move weights (its safe moves are sampled in proportion): centre columns for ConnectFour; centre, corners,
# edges for TicTacToe. Sampling, not always the top choice, keeps a fixed line of play from beating it every game.
_PREFERENCE: dict[str, np.ndarray] = {
    "ConnectFour-v1": np.array([1, 2, 4, 8, 4, 2, 1], dtype=np.float64),
    "TicTacToe-v1": np.array([4, 1, 4, 1, 16, 1, 4, 1, 4], dtype=np.float64),
}


def _game(env_id: str) -> tuple[int, int, int, int]:
    """Return ``(H, W, num_actions, k_in_a_row)`` of ``env_id``; raise ValueError listing BOARD_ENV_IDS otherwise."""
    if env_id not in _GAMES:
        raise ValueError(f"unknown board env_id {env_id!r}; expected one of {BOARD_ENV_IDS}")
    return _GAMES[env_id]


def legal_actions(board: np.ndarray, env_id: str) -> np.ndarray:
    """Legal moves: non-full columns (ConnectFour) or empty cells (TicTacToe).

    board: int (..., H, W), -1 empty. Returns bool (..., A).
    """
    num_actions = _game(env_id)[2]
    if env_id == "ConnectFour-v1":
        return board[..., 0, :] < 0
    return board.reshape(*board.shape[:-2], num_actions) < 0


def has_won(board: np.ndarray, player: np.ndarray | int, env_id: str) -> np.ndarray:
    """Whether ``player`` has k stones in a row (row, column or either diagonal).

    board: int (..., H, W); player: int broadcastable to board.shape[:-2]. Returns bool (...).
    """
    _, _, _, k = _game(env_id)
    b = board == np.asarray(player)[..., None, None]
    h, w = b.shape[-2:]
    rows = b[..., :, : w - k + 1].copy()
    cols = b[..., : h - k + 1, :].copy()
    diag = b[..., : h - k + 1, : w - k + 1].copy()
    anti = b[..., : h - k + 1, k - 1 :].copy()
    for i in range(1, k):
        rows &= b[..., :, i : w - k + 1 + i]
        cols &= b[..., i : h - k + 1 + i, :]
        diag &= b[..., i : h - k + 1 + i, i : w - k + 1 + i]
        anti &= b[..., i : h - k + 1 + i, k - 1 - i : w - i]
    return rows.any((-2, -1)) | cols.any((-2, -1)) | diag.any((-2, -1)) | anti.any((-2, -1))


def play_all(board: np.ndarray, player: np.ndarray | int, env_id: str) -> np.ndarray:
    """Boards after ``player`` plays each action (ConnectFour stones fall to the lowest empty cell).

    board: int (..., H, W); player: int broadcastable to board.shape[:-2].
    Returns int (..., A, H, W); entries of illegal actions are the unchanged board.
    """
    h, w, a, _ = _game(env_id)
    lead = board.shape[:-2]
    flat = board.reshape(*lead, 1, h * w)
    legal = legal_actions(board, env_id)
    if env_id == "ConnectFour-v1":
        row = (board < 0).sum(-2) - 1  # (..., 7) lowest empty row per column
        cell = row * w + np.arange(w)
    else:
        cell = np.broadcast_to(np.arange(a), (*lead, a))
    hit = (np.arange(h * w) == cell[..., None]) & legal[..., None]  # (..., A, H*W)
    out = np.where(hit, np.asarray(player)[..., None, None], flat)
    return out.reshape(*lead, a, h, w)


def winning_moves(board: np.ndarray, player: np.ndarray | int, env_id: str) -> np.ndarray:
    """Legal moves that win immediately for ``player``.

    board: int (E, H, W); player: int (E,) or scalar. Returns bool (E, A).
    """
    player = np.asarray(player)
    after = play_all(board, player, env_id)
    return has_won(after, player[..., None], env_id) & legal_actions(board, env_id)


def mover(board: np.ndarray, first_side: np.ndarray | int) -> np.ndarray:
    """Side to move from stone counts: ``first_side`` when both sides have as many stones, else the other side.

    board: int (E, H, W) in side ids (-1 empty); first_side: int (E,) side that moved first. Returns int64 (E,).
    """
    first = np.broadcast_to(np.asarray(first_side, dtype=np.int64), board.shape[:-2])
    n_first = (board == first[..., None, None]).sum((-2, -1))
    n_second = (board == 1 - first[..., None, None]).sum((-2, -1))
    return np.where(n_first > n_second, 1 - first, first)


def _sample(mask: np.ndarray, rng: np.random.Generator, weights: np.ndarray | None = None) -> np.ndarray:
    """A choice among True entries of each row of bool (E, A), uniform or in proportion to positive ``weights`` (A,);
    rows without any True give 0. Returns (E,)."""
    if weights is None:
        return np.where(mask, rng.random(mask.shape), -1.0).argmax(-1)
    # exponential race: argmin of Exp(1) / w_i is i with probability w_i / sum(w)
    return np.where(mask, rng.exponential(size=mask.shape) / weights, np.inf).argmin(-1)


def _first_nonempty(*masks: np.ndarray) -> np.ndarray:
    """Per row, the first of the bool (E, A) masks that has a True entry (the last mask otherwise)."""
    chosen = masks[-1]
    for m in reversed(masks[:-1]):
        chosen = np.where(m.any(-1, keepdims=True), m, chosen)
    return chosen


# search bots: a win at ply p (p = 1: the bot's own move) scores _WIN - p, so that an earlier win beats a later one and
# a later loss beats an earlier one; far above any window score
_WIN = 1e6
# the leaves' window weights by the stones a window lacks: one (a threat) 16, two 4 (none for windows of one stone of
# Connect Four's four: counting them too made search3 weaker than search2)
_WINDOW_WEIGHTS: dict[int, float] = {1: 16.0, 2: 4.0}
# leaves the search scores at once (at most (legal moves) ** depth per board): numpy was about 3 times slower per leaf
# (depth 4, 64 boards against 16) once its arrays (8 bytes a leaf) outgrow the CPU's cache
_SEARCH_LEAVES = 2**14


class _Bitboards(NamedTuple):
    """One game's bitboard layout: cell (row r, column c) is bit ``c * (H + 1) + H - 1 - r`` of a uint64 (bit 0 at the
    bottom of column 0), each column topped by a bit that is never set, so that no shift wraps into the next line.

    The search keeps a position as one uint64 per side rather than the (H, W) int arrays of :func:`play_all` and
    :func:`has_won` (which ``tests/test_board_search.py`` checks it against): depth 4 scores up to 7 ** 4 = 2401
    Connect Four leaves per board, and a win test or a window count is then a few shifts of 8 bytes per leaf."""

    k: int  # stones in a row needed to win
    cell: np.ndarray  # uint64 (H, W): each cell's bit
    span: np.ndarray  # uint64 (A,): the cells action a can fill (ConnectFour: a column; TicTacToe: one cell)
    floor: np.uint64  # cells playable without a stone below them (ConnectFour: the bottom row; TicTacToe: all)
    full: np.uint64  # every cell
    shifts: tuple[int, ...]  # a line's step: vertical, horizontal, diagonal, anti-diagonal
    starts: tuple[np.uint64, ...]  # per shift: the first cells of the lines of k cells that fit on the board
    weights: np.ndarray  # float64 (k - 1,): the leaf's window weights minus those of one stone less, by own stones
    lines: tuple[tuple[int, np.uint64], ...]  # centre leaf: (n, the cells that n lines of k cells pass through)


@functools.cache
def _bitboards(env_id: str) -> _Bitboards:
    h, w, a, k = _game(env_id)
    cell = np.array([[1 << (c * (h + 1) + h - 1 - r) for c in range(w)] for r in range(h)], dtype=object)
    full = int(cell.sum())
    if env_id == "ConnectFour-v1":
        span, floor = [int(cell[:, c].sum()) for c in range(w)], int(cell[h - 1].sum())
    else:
        span, floor = list(cell.reshape(a)), full
    shifts = (1, h + 1, h + 2, h)
    starts = tuple(np.uint64(functools.reduce(int.__and__, [full >> (i * d) for i in range(k)])) for d in shifts)
    weights = np.diff([_WINDOW_WEIGHTS.get(k - j, 0.0) for j in range(k)])  # windows with >= j own stones count this
    # the centre leaf's cell values: the lines of k cells through each cell (Connect Four: 3 in a corner, 13 mid-board)
    through = [
        sum(int(p) << (i * d) >> c & 1 for d, p in zip(shifts, starts, strict=True) for i in range(k))
        for c in range(64)
    ]
    values = sorted(set(through) - {0})
    lines = tuple((n, np.uint64(sum(1 << c for c in range(64) if through[c] == n))) for n in values)
    u64 = functools.partial(np.array, dtype=np.uint64)
    return _Bitboards(k, u64(cell), u64(span), np.uint64(floor), np.uint64(full), shifts, starts, weights, lines)


def _to_bits(stones: np.ndarray, bits: _Bitboards) -> np.ndarray:
    """bool (..., H, W) -> their bitboards uint64 (...)."""
    return np.where(stones, bits.cell, np.uint64(0)).sum((-2, -1), dtype=np.uint64)


def _playable(occupied: np.ndarray, bits: _Bitboards) -> np.ndarray:
    """The empty cells a move can fill (ConnectFour: on the floor or on a stone): uint64 (...) -> uint64 (...)."""
    return bits.full & ~occupied & ((occupied << np.uint64(1)) | bits.floor)


def _bits_won(stones: np.ndarray, bits: _Bitboards) -> np.ndarray:
    """:func:`has_won` on bitboards: uint64 (...) -> bool (...)."""
    won = np.zeros(stones.shape, dtype=bool)
    for d in bits.shifts:
        line = stones
        for i in range(1, bits.k):
            line = line & (stones >> np.uint64(i * d))
        won |= line != 0
    return won


def _open_windows(own: list[np.ndarray], other: list[np.ndarray], start: np.uint64) -> list[np.ndarray]:
    """Windows of k cells in one direction without ``other`` stones, by their ``own`` stones: element j holds those
    with >= j own stones (j = 0 .. k - 1; nobody has k in a row), as the bit of the window's first cell p.
    own, other: k uint64 (n,) arrays, element i holding cell p + i * step at bit p; start: the windows that fit."""
    k = len(own)
    at_least = [start & ~functools.reduce(np.bitwise_or, other)] + [np.zeros_like(own[0])] * (k - 1)
    for i in range(k):
        for j in range(min(i + 1, k - 1), 0, -1):
            at_least[j] = at_least[j] | (at_least[j - 1] & own[i])
    return at_least


def _leaf(moved: np.ndarray, to_move: np.ndarray, ply: int, bits: _Bitboards, centre: bool = False) -> np.ndarray:
    """Score for the side that just made move ``ply``, on boards where nobody has won: a loss at ply + 1 if the side
    to move can win at once, else the open-window score (see :func:`bot_actions`) of its stones minus the opponent's,
    or with ``centre`` its stones' cell values (the lines of k cells through each) minus the opponent's.
    moved, to_move: uint64 (n,). Returns float64 (n,)."""
    k = bits.k
    counts = np.zeros((k - 1, *moved.shape), dtype=np.int32)  # counts[j - 1]: >= j own stones, its minus theirs
    threats = np.zeros_like(moved)  # the empty cells that would complete k in a row of the side to move
    for d, start in zip(bits.shifts, bits.starts, strict=True):
        mine = [moved >> np.uint64(i * d) for i in range(k)]  # mine[i]: bit p holds cell p + i * d
        theirs = [to_move >> np.uint64(i * d) for i in range(k)]
        my_windows, their_windows = _open_windows(mine, theirs, start), _open_windows(theirs, mine, start)
        for j in np.flatnonzero(bits.weights) + 1:
            counts[j - 1] += np.bitwise_count(my_windows[j])
            counts[j - 1] -= np.bitwise_count(their_windows[j])
        for i in range(k):  # windows with k - 1 of their stones: the cell without one
            threats |= (their_windows[k - 1] & ~theirs[i]) << np.uint64(i * d)
    loses = (threats & _playable(moved | to_move, bits)) != 0
    if centre:
        stones = [n * (np.bitwise_count(moved & cells) - np.bitwise_count(to_move & cells)) for n, cells in bits.lines]
        return np.where(loses, -(_WIN - ply - 1), np.sum(stones, 0, dtype=np.float64))
    return np.where(loses, -(_WIN - ply - 1), bits.weights @ counts)


def _negamax(
    cur: np.ndarray, opp: np.ndarray, depth: int, ply: int, bits: _Bitboards, centre: bool = False
) -> np.ndarray:
    """Scores of every move of the side to move (stones ``cur``) for it, searched ``depth`` plies deep, the move being
    ply ``ply``: a win ends the line (``_WIN - ply``), a full board is a draw (0), illegal moves score -inf.
    cur, opp: uint64 (n,) of live positions (nobody has won, some cell empty). Returns float64 (n, A)."""
    moves = _playable(cur | opp, bits)[:, None] & bits.span
    after = cur[:, None] | moves
    won = _bits_won(after, bits)  # only a legal move can win: the position itself is live
    go = (moves != 0) & ~won & ((after | opp[:, None]) != bits.full)
    scores = np.where(moves != 0, 0.0, -np.inf)
    scores[won] = _WIN - ply
    others = np.broadcast_to(opp[:, None], moves.shape)[go]
    if depth == 1:
        scores[go] = _leaf(after[go], others, ply, bits, centre)
    else:
        scores[go] = -_negamax(others, after[go], depth - 1, ply + 1, bits, centre).max(-1)
    return scores


def _search(
    board: np.ndarray, player: np.ndarray, legal: np.ndarray, name: str, env_id: str, rng: np.random.Generator
) -> np.ndarray:
    """The bot ``name``, ``search{depth}`` or ``centre{depth}``: a best-scored move (:func:`_negamax`), uniform among
    ties.

    board: int (E, H, W); player: int (E,); legal: bool (E, A) its legal moves. Returns int64 (E,)."""
    bits, depth, centre = _bitboards(env_id), int(name[-1]), name.startswith("centre")
    cur = _to_bits(board == player[:, None, None], bits)
    opp = _to_bits(board == 1 - player[:, None, None], bits)
    scores = np.empty(legal.shape)
    leaves = legal.sum(-1) ** depth  # at most
    chunk = (np.cumsum(leaves) - leaves) // _SEARCH_LEAVES  # consecutive boards, about _SEARCH_LEAVES leaves each
    for part in np.split(np.arange(len(board)), np.flatnonzero(np.diff(chunk)) + 1):
        scores[part] = _negamax(cur[part], opp[part], depth, 1, bits, centre)
    best = scores == scores.max(-1, keepdims=True)
    return _sample(best & legal, rng)


def bot_actions(
    name: str, board: np.ndarray, player: np.ndarray | int, env_id: str, rng: np.random.Generator
) -> np.ndarray:
    """Moves of a scripted bot for ``player`` on each board.

    * ``random``: uniform legal move.
    * ``greedy``: win now if possible, else block an immediate win of the opponent, else uniform legal move.
    * ``lookahead``: like greedy, but otherwise avoid moves after which the opponent can win at once (in ConnectFour:
      never play under the opponent's winning cell) and sample among those in proportion to a preference weight
      (ConnectFour: 1, 2, 4, 8, 4, 2, 1 from the left column to the right; TicTacToe: centre 16, corners 4, edges 1).
    * ``search1`` .. ``search4``: negamax to K = 1..4 plies, uniform among the best-scored moves. A win ends a line and
      scores ``1e6 - ply`` (an earlier win beats a later one), a full board is a draw (0). At the leaves: a loss one
      ply later if the side to move there can win at once (so ``search1`` blocks threats and does not play under the
      opponent's winning cell), else the open-window score, own minus opponent's: every window of k cells in a line
      without opponent stones counts 16 with k - 1 own stones, 4 with k - 2. Full-width (every legal move to depth K,
      no pruning), vectorised over boards on bitboards; the same move values as alpha-beta.
    * ``centre1`` .. ``centre4``: the same search with another leaf evaluation, the stones' cell values (the lines of k
      cells through each: 3 in a corner of Connect Four, 13 at its centre) own minus opponent's.
    * ``<bot>+random<P>``, ``<bot>+opening<K>`` (either or both, in this order): ``<bot>`` with P % of its moves
      uniform at random, or uniform random moves while the board holds fewer than K stones.

    board: int (E, H, W) in side ids, -1 empty; player: int (E,) or scalar side (0/1) to play.
    Returns int64 (E,), always legal where a legal move exists (0 on full boards).
    """
    found = _BOT_NAME.fullmatch(name)
    if found is None:
        raise ValueError(f"unknown bot {name!r}; expected one of {BOT_NAMES} or centre1-4, optionally followed by "
                         "+random<percent> and +opening<stones>, e.g. search2+random15")  # fmt: skip
    board = np.asarray(board)
    player = np.broadcast_to(np.asarray(player, dtype=np.int64), board.shape[:1])
    legal = legal_actions(board, env_id)
    share, opening = int(found["random"] or 0) / 100, int(found["opening"] or 0)
    if not share and not opening:
        return _ladder_bot(found["base"], board, player, legal, env_id, rng)
    wild = (board >= 0).sum((1, 2)) < opening  # the opening's moves, then a share of the others, uniform at random
    if share:
        wild |= rng.random(len(board)) < share
    act = _sample(legal, rng)
    if not wild.all():
        act[~wild] = _ladder_bot(found["base"], board[~wild], player[~wild], legal[~wild], env_id, rng)
    return act


def _ladder_bot(
    name: str, board: np.ndarray, player: np.ndarray, legal: np.ndarray, env_id: str, rng: np.random.Generator
) -> np.ndarray:
    """:func:`bot_actions` of an unperturbed bot ``name``; board int (E, H, W), player int (E,), legal bool (E, A)."""
    if name.startswith(("search", "centre")):
        return _search(board, player, legal, name, env_id, rng)
    if name == "random":
        return _sample(legal, rng)
    a = _game(env_id)[2]
    win = winning_moves(board, player, env_id)
    block = winning_moves(board, 1 - player, env_id)
    if name == "greedy":
        return _sample(_first_nonempty(win, block, legal), rng)
    after = play_all(board, player, env_id).reshape(-1, *board.shape[1:])  # (E*A, H, W)
    opp_wins = winning_moves(after, np.repeat(1 - player, a), env_id).any(-1).reshape(-1, a)
    safe = _first_nonempty(legal & ~opp_wins, legal)
    forced = _first_nonempty(win, block, np.zeros_like(legal))
    return np.where(forced.any(-1), _sample(forced, rng), _sample(safe, rng, _PREFERENCE[env_id]))


def own_squares(planes: torch.Tensor) -> torch.Tensor:
    """TicTacToe's geometry for a network: move ``a`` fills square ``a``. ``planes`` float (B, 3, H, W); returns int64
    (B, A), each move's square as a flat index into the H x W board (row 0 the top)."""
    return torch.arange(planes.shape[-2] * planes.shape[-1], device=planes.device).expand(len(planes), -1)


def landing_squares(planes: torch.Tensor) -> torch.Tensor:
    """Connect Four's geometry for a network: the move in column ``c`` fills the lowest empty square of that column,
    row H - 1 - (stones in it) (row 0 the top; a full column gives its top square, which no legal move picks).
    ``planes`` float (B, 3, H, W), own and opponent stones first; returns int64 (B, W) flat indices into the board."""
    height, width = planes.shape[-2:]
    stones = planes[:, :2].sum((1, 2))  # (B, W): the stones in each column
    return (height - 1 - stones).clamp(min=0).long() * width + torch.arange(width, device=planes.device)


class BoardTeamEnv:
    """envpool ``ConnectFour-v1`` / ``TicTacToe-v1`` as a vectorised 2-sides x 1-hero team environment.

    Side ``s`` is envpool player ``s``; which side moves first is random per game (``info["first_side"]``).
    Every step takes an action for every hero, but only the side to move (``info["acting"]``) is applied; the other
    side's action is ignored. Observations are from each side's own perspective, built from the board, so one network
    can play both sides. Planes: ``[own stones, opponent stones, all-ones if this side is to move]``.

    Autoreset follows envpool (Gymnasium next-step): the step whose move ends a game returns the final board with
    ``game_over`` and the outcome as reward, and nobody acts on it; the next ``step`` starts a new game and ignores
    its actions. ``done`` is True on both of those steps (reset recurrent state, cut bootstrapping).

    Shapes (E = num_envs, A = num_actions, (H, W) = board_shape):

    * ``reset() -> (obs, info)``; ``step(actions int (E, 2, 1)) -> (obs, scores, done, info)``
    * ``obs`` float32 (E, 2, 1, 3, H, W); ``scores`` float32 (E, 2, 1, 1): one score component, ``"win"``: the side's
      outcome where ``game_over``, else 0; ``done`` bool (E,).
    * ``info["action_mask"]`` bool (E, 2, 1, A): legal moves for the acting hero, all True for the others;
      ``info["acting"]`` bool (E, 2, 1): exactly one True per env, none on terminal obs nor in a random opening;
      ``info["board"]`` int32 (E, H, W): -1 empty, else the side owning the stone;
      ``info["first_side"]`` int64 (E,); ``info["game_over"]`` bool (E,);
      ``info["outcome"]`` float32 (E, 2): +1 win / 0 draw / -1 loss per side where ``game_over``, else 0;
      ``info["game_length"]`` int64 (E,): moves in the finished game where ``game_over``, else 0;
      ``info["time"]`` float64 (E,): when this step's scores were earned, in moves (one move = one second):
      the stones on the board after the move (0 on the step that starts a new game).
    * ``mirror_actions`` int (A,): each move's left-right mirror image (``obs`` flipped on its last axis);
      ``mirror(obs, masks, actions) -> (obs, masks, actions)``: rows' images (tensors (K, 3, H, W), (K, A), (K,)).
    * ``move_squares(planes float (B, 3, H, W)) -> int64 (B, A)``: the square each move fills (a flat index into the
      board): :func:`own_squares` or :func:`landing_squares`, for a network's head that reads each move at its square.

    An illegal action by the acting hero raises ValueError (envpool would end the game as a loss for it).

    ``random_openings`` (False; a training script sets it): each game opens with k uniform random moves, k uniform in
    0..``opening_plies`` = 2 (L - 1) for L in a row (6 in Connect Four, 4 in TicTacToe), the most that cannot decide
    a game (each side has fewer than L stones). The world plays them, ignoring the actions given; nobody acts on
    those steps, so no side makes a decision there.
    """

    num_sides: int = 2
    num_heroes: int = 1
    seconds_per_step: float = 1.0
    score_names: tuple[str, ...] = ("win",)
    DEFAULT_SCORE_WEIGHTS: dict[str, float] = {"win": 1.0}
    # half of the games against the reference bots at the start: on Connect Four self-play alone never passed `greedy`
    # (docs/ppo_lstm_selfplay.md, Results)
    bot_names: tuple[str, ...] = BOT_NAMES

    def __init__(self, env_id: str, num_envs: int, seed: int):
        h, w, a, line = _game(env_id)
        self.env_id = env_id
        self.num_envs = num_envs
        self.num_actions = a
        self.board_shape = (h, w)
        self.obs_shape = (3, h, w)
        # the move that is each move's left-right mirror image: the board flipped about its vertical axis
        # (observations flipped on their last axis) is as good a position for the same side (--mirror)
        cells = np.arange(h * w).reshape(h, w)[:, ::-1]
        self.mirror_actions = np.ascontiguousarray(cells[0] if a == w else cells.reshape(-1))
        self.move_squares = landing_squares if a == w else own_squares  # (a plain function: networks keep it)
        import envpool  # here, not at the top: importing it takes ~2 s, which the lane world and football need not pay

        self._env: Any = envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed)
        self._arange = np.arange(num_envs)
        self._mover = np.zeros(num_envs, dtype=np.int64)
        self._first = np.zeros(num_envs, dtype=np.int64)
        self._legal = np.ones((num_envs, a), dtype=bool)
        self._game_over = np.zeros(num_envs, dtype=bool)
        self._needs_reset = True
        self.random_openings, self.opening_plies = False, 2 * (line - 1)
        self._opening_rng = np.random.default_rng(seed + OPENING_SEED)
        self._opening = np.zeros(num_envs, dtype=np.int64)  # each game's random opening: its first k moves
        self._forced = np.zeros(num_envs, dtype=bool)  # the world plays this step's move (a random opening's)

    def mirror(self, obs, masks, actions):
        """The left-right mirror images of K rows (tensors: obs (K, 3, H, W), masks (K, A), actions (K,)): the board
        flipped about its vertical axis, each move and its legality mirrored (a training script's --mirror)."""
        image = torch.as_tensor(self.mirror_actions, device=actions.device)
        return obs.flip(-1), masks[:, image], image[actions]

    def reset(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Reset all envs. Returns ``obs`` float32 (E, 2, 1, 3, H, W) and ``info`` (see class docstring)."""
        _, info = self._env.reset()
        self._game_over = np.ones(self.num_envs, dtype=bool)  # every board is a fresh game: read who moves first
        self._needs_reset = False
        obs, _, _, out = self._convert(info, None, None)
        return obs, out

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Apply the acting hero's action of int (E, 2, 1) ``actions``.

        Returns ``obs`` float32 (E, 2, 1, 3, H, W), ``scores`` float32 (E, 2, 1, 1), ``done`` bool (E,), ``info``.
        """
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions)
        if actions.shape != (self.num_envs, self.num_sides, self.num_heroes):
            raise ValueError(f"actions must have shape {(self.num_envs, 2, 1)}, got {actions.shape}")
        act = actions[self._arange, self._mover, 0].astype(np.int64)
        if self._forced.any():  # random openings: a uniform legal move
            act[self._forced] = _sample(self._legal[self._forced], self._opening_rng)
        inside = (act >= 0) & (act < self.num_actions)
        ok = inside & self._legal[self._arange, np.where(inside, act, 0)]
        if not np.all(ok | self._game_over):
            bad = np.flatnonzero(~ok & ~self._game_over)
            raise ValueError(f"illegal action {act[bad].tolist()} by the acting hero in envs {bad.tolist()}")
        _, reward, terminated, truncated, info = self._env.step(act.astype(np.int32))
        return self._convert(info, reward, terminated | truncated)

    def close(self) -> None:
        """Release the envpool instance."""
        self._env.close()

    def bot_actions(
        self,
        name: str,
        obs: np.ndarray,
        info: dict[str, np.ndarray],
        side: np.ndarray,
        rng: np.random.Generator,
        games: np.ndarray | None = None,
    ) -> np.ndarray:
        """Actions int (E, 1) of bot ``name`` playing side ``side[e]`` in ``games`` (bool (E,); None: every env), 0
        elsewhere and where it is not to move. The bot searches only the boards of its own games."""
        act = np.zeros((self.num_envs, 1), dtype=np.int64)
        turn = info["acting"][self._arange, side, 0]
        if games is not None:
            turn = turn & games
        if turn.any():
            act[turn, 0] = bot_actions(name, info["board"][turn], side[turn], self.env_id, rng)
        return act

    def _convert(
        self, info: dict[str, Any], reward: np.ndarray | None, finished: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        e, (h, w) = self.num_envs, self.board_shape
        ids = info["env_id"]
        colours = np.empty((e, h, w), dtype=np.int32)
        colours[ids] = info["board"]
        new_game = self._game_over  # this obs starts a new game (after reset or the step after a terminal one)
        if new_game.any():
            current = np.empty(e, dtype=np.int64)
            current[ids] = info["current_player"]
            # on an empty board the player to move owns colour 0 for the whole game
            self._first = np.where(new_game, current, self._first)
            if self.random_openings:
                k = self._opening_rng.integers(0, self.opening_plies + 1, e)
                self._opening = np.where(new_game, k, self._opening)
        first = self._first
        board = np.where(colours < 0, -1, colours ^ first[:, None, None]).astype(np.int32)

        game_over = np.zeros(e, dtype=bool)
        outcome = np.zeros((e, 2), dtype=np.float32)
        game_length = np.zeros(e, dtype=np.int64)
        if finished is not None and reward is not None:
            game_over[ids] = finished
            outcome[info["players"]["env_id"], info["players"]["id"]] = reward
            outcome[~game_over] = 0.0
            game_length[ids] = np.where(finished, info["elapsed_step"], 0)
        done = game_over | new_game if finished is not None else game_over.copy()

        colour_to_move = (colours == 0).sum((1, 2)) > (colours == 1).sum((1, 2))
        side_to_move = first ^ colour_to_move
        legal = legal_actions(board, self.env_id)
        stones = (board >= 0).sum((1, 2))  # the moves played so far in each game
        forced = (stones < self._opening) & ~game_over
        acting = np.zeros((e, 2, 1), dtype=bool)
        acting[self._arange, side_to_move, 0] = ~game_over & ~forced
        mask = np.ones((e, 2, 1, self.num_actions), dtype=bool)
        mask[self._arange, side_to_move, 0] = legal | (game_over | forced)[:, None]

        mine, theirs = board == 0, board == 1
        obs = np.empty((e, 2, 1, 3, h, w), dtype=np.float32)
        obs[:, 0, 0, 0] = mine
        obs[:, 0, 0, 1] = theirs
        obs[:, 1, 0, 0] = theirs
        obs[:, 1, 0, 1] = mine
        obs[:, :, 0, 2] = acting[:, :, 0, None, None]

        self._mover, self._legal, self._game_over, self._forced = side_to_move, legal, game_over, forced
        out = {
            "action_mask": mask,
            "acting": acting,
            "board": board,
            "first_side": first.copy(),
            "game_over": game_over,
            "outcome": outcome,
            "game_length": game_length,
            "time": stones.astype(np.float64) * self.seconds_per_step,
        }
        return obs, outcome[:, :, None, None].copy(), done, out
