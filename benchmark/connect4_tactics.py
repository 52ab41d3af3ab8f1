"""Connect Four tactics of saved ppo_lstm_selfplay.py models: how often a policy takes a win, blocks, gives one away.

Plays each model (a ``--save-model`` file or a ``checkpoint.pt``) against each scripted bot with the script's own
``Agent`` and sampling, as its evaluation does (the agent plays each side in half of the games), and counts, over the
agent's moves:

* **take**: a winning move was legal and the agent played one (of the moves where one was legal);
* **block**: the opponent threatened to win on its next move (and the agent could not win at once), and the agent
  played on the threat (of those moves);
* **give away**: the agent's move let the opponent win at once where some other move would not have (of the moves
  where such a safe move existed);
* **p(take)**, **p(block)**: the mean probability the policy gave those moves (its sharpness, not its luck);
* **block by line**: of the moves with one threat on the board, those blocked, by the line the threat would
  complete (vertical, horizontal, diagonal; a square that completes two lines counts for both);
* the win rate of those games, and what lost each lost game, read at the agent's last move: **missed block** (one
  threat, not played on), **two threats** (two or more squares win for the opponent: lost before that move), **give
  away** (its move opened the opponent's win where a safe move existed), **no safe move** (every move opened one);
  **other**: none of these (a loss on the agent's own move cannot happen, so this stays empty unless the counts are
  wrong).

These are the three things ``lookahead`` never gets wrong, so they bound how often a policy can beat it.

    uv run --all-extras python benchmark/connect4_tactics.py --models runs/<run>/ppo_lstm_selfplay.cleanfive_model
"""

import numpy as np
import provenance as pv
import torch
from board_table import load_agent, training_script
from numpy.lib.stride_tricks import sliding_window_view

from cleanfive.envs.board import legal_actions, play_all, winning_moves
from cleanfive.envs.teams import make_team_env

ENV_ID = "ConnectFour-v1"
LOSS_CAUSES = ("missed block", "two threats", "give away", "no safe move", "other")  # see the docstring
LINES = ("vertical", "horizontal", "diagonal")


def line_kinds(board: np.ndarray, player: np.ndarray) -> dict[str, np.ndarray]:
    """Which kinds of line of four stones ``player`` int (E,) has on ``board`` int (E, 6, 7): bool (E,) per kind."""
    own = board == player[:, None, None]
    square = sliding_window_view(own, (4, 4), axis=(1, 2))  # (E, 3, 4, 4, 4): every 4x4 window
    return {
        "vertical": sliding_window_view(own, 4, axis=1).all(-1).any((1, 2)),
        "horizontal": sliding_window_view(own, 4, axis=2).all(-1).any((1, 2)),
        "diagonal": (square.diagonal(0, -2, -1).all(-1) | square[..., ::-1].diagonal(0, -2, -1).all(-1)).any((1, 2)),
    }


PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--models", nargs="+", required=True, help="--save-model files or checkpoints of the script")
PARSER.add_argument("--bots", nargs="+", default=["greedy", "lookahead"], help="opponents")
PARSER.add_argument("--games", type=int, default=256, help="games per model and bot")
PARSER.add_argument("--seed", type=int, default=0, help="seed of the games' generators")
PARSER.add_argument("--block", help="also write the tables into this docs block (any page of docs/ with its markers)")


def play(agent, bot: str, games: int, seed: int) -> dict[str, float]:
    """Games of ``agent`` against ``bot``; the tactics counts of the agent's moves and its win rate."""
    env, rng = make_team_env(ENV_ID, games, seed), np.random.default_rng(seed)
    torch.manual_seed(seed)
    rows, side = np.arange(games), np.arange(games) % 2
    counts = {k: [] for k in ("take", "block", "give_away", "p_take", "p_block", *(f"block_{k}" for k in LINES))}
    obs, info = env.reset()
    state, done = training_script().zero_state(agent, games, "cpu"), torch.zeros(games)
    scores = np.full(games, np.nan)
    cause = np.full(games, "other", dtype=object)  # of the agent's last move (see LOSS_CAUSES)
    with torch.inference_mode():
        while np.isnan(scores).any():
            turn = info["acting"][rows, side, 0] & np.isnan(scores)
            x = torch.as_tensor(obs[rows, side, 0])
            mask = torch.as_tensor(info["action_mask"][rows, side, 0])
            active = torch.as_tensor(info["acting"][rows, side, 0])
            hidden, state, squares = agent.get_states(x, state, done, active)
            probs = torch.softmax(agent.get_logits(hidden, squares).masked_fill(~mask, -1e8), -1).numpy()
            action = torch.distributions.Categorical(probs=torch.as_tensor(probs)).sample().numpy()
            board, legal = info["board"], legal_actions(info["board"], ENV_ID)
            win = winning_moves(board, side, ENV_ID)
            threat = winning_moves(board, 1 - side, ENV_ID)
            after = play_all(board, side, ENV_ID)  # (E, A, H, W): the board after each of the agent's moves
            a = after.shape[1]
            opp_wins = winning_moves(after.reshape(-1, *board.shape[1:]), np.repeat(1 - side, a), ENV_ID)
            unsafe = opp_wins.any(-1).reshape(games, a) & legal
            can_win = win.any(-1) & turn
            must_block, could_be_safe = threat.any(-1) & ~can_win & turn, (legal & ~unsafe).any(-1) & ~can_win & turn
            counts["take"] += win[rows, action][can_win].tolist()
            counts["p_take"] += (probs * win).sum(-1)[can_win].tolist()
            counts["block"] += threat[rows, action][must_block].tolist()
            counts["p_block"] += (probs * threat).sum(-1)[must_block].tolist()
            counts["give_away"] += unsafe[rows, action][could_be_safe].tolist()
            threats, blocked = threat.sum(-1), threat[rows, action]
            one = must_block & (threats == 1)  # the line that the one threat would complete
            filled = play_all(board, 1 - side, ENV_ID)[rows, threat.argmax(-1)]  # the threat's square taken
            completed = line_kinds(filled[one], 1 - side[one])
            for kind in LINES:
                counts[f"block_{kind}"] += blocked[one][completed[kind]].tolist()
            cause[turn] = np.select(  # a block that opens the square above, the opponent's too, is two threats stacked
                [(threats >= 2) | blocked, threats == 1, ~(legal & ~unsafe).any(-1), unsafe[rows, action]],
                ["two threats", "missed block", "no safe move", "give away"],
                "other",
            )[turn]
            actions = np.zeros((games, 2, 1), dtype=np.int64)
            actions[rows, side, 0] = action
            actions[rows, 1 - side] = env.bot_actions(bot, obs, info, 1 - side, rng)
            obs, _, next_done, info = env.step(actions)
            finished = info["game_over"] & np.isnan(scores)
            scores[finished] = (info["outcome"][finished, side[finished]] + 1) / 2
            done = torch.as_tensor(next_done, dtype=torch.float32)
    rates = {k: float(np.mean(v)) if v else np.nan for k, v in counts.items()}
    lost = {c: float(((scores == 0) & (cause == c)).mean()) for c in LOSS_CAUSES}
    rates |= {f"n_{k}": len(counts[k]) for k in ("take", "block", *(f"block_{k}" for k in LINES))} | lost
    return rates | {"win": float((scores == 1).mean()), "loss": float((scores == 0).mean())}


def main() -> None:
    args = PARSER.parse_args()
    if args.block:
        pv.markers(pv.ROOT / "docs" / "research-log.md", args.block)  # stop now if no page has the markers
    lines = [*pv.header(PARSER, args, pv.code_version(), "; the games are its own.", ""), ""]
    header = "| model | steps | vs | take (moves) | p(take) | block (moves) | p(block) | give away | win rate |"
    header += "".join(f" block: {k} (moves) |" for k in LINES) + "".join(f" lost: {c} |" for c in LOSS_CAUSES)
    lines += [header, "|---" * (9 + len(LINES) + len(LOSS_CAUSES)) + "|"]
    wins = {bot: [] for bot in args.bots}
    for path in args.models:
        agent, saved = load_agent(path, (ENV_ID,))
        steps = saved.get("global_step", saved["args"]["total_timesteps"])  # a checkpoint's, or the run's end
        for bot in args.bots:
            r = play(agent, bot, args.games, args.seed)
            wins[bot].append(r["win"])
            lines.append(
                f"| `{path}` | {steps} | `{bot}` | {r['take']:.2f} ({r['n_take']}) | {r['p_take']:.2f} | "
                f"{r['block']:.2f} ({r['n_block']}) | "
                f"{r['p_block']:.2f} | {r['give_away']:.2f} | {r['win']:.2f} |"
                + "".join(f" {r[f'block_{k}']:.2f} ({r[f'n_block_{k}']}) |" for k in LINES)
                + "".join(f" {r[c]:.3f} |" for c in LOSS_CAUSES)
            )
            print(lines[-1], flush=True)
    lines += ["", "| vs | win rate of each model | mean ± std | models that won ≥ 50 % |", "|---|---|---|---|"]
    for bot, rates in wins.items():
        each, spread = ", ".join(f"{w:.2f}" for w in rates), pv.over_seeds(rates, ".2f", counts=False)
        lines.append(f"| `{bot}` | {each} | {spread} | {sum(w >= 0.5 for w in rates)} of {len(rates)} |")
    print("\n".join(lines))
    if args.block:
        pv.write_block(pv.ROOT / "docs" / "research-log.md", args.block, "\n".join(lines))


if __name__ == "__main__":
    main()
