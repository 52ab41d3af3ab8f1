"""Can ppo_lstm_selfplay.py's network learn to block in Connect Four at all? A supervised check, no RL.

Plays random legal moves from the empty board (4 to 29 moves) and keeps the positions in which the side to move
cannot win at once and the opponent has exactly one immediately winning move; the label is that move (the block).
The observation is the script's own (planes: own stones, opponent stones, all ones). Two networks learn it with
cross-entropy and Adam (lr 1e-3, batches of 256, ``--steps`` steps) from ``--sizes`` labelled positions each:
the script's dense encoder (two dense layers of ``--hidden-size``, built by its ``Agent`` for a flat observation:
the board games' encoder until it became convolutional) and its board encoder (two 3x3 layers of 32 channels, a
dense layer of 128), each with a linear head. Prints the accuracy on
``--test`` held-out positions: chance is about 1/7 (the share of a random legal move); and, for the largest size,
by the line the threat would complete (vertical, horizontal, diagonal, as ``connect4_tactics.py`` counts them).

    uv run --all-extras python benchmark/connect4_block_supervised.py
"""

import importlib.util

import numpy as np
import provenance as pv
import torch
import torch.nn as nn
from connect4_tactics import LINES, line_kinds

from cleanfive.envs.board import has_won, legal_actions, play_all, winning_moves

ENV_ID = "ConnectFour-v1"
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000], help="training positions")
PARSER.add_argument("--test", type=int, default=20_000, help="held-out positions")
PARSER.add_argument("--steps", type=int, default=3000, help="Adam steps of each network")
PARSER.add_argument("--hidden-size", type=int, default=256, help="the width of the kept table")
PARSER.add_argument("--seed", type=int, default=0, help="seed of the positions drawn and of the network")
PARSER.add_argument("--block", help="also write the tables into this block of docs/research-log.md (its markers)")


def positions(count: int, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` labelled positions: observations float (count, 3, 6, 7) and blocking columns int64 (count,)."""
    xs, ys, kept = [], [], 0
    while kept < count:
        board, side = -np.ones((4096, 6, 7), np.int32), np.zeros(4096, np.int64)
        for _ in range(int(rng.integers(4, 30))):
            legal = legal_actions(board, ENV_ID)
            move = np.argmax(np.where(legal, rng.random(legal.shape), -1.0), 1)  # a uniform legal move
            after = play_all(board, side, ENV_ID)[np.arange(len(board)), move]
            board, side = np.where(legal.any(1)[:, None, None], after, board), 1 - side
        threats = winning_moves(board, 1 - side, ENV_ID)
        keep = ~winning_moves(board, side, ENV_ID).any(1) & (threats.sum(1) == 1)
        keep &= ~has_won(board, side, ENV_ID) & ~has_won(board, 1 - side, ENV_ID)  # games still going
        own = board[keep] == side[keep, None, None]
        theirs = (board[keep] >= 0) & ~own
        xs.append(np.stack([own, theirs, np.ones_like(own)], 1).astype(np.float32))
        ys.append(threats[keep].argmax(1))
        kept += int(keep.sum())
    return torch.as_tensor(np.concatenate(xs)[:count]), torch.as_tensor(np.concatenate(ys)[:count])


def networks(hidden_size: int) -> dict[str, nn.Module]:
    spec = importlib.util.spec_from_file_location("ppo_lstm_selfplay", pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    dense = script.Agent((3 * 6 * 7,), 7, 1, hidden_size).encoder  # a flat observation: the dense encoder
    conv = script.Agent((3, 6, 7), 7, 1, 128).encoder  # the board games' encoder
    return {
        f"the script's dense encoder (width {hidden_size})": nn.Sequential(
            nn.Flatten(), dense, nn.Linear(hidden_size, 7)
        ),
        "the script's board encoder (conv 2x3x3x32 + 128)": nn.Sequential(nn.Flatten(), conv, nn.Linear(128, 7)),
    }


def main() -> None:
    args = PARSER.parse_args()
    if args.block:
        pv.markers(pv.ROOT / "docs" / "research-log.md", args.block)  # stop now if the page has no markers
    torch.set_num_threads(1)
    rng = np.random.default_rng(args.seed)
    x, y = positions(max(args.sizes) + args.test, rng)
    test_x, test_y = x[-args.test :], y[-args.test :]
    board = np.where(test_x[:, 1].numpy() > 0, 1, np.where(test_x[:, 0].numpy() > 0, 0, -1))  # theirs: side 1
    filled = play_all(board, 1, ENV_ID)[np.arange(args.test), test_y.numpy()]  # the threat's square taken
    kinds = line_kinds(filled, np.ones(args.test, np.int64))
    by_line = {}  # network -> the largest size's accuracy per kind of line
    lines = [*pv.header(PARSER, args, pv.code_version(), "", ""), ""]
    lines += ["| network | " + " | ".join(f"{n:,} positions" for n in args.sizes) + " |"]
    lines += ["|---" * (len(args.sizes) + 1) + "|"]
    for name in networks(args.hidden_size):
        cells = []
        for size in args.sizes:
            torch.manual_seed(args.seed)
            net = networks(args.hidden_size)[name]
            optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
            for _ in range(args.steps):
                batch = torch.randint(size, (256,))
                loss = nn.functional.cross_entropy(net(x[batch]), y[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            with torch.no_grad():
                right = (net(test_x).argmax(1) == test_y).numpy()
                cells.append(f"{right.mean():.2f}")
            if size == max(args.sizes):
                by_line[name] = {kind: right[kinds[kind]].mean() for kind in LINES}
            print(f"  {name}, {size} positions: {cells[-1]}", flush=True)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", f"By the line the threat would complete ({max(args.sizes):,} positions):", ""]
    lines += ["| network | " + " | ".join(f"{k} ({kinds[k].sum():,} held out)" for k in LINES) + " |"]
    lines += ["|---" * (len(LINES) + 1) + "|"]
    lines += [f"| {name} | " + " | ".join(f"{a[k]:.2f}" for k in LINES) + " |" for name, a in by_line.items()]
    print("\n".join(lines))
    if args.block:
        pv.write_block(pv.ROOT / "docs" / "research-log.md", args.block, "\n".join(lines))


if __name__ == "__main__":
    main()
