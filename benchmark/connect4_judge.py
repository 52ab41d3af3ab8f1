"""Connect Four judged by a perfect solver: how often saved ppo_lstm_selfplay.py models keep a position's outcome.

Reads the 2,402 positions of ``benchmark/data/c4_positions.jsonl`` (games of mixed strength, each column scored by a
perfect solver; ``benchmark/data/README.md``) and, among the positions that are not lost for the player to move
(the position's value, the best sign of a legal column's score, is a win or a draw), reports for each model
(a ``--save-model`` file or a ``checkpoint.pt``), overall and by phase of the game (plies 0-6, 7-13, ...):

* **keeps**: the share where its most likely legal move keeps the outcome (a win stays a win, a draw a draw: the
  move's score has the position's sign);
* **optimal**: the share where its most likely move has the best score (the fastest win; in a draw, any draw);
* **sampled**: the mean probability that a move sampled from its policy keeps the outcome;
* **uniform random**: the share of legal moves that keep it, what a uniformly random legal move scores;
* **wins at once**: of the positions where a win in one move is open, the share where the most likely move takes it.

How the network sees a position: as in a game, the LSTM steps only on the turns of the side it plays, so each game
is replayed from the empty board and the network reads the side to move's board at each of its turns, from a fresh
state at the game's start, the policy read at the last (the position). A last row gives the overall numbers of the
position alone, from a fresh state (what the earlier turns change). A judge only: nothing trains on these positions,
on a solver's moves or on its scores, so that the number measures what self-play learned.

``--depths`` adds a probe of what the network knows beyond its policy: the same positions judged with the move of a
negamax search of that many plies whose leaves are the model's own value head (exact where the game ends), each
position read alone. The project's players do not search; this measures how far a search on the network would go.

    uv run --all-extras python benchmark/connect4_judge.py --models cleanfive/models/connect4.cleanfive_model
"""

import json
import time
from pathlib import Path

import numpy as np
import provenance as pv
import torch
from board_table import load_agent, training_script

from cleanfive.envs.board import has_won, legal_actions, play_all, winning_moves

ENV_ID = "ConnectFour-v1"
DATA = pv.ROOT / "benchmark" / "data" / "c4_positions.jsonl"
HEIGHT, WIDTH = 6, 7
PHASE = 7  # plies per phase of the game: 0-6, 7-13, ...
METRICS = ("keeps", "optimal", "sampled", "uniform")  # per position, see the docstring
BUNDLED = "cleanfive/models/connect4.cleanfive_model"
MEASURED = ("benchmark/connect4_judge.py", "benchmark/data", "cleanfive/ppo_lstm_selfplay.py")  # the commit's +dirty
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--models", nargs="+", default=[BUNDLED], help="--save-model files or checkpoints of the script")
PARSER.add_argument("--block", help="also write the table into this docs block (any page of docs/ with its markers)")
PARSER.add_argument("--cards", action="store_true", help="also write each model's table into its card (a bundled one)")
PARSER.add_argument(
    "--depths", nargs="+", type=int, help="also judge the move of a search this deep on the model's own value"
)
WIN = 1e3  # the value of a move that wins, for the side that plays it: above any value the network gives


def load_positions(path: Path = DATA) -> tuple[list[np.ndarray], np.ndarray]:
    """The positions of ``path``: each game's moves as env actions (the solver's column - 1) and the scores float
    (N, 7), NaN for a full column."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    moves = [np.array([int(c) - 1 for c in row["moves"]], dtype=np.int64) for row in rows]
    scores = np.array([[np.nan if s is None else s for s in row["scores"]] for row in rows], dtype=np.float64)
    return moves, scores


def replay(moves: list[np.ndarray]) -> np.ndarray:
    """The board before every ply of each game, int8 (N, longest game + 1, 6, 7): -1 empty, 0 a stone of the side
    that moved first, 1 of the other; row 0 at the top, as the world's boards (``cleanfive.envs.board``)."""
    plies = max(len(m) for m in moves)
    boards = np.full((len(moves), plies + 1, HEIGHT, WIDTH), -1, dtype=np.int8)
    games = np.arange(len(moves))
    for ply in range(plies):
        boards[:, ply + 1] = boards[:, ply]
        playing = np.array([len(m) > ply for m in moves])
        column = np.array([m[ply] if len(m) > ply else 0 for m in moves])
        row = (boards[games, ply, :, column] < 0).sum(-1) - 1  # the lowest empty square of the column
        ok = playing & (row >= 0)
        if not (ok == playing).all():
            raise ValueError(f"a move into a full column at ply {ply} of game(s) {np.flatnonzero(ok != playing)}")
        boards[games[ok], ply + 1, row[ok], column[ok]] = ply % 2
    return boards


def observations(boards: np.ndarray, plies: np.ndarray) -> np.ndarray:
    """The world's observation of the side to move at ply ``plies`` (K,) of boards int (K, 6, 7): planes own stones,
    opponent's stones, all ones (this side is to move), float32 (K, 3, 6, 7)."""
    own = (plies % 2)[:, None, None]
    planes = [boards == own, (boards >= 0) & (boards != own), np.ones_like(boards, dtype=bool)]
    return np.stack(planes, 1).astype(np.float32)


def policy(agent, boards: np.ndarray, plies: np.ndarray, fresh: bool) -> np.ndarray:
    """The move probabilities float (B, 7) of ``agent`` at ply ``plies`` (B,) of its game (boards (B, plies + 1, 6,
    7)): the LSTM fed the side to move's turns from the game's start (its earlier turns, then the position), or with
    ``fresh`` the position alone; all positions in one batch, each game's turns left-padded with idle steps."""
    turns = 1 if fresh else int(plies.max()) // 2 + 1
    first = np.where(fresh, plies, plies % 2)  # the first ply the network reads: the side to move's first turn
    steps = np.arange(turns)[:, None] - (turns - 1 - (plies - first) // 2)  # (T, B): its turn at each step, or < 0
    active = steps >= 0
    ply = np.where(active, first + 2 * steps, 0)
    games = np.broadcast_to(np.arange(len(plies)), ply.shape)
    x = np.zeros((turns, len(plies), 3, HEIGHT, WIDTH), dtype=np.float32)
    x[active] = observations(boards[games[active], ply[active]], ply[active])
    with torch.inference_mode():
        state = training_script().zero_state(agent, len(plies), "cpu")
        done = torch.zeros(turns * len(plies))
        hidden, _, squares = agent.get_states(torch.as_tensor(x).flatten(0, 1), state, done, torch.as_tensor(active))
        last = slice((turns - 1) * len(plies), None)  # every game's position is its last step
        logits = agent.get_logits(hidden[last], None if squares is None else squares[last])
        legal = torch.as_tensor(boards[np.arange(len(plies)), plies, 0] < 0)  # a column with an empty top square
        return torch.softmax(logits.masked_fill(~legal, -torch.inf), -1).numpy()


def score_moves(scores: np.ndarray, probs: np.ndarray) -> dict[str, np.ndarray]:
    """Per position, of the solver's ``scores`` (N, 7) (NaN: a full column) and a policy's ``probs`` (N, 7): whether
    its most likely move keeps the outcome (``keeps``) and is optimal (``optimal``), the probability that a sampled
    move keeps it (``sampled``) and the share of legal moves that do (``uniform``)."""
    legal = ~np.isnan(scores)
    sign = np.sign(np.where(legal, scores, -np.inf))  # a full column: -1, never the value of a position
    value = sign.max(-1, keepdims=True)
    keeps = legal & (sign == value)
    optimal = legal & (scores == np.where(legal, scores, -np.inf).max(-1, keepdims=True))
    best = np.where(legal, probs, -1.0).argmax(-1)[:, None]  # the most likely legal move
    return {
        "keeps": np.take_along_axis(keeps, best, -1)[:, 0].astype(float),
        "optimal": np.take_along_axis(optimal, best, -1)[:, 0].astype(float),
        "sampled": (probs * keeps).sum(-1),
        "uniform": keeps.sum(-1) / legal.sum(-1),
    }


def wins_at_once(boards: np.ndarray, plies: np.ndarray, probs: np.ndarray) -> dict:
    """Of the positions at ply ``plies`` (K,) of ``boards`` (K, plies + 1, 6, 7) where the side to move can win in one
    move, how many (``n``) and the share where the most likely legal move of ``probs`` (K, 7) wins (``share``)."""
    position = boards[np.arange(len(plies)), plies].astype(np.int64)
    wins = winning_moves(position, plies % 2, ENV_ID)  # (K, 7); the side that moved first owns the stones 0
    best = np.where(position[:, 0] < 0, probs, -1.0).argmax(-1)  # the most likely legal move
    offered = wins.any(-1)
    return {"n": int(offered.sum()), "share": float(wins[np.arange(len(best)), best][offered].mean())}


def value_head(agent, boards: np.ndarray, plies: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """The model's value (its critic) of positions boards int (K, 6, 7) at ply ``plies`` (K,) for the side to move,
    each read from a fresh LSTM state, float (K,)."""
    out = [np.zeros(0, dtype=np.float32)]
    for start in range(0, len(boards), chunk):
        x = torch.as_tensor(observations(boards[start : start + chunk], plies[start : start + chunk]))
        with torch.inference_mode():
            state, everyone = training_script().zero_state(agent, len(x), "cpu"), torch.ones(len(x), dtype=torch.bool)
            hidden, _, _ = agent.get_states(x, state, torch.zeros(len(x)), everyone)
            out.append(agent.critic(hidden)[:, 0].numpy())
    return np.concatenate(out)


def search_values(value, boards: np.ndarray, plies: np.ndarray, depth: int) -> np.ndarray:
    """Negamax ``depth`` plies deep: the value float (K, 7) of each move for the side to move at boards int (K, 6, 7),
    ply ``plies`` (K,). A move that wins: ``WIN``; one that fills the board: 0 (a draw); any other: minus the
    opponent's value after it, its best move's at ``depth - 1``, or ``value(boards, plies)`` (K,) at depth 1;
    a full column: -inf. Exact wins and draws, the network's value at the leaves."""
    K, mover = len(boards), (plies % 2).astype(boards.dtype)  # the boards' own type: int8 keeps depth 4 in memory
    children = play_all(boards, mover, ENV_ID)  # (K, 7, 6, 7): each column played
    legal = legal_actions(boards, ENV_ID)
    wins = has_won(children, mover[:, None], ENV_ID) & legal
    later = (legal & ~wins & (plies[:, None] + 1 < HEIGHT * WIDTH)).reshape(-1)  # neither won nor a full board
    children, after = children.reshape(-1, HEIGHT, WIDTH)[later], np.repeat(plies + 1, WIDTH)[later]
    theirs = value(children, after) if depth == 1 else search_values(value, children, after, depth - 1).max(-1)
    values = np.zeros(K * WIDTH)
    values[later] = -theirs
    return np.where(wins, WIN, np.where(legal, values.reshape(K, WIDTH), -np.inf))


def searched(path: str, depths: list[int], data: Path = DATA) -> dict:
    """For each depth d of ``depths``, overall and by phase, the share of the not-lost positions where the move of a
    depth-d search on the model ``path``'s own value (:func:`search_values`; ties: its most likely move) keeps the
    outcome, and where it is optimal; d = 0: the most likely move. Every position is read alone (a fresh LSTM
    state), as the search reads its leaves. A probe of what the network knows, not a player of the project's."""
    agent, _ = load_agent(path, (ENV_ID,))
    moves, scores = load_positions(data)
    plies = np.array([len(m) for m in moves])
    kept = np.nanmax(np.sign(scores), -1) >= 0
    boards, plies, scores = replay([m for m, k in zip(moves, kept, strict=True) if k]), plies[kept], scores[kept]
    probs = policy(agent, boards, plies, fresh=True)
    positions, phases = boards[np.arange(len(plies)), plies], np.array(phase(plies))
    out = {}
    for depth in depths:
        if depth > 0:
            values = search_values(lambda b, p: value_head(agent, b, p), positions, plies, depth)
            best = values == values.max(-1, keepdims=True)
        per = score_moves(scores, probs if depth == 0 else best * (probs + 1e-9))  # ties: the most likely move
        out[depth] = {"overall": {metric: float(per[metric].mean()) for metric in ("keeps", "optimal")}}
        for label in sorted(set(phases), key=lambda p: int(p.split("–")[0])):
            out[depth][label] = {metric: float(per[metric][phases == label].mean()) for metric in ("keeps", "optimal")}
    return out


def search_table(results: dict[str, dict]) -> list[str]:
    """The markdown table of ``results`` (model -> :func:`searched`): a row per model and depth, keeps / optimal
    overall and keeps by phase."""
    labels = [label for label in next(iter(next(iter(results.values())).values())) if label != "overall"]
    lines = ["| model | search depth | **all**: keeps / optimal | " + " | ".join(f"plies {p}" for p in labels) + " |"]
    lines += ["|---|---:|---:|" + "---:|" * len(labels)]
    for model, by_depth in results.items():
        for depth, row in by_depth.items():
            cells = " | ".join(f"{row[label]['keeps']:.3f}" for label in labels)
            overall = f"{row['overall']['keeps']:.3f} / {row['overall']['optimal']:.3f}"
            lines.append(f"| {model} | {depth or 'none'} | {overall} | {cells} |")
    note = (
        "The move of a negamax search on each model's own value head (its critic, each position read from a fresh "
        "LSTM state), exact where the game ends within the search (a win, a full board), ties taken by the model's "
        "most likely move; depth none: that move alone, also from a fresh state. keeps and optimal as above."
    )
    return [note, "", *lines]


def phase(plies: np.ndarray) -> list[str]:
    """The phase of the game of positions at ``plies``: "0–6", "7–13", ... (``PHASE`` plies each)."""
    return [f"{p // PHASE * PHASE}–{p // PHASE * PHASE + PHASE - 1}" for p in plies]


def judge(path: str, data: Path = DATA) -> dict:
    """The judge's numbers of the model ``path``: ``positions`` (all), then for ``overall`` and each phase (plies
    "0–6", ...) the not-lost positions ``n`` (``won`` of them won) and the mean of each of ``METRICS``, and
    ``fresh_state``: ``overall`` with the position alone; ``wins_at_once`` (:func:`wins_at_once`); the ``global_step``
    of a checkpoint (None: a --save-model file) and the CPU ``seconds`` it took."""
    start = time.process_time()
    agent, saved = load_agent(path, (ENV_ID,))
    moves, scores = load_positions(data)
    plies = np.array([len(m) for m in moves])
    value = np.nanmax(np.sign(scores), -1)
    kept = value >= 0  # not lost for the player to move
    boards = replay([m for m, k in zip(moves, kept, strict=True) if k])
    probs = policy(agent, boards, plies[kept], fresh=False)
    per = score_moves(scores[kept], probs)
    fresh = score_moves(scores[kept], policy(agent, boards, plies[kept], fresh=True))
    phases = np.array(phase(plies[kept]))
    out = {"positions": len(moves)}
    for label in ["overall", *sorted(set(phases), key=lambda p: int(p.split("–")[0]))]:
        rows = np.ones(len(phases), bool) if label == "overall" else phases == label
        out[label] = {"n": int(rows.sum()), "won": int((value[kept][rows] > 0).sum())}
        out[label] |= {metric: float(per[metric][rows].mean()) for metric in METRICS}
    out["fresh_state"] = out["overall"] | {metric: float(fresh[metric].mean()) for metric in METRICS}
    out["wins_at_once"] = wins_at_once(boards, plies[kept], probs)
    return out | {"global_step": saved.get("global_step"), "seconds": round(time.process_time() - start, 1)}


def table(results: dict[str, dict]) -> list[str]:
    """The markdown table of ``results`` (label -> :func:`judge`): a row per phase, overall, and overall with the
    position alone, for each model its keeps / optimal / sampled, and the uniform random move's keeps."""
    first = next(iter(results.values()))
    names = {"overall": "**all**", "fresh_state": "all, the position alone"}
    lines = [
        "| plies | not lost (won) | uniform random | " + " | ".join(f"{m}: keeps / optimal / sampled" for m in results)
    ]
    lines[0] += " |"
    lines += ["|---|---:|---:|" + "---:|" * len(results)]
    for label in [*(key for key in first if "–" in key), *names]:
        row = first[label]
        cells = [
            f"{r[label]['keeps']:.3f} / {r[label]['optimal']:.3f} / {r[label]['sampled']:.3f}" for r in results.values()
        ]
        lines.append(
            f"| {names.get(label, label)} | {row['n']:,} ({row['won']:,}) | {row['uniform']:.3f} | "
            + " | ".join(cells)
            + " |"
        )
    note = (
        f"{first['positions']:,} positions solved by a perfect solver (`benchmark/data/c4_positions.jsonl`), of them "
        f"the {first['overall']['n']:,} not lost for the player to move. keeps: the share where the model's most "
        "likely move keeps the outcome (a win stays a win, a draw a draw); optimal: where it has the solver's best "
        "score; sampled: the mean probability that a sampled move keeps it; uniform random: the share of legal moves "
        "that keep it. The network reads the side to move's turns from the game's start (its LSTM steps on them as "
        "in a game); the last row: the position alone, from a fresh LSTM state."
    )
    taken = ", ".join(f"{m} {r['wins_at_once']['share']:.3f}" for m, r in results.items())
    open_wins = first["wins_at_once"]["n"]
    once = f"Where a win in one move is open ({open_wins:,} of them), the most likely move takes it: {taken}."
    return [note, "", *lines, "", once]


def card_section(path: str, results: dict) -> list[str]:
    """The perfect-play section of the card of the bundled model ``path``: how it was made and the table."""
    args = PARSER.parse_args(["--models", path])
    return [
        "## Perfect play",
        "",
        *pv.header(PARSER, args, pv.code_version(*MEASURED), "; the positions are `benchmark/data/README.md`'s.", ""),
        *table({f"`{Path(path).stem}`": results}),
        "",
    ]


def write_card(path: str, results: dict) -> None:
    """Replace (or add) the ``## Perfect play`` section of the card ``cleanfive/models/<stem>.md`` of ``path``."""
    card = pv.ROOT / "cleanfive" / "models" / f"{Path(path).stem}.md"
    text = card.read_text()
    before, _, after = text.partition("## Perfect play")
    after = after.split("\n## ", 1)[1] if "\n## " in after else ""
    card.write_text(
        before.rstrip("\n") + "\n\n" + "\n".join(card_section(path, results)) + (f"\n## {after}" if after else "")
    )
    print(f"wrote {card.relative_to(pv.ROOT)}")


def main() -> None:
    args = PARSER.parse_args()
    if args.block:
        pv.markers(pv.ROOT / "docs" / "benchmarks.md", args.block)  # stop now if no page has the markers
    for path in args.models if args.cards else []:
        card = pv.ROOT / "cleanfive" / "models" / f"{Path(path).stem}.md"
        pv.check(card.exists(), f"--cards: {path} has no card {card.relative_to(pv.ROOT)}; bundle it first")
    depths = args.depths or []
    pv.check(min(depths, default=0) >= 0, f"--depths {' '.join(map(str, depths))}: each must be >= 0 (plies)")
    torch.set_num_threads(1)
    results = {path: judge(path) for path in args.models}
    seconds = ", ".join(f"{r['seconds']:.1f}" for r in results.values())
    lines = [
        *pv.header(
            PARSER, args, pv.code_version(*MEASURED), f"; {seconds} CPU seconds per model (one torch thread).", ""
        ),
        *table({f"`{path}`": r for path, r in results.items()}),
    ]
    if args.depths:
        start = time.process_time()
        searches = {f"`{path}`": searched(path, sorted({0, *depths})) for path in args.models}
        lines += ["", *search_table(searches), "", f"The searches took {time.process_time() - start:.0f} CPU seconds."]
    print("\n".join(lines))
    if args.block:
        pv.write_block(pv.ROOT / "docs" / "benchmarks.md", args.block, "\n".join(lines))
    for path, result in results.items() if args.cards else []:
        write_card(path, result)


if __name__ == "__main__":
    main()
