"""The board games' final table: saved ppo_lstm_selfplay.py models against every reference, held-out ones included.

Plays each model (a ``--save-model`` file or a ``checkpoint.pt``) ``--games`` games against each bot of the ladder
(``cleanfive.envs.board.BOT_NAMES``) and each held-out perturbed bot (``HELD_OUT_NAMES``: a share of random moves, a
random opening, another leaf evaluation), seats alternating, with sampled moves (as the in-run evaluation) and with
the most likely moves, and marks the bots the model trained against (its ``--bot-opponents``).

One number per model cannot be gamed by learning where its training bots are blind: the **robust rung**, the
strongest ladder bot such that the model wins at least half of its games against every bot it did not train against
on that rung or below (a perturbed bot sits on the rung of the bot it perturbs; ``centre<D>`` on ``search<D>``'s),
with the worst of those win rates (sampled moves). TrueSkill, one number per player, assumes strength is transitive;
this table does not.

    uv run --all-extras python benchmark/board_table.py --models cleanfive/models/connect4.cleanfive_model
"""

import importlib.util
import itertools
from functools import cache

import numpy as np
import provenance as pv
import torch

from cleanfive.envs.board import BOARD_ENV_IDS, BOT_NAMES, HELD_OUT_NAMES
from cleanfive.envs.evaluation import robust_rung as find_robust_rung
from cleanfive.envs.teams import make_team_env, rung

SCRIPT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--models", nargs="+", required=True, help="--save-model files or checkpoints of the script")
PARSER.add_argument("--games", type=int, default=512, help="games per model, bot and way of moving")
PARSER.add_argument("--seed", type=int, default=0, help="seed of the games' generators (moves sampled, perturbed bots)")
PARSER.add_argument("--block", help="also write the table into this docs block (any page of docs/ with its markers)")
PARSER.add_argument(
    "--head-to-head",
    nargs="+",
    default=[],
    metavar="MODEL",
    help="also play each of --models against each of these models, --games games a pair (sampled, each side in half)",
)


@cache
def training_script():
    """The training script as a module (its Agent and zero_state), loaded once."""
    spec = importlib.util.spec_from_file_location("ppo_lstm_selfplay", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def load_agent(path: str, env_ids: tuple[str, ...] = BOARD_ENV_IDS):
    """The script's Agent with the weights of ``path`` (in eval mode), and the saved file (``args``, ...)."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)  # data, never code
        env_id = saved["args"]["env_id"]
    except Exception as exc:  # a missing or foreign file: one line, exit 2 (before the script's imports)
        pv.usage_error(f"cannot read --models {path} ({type(exc).__name__}); pass a --save-model file or a checkpoint")
    pv.check(env_id in env_ids, f"{path} is a model of {env_id}, not of {' or '.join(env_ids)}")
    state, env = saved["model"], make_team_env(env_id, 1, 0)
    sizes = (env.obs_shape, len(state["actor.bias"]), 1, len(state["critic.weight"][0]))
    pv.check(
        not saved["args"].get("lstm_skip"), f"{path} was trained with --lstm-skip: play it with the script at eebd269"
    )
    move_squares = env.move_squares if saved["args"].get("square_head") else None  # (no head before the flag)
    agent = training_script().Agent(*sizes, move_squares)
    agent.load_state_dict(state)
    return agent.eval(), saved


def play(agent, env_id: str, bot: str, games: int, seed: int, most_likely: bool) -> np.ndarray:
    """``games`` games of ``agent`` against ``bot``, the agent on side ``g % 2`` of game g: its score per game, 1 win,
    0.5 draw, 0 loss. Moves sampled from the policy, or its most likely legal move."""
    env, rng, zero_state = make_team_env(env_id, games, seed), np.random.default_rng(seed), training_script().zero_state
    rows, side = np.arange(games), np.arange(games) % 2
    obs, info = env.reset()
    state, done, scores = zero_state(agent, games, "cpu"), torch.zeros(games), np.full(games, np.nan)
    with torch.random.fork_rng(), torch.inference_mode():
        torch.manual_seed(seed)
        while np.isnan(scores).any():
            x, mask = torch.as_tensor(obs[rows, side, 0]), torch.as_tensor(info["action_mask"][rows, side, 0])
            active = torch.as_tensor(info["acting"][rows, side, 0])
            hidden, state, squares = agent.get_states(x, state, done, active)
            logits = agent.get_logits(hidden, squares).masked_fill(~mask, -torch.inf)
            moves = logits.argmax(-1) if most_likely else torch.distributions.Categorical(logits=logits).sample()
            actions = np.zeros((games, 2, 1), dtype=np.int64)
            actions[rows, side, 0] = moves.numpy()
            actions[rows, 1 - side] = env.bot_actions(bot, obs, info, 1 - side, rng)
            obs, _, next_done, info = env.step(actions)
            finished = info["game_over"] & np.isnan(scores)  # the first game of each env counts
            scores[finished] = (info["outcome"][finished, side[finished]] + 1) / 2
            done = torch.as_tensor(next_done, dtype=torch.float32)
    return scores


def bots() -> list[str]:
    """The ladder, each bot followed by the held-out bots on its rung."""
    return [name for ladder in BOT_NAMES for name in [ladder, *(h for h in HELD_OUT_NAMES if rung(h) == ladder)]]


def final_table(path: str, games: int, seed: int) -> dict:
    """A model's results: ``env_id``, ``trained`` (its bot opponents), ``games`` and per bot [win, draw, loss] with
    sampled moves (``sampled``) and with the most likely ones (``most_likely``)."""
    agent, saved = load_agent(path)
    args = saved["args"]
    out = {"env_id": args["env_id"], "trained": list(args.get("bot_opponents") or []), "games": games}
    out |= {"sampled": {}, "most_likely": {}}
    for bot in bots():
        for way in ("sampled", "most_likely"):
            scores = play(agent, args["env_id"], bot, games, seed, way == "most_likely")
            out[way][bot] = [float((scores == s).mean()) for s in (1.0, 0.5, 0.0)]
        print(f"  {path}: vs {bot} {out['sampled'][bot][0]:.2f} sampled, {out['most_likely'][bot][0]:.2f}", flush=True)
    return out


def robust_rung(result: dict) -> tuple[str, float, str | None]:
    """The robust rung of one model's ``final_table``, found as the scripts' summary finds it
    (``cleanfive.envs.evaluation.robust_rung``: ``"none"`` if it loses on the first rung that counts), the worst
    sampled win rate over the bots that count up to it, and that bot. A rung counts the bots on it that the model did
    not train against; one of trained bots only (``random`` in the default recipe) is passed over."""
    wins = {bot: r[0] for bot, r in result["sampled"].items()}
    held_out = {bot: rung(bot) for bot in wins}
    held, worst = find_robust_rung(wins, list(BOT_NAMES), held_out, result["trained"])
    return held, wins.get(worst, np.nan), worst


def table(results: dict[str, dict]) -> list[str]:
    """The markdown table of ``results`` (label -> final_table), one pair of columns per model, and the headline."""
    labels = list(results)
    played = [bot for bot in bots() if all(bot in r["sampled"] for r in results.values())]  # (kept: an older list)
    lines = ["| vs | rung | " + " | ".join(f"{label}: sampled | most likely" for label in labels) + " |"]
    lines += ["|---|---|" + "---:|---:|" * len(labels)]
    for bot in played:
        cells = []
        for label in labels:
            r, mark = results[label], " (trained)" if bot in results[label]["trained"] else ""
            cells += [
                f"{r['sampled'][bot][0]:.2f} / {r['sampled'][bot][2]:.2f}{mark}",
                f"{r['most_likely'][bot][0]:.2f}",
            ]
        lines.append(f"| `{bot}` | `{rung(bot)}` | " + " | ".join(cells) + " |")
    lines += ["", "| model | trained against | robust rung | worst untrained win rate up to it (sampled) |"]
    lines += ["|---|---|---|---|"]
    for label, r in results.items():
        held, worst, against = robust_rung(r)
        trained = " ".join(f"`{b}`" for b in r["trained"]) or "none"
        lines.append(f"| {label} | {trained} | `{held}` | " + (f"{worst:.2f} (`{against}`) |" if against else "— |"))
    games = "/".join(sorted({str(r["games"]) for r in results.values()}))
    note = (
        f"Each cell: {games} games, the model on each side in half; sampled moves: win rate / loss rate (draws the "
        "rest), most likely moves: win rate. (trained): a bot the model trained against. The robust rung: the "
        "strongest ladder bot such that the model wins at least half of its games against every bot it did not "
        "train against on that rung or below (a perturbed bot sits on the rung of the bot it perturbs; a rung of "
        "bots it trained against only is passed over)."
    )
    return [note, "", *lines]


def match(path: str, other: str, games: int, seed: int) -> dict[str, float]:
    """``games`` games of the model ``path`` against the model ``other`` from the empty board, sampled moves, each side
    in half (cleanfive/arena.py: play_match, seeded by ``seed``, as is torch for the moves); its win, draw and loss
    rates."""
    from cleanfive import arena  # (it loads the training script's Agent: only when asked)

    torch.manual_seed(seed)  # the models' sampled moves
    a, b = arena.load_model(path), arena.load_model(other)
    scores = arena.play_match(a.env_id, a.num_heroes, a, b, games, seed=seed)
    return {outcome: float(np.mean(scores == score)) for outcome, score in (("win", 1.0), ("draw", 0.5), ("loss", 0.0))}


def head_to_head(models: list[str], opponents: list[str], games: int, seed: int) -> list[str]:
    """--head-to-head: each of ``models`` against each of ``opponents`` (:func:`match`); a table of the rates."""
    lines = ["| model | against | win | draw | loss | score (win + draw / 2) |", "|---|---|---:|---:|---:|---:|"]
    for path, other in itertools.product(models, opponents):
        rates = match(path, other, games, seed)
        cells = [*rates.values(), rates["win"] + rates["draw"] / 2]
        lines.append(f"| `{path}` | `{other}` | " + " | ".join(f"{r:.3f}" for r in cells) + " |")
    return lines


def main() -> None:
    args = PARSER.parse_args()
    if args.block:
        pv.markers(pv.ROOT / "docs" / "research-log.md", args.block)  # stop now if no page has the markers
    torch.set_num_threads(1)
    results = {f"`{path}`": final_table(path, args.games, args.seed) for path in args.models}
    lines = [
        *pv.header(PARSER, args, pv.code_version(), "; the games are its own.", ""),
        "",
        *table(results),
    ]
    if args.head_to_head:
        lines += [
            "",
            f"Head to head, {args.games} games a pair:",
            "",
            *head_to_head(args.models, args.head_to_head, args.games, args.seed),
        ]
    print("\n".join(lines))
    if args.block:
        pv.write_block(pv.ROOT / "docs" / "research-log.md", args.block, "\n".join(lines))


if __name__ == "__main__":
    main()
