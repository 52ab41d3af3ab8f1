"""TrueSkill evaluation of a model of the team scripts (ppo_lstm_selfplay.py, five_surgery.py) and its final table,
shared with the benchmarks.

:func:`play_references` plays a model against references and rates it (OpenAI Five, Appendix J). A run's last
evaluation and ``--eval-only`` play a model against every reference and held-out bot; the summary they
print is :func:`print_reference_table`: win, draw and loss rates by TrueSkill, the bots the model trained against
(:func:`trained_bots`) and its **robust rung** (issue 50, :func:`robust_rung`), the strongest reference up to which it
wins at least ``ROBUST_WIN_RATE`` of its games against every bot it did not train against. ``benchmark/board_table.py``
finds the same rung from its own games.
"""

import os

import numpy as np
import torch
from PIL import Image

from cleanfive.envs.teams import make_team_env

ROBUST_WIN_RATE = 0.5  # a robust rung: every untrained reference up to it beaten in this share of games


def trained_bots(run_args: dict, references) -> tuple[str, ...]:
    """The bots a run of `run_args` (a saved model's "args") trained against: none without the bot curriculum; its
    bot opponents, or its references (default: `references`) where it named none."""
    if not (run_args.get("bot_fraction") or run_args.get("bot_fraction_end")):
        return ()
    return tuple(run_args.get("bot_opponents") or run_args.get("references") or references)


def robust_rung(win_rates, ladder, held_out, trained):
    """The robust rung (issue 50) of a model that won `win_rates` ({bot: share of games}): the strongest rung of
    `ladder` (references, weakest first) up to which it wins at least ROBUST_WIN_RATE of its games against every bot
    it did not train against (`trained`); a held-out bot sits on the rung `held_out` names, a rung of trained bots
    only is passed over. Returns the rung ("none": not even the first) and the bot of the worst of those win rates."""
    held, counted = "none", {}
    for rung in ladder:
        untrained = {b: win for b, win in win_rates.items() if held_out.get(b, b) == rung and b not in trained}
        if untrained and min(untrained.values()) < ROBUST_WIN_RATE:
            break
        if untrained:
            held, counted = rung, counted | untrained
    return held, min(counted, key=counted.get, default=None)


def print_reference_table(results, evaluator, games, trained, held_out):
    """The summary of a model (--eval-only, the end of a run): win, draw and loss rates against each reference by
    TrueSkill, each followed by the held-out bots on its rung (`held_out`), the bots it trained against (`trained`)
    marked; its robust rung and the worst win rate up to it (TrueSkill's one number assumes transitive strength: a
    model can beat the bots it trained against and lose to weaker ones it never met); then its TrueSkill.
    `results`: {bot: (win, draw, loss) rates}; `evaluator`: the run's trueskill_league.ReferenceEvaluator."""
    ladder = sorted((k for k in results if k in evaluator.references), key=lambda k: evaluator.references[k].mu)
    print("| bot | rung | trained against | its TrueSkill μ | win | draw | loss | games |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for rung in ladder:
        for name in [rung, *(k for k in results if held_out.get(k) == rung)]:
            mu = f"{evaluator.references[name].mu:.2f}" if name in evaluator.references else "held out"
            cells = " | ".join(f"{rate:.3f}" for rate in results[name])
            print(f"| `{name}` | `{rung}` | {'yes' if name in trained else ''} | {mu} | {cells} | {games} |")
    held, worst = robust_rung({k: win for k, (win, _, _) in results.items()}, ladder, held_out, trained)
    rung = f"{held} (worst win rate up to it: {results[worst][0]:.3f} vs {worst})" if worst else "none"
    print(f"trained against: {' '.join(trained) or 'no bot'}\nrobust rung: {rung}")
    print(f"trueskill_mu={evaluator.rating.mu:.2f} sigma={evaluator.rating.sigma:.2f}")


def play_references(agent, env_id, num_heroes, eval_games, evaluator, names, device, eval_rng, video_path=None):
    """TrueSkill evaluation (OpenAI Five, Appendix J) of `agent` (a team script's Agent, `num_heroes` a side, in world
    `env_id`): `eval_games` games against each reference in `names`, all at once (game g
    faces `names[g // eval_games]`; each bot moves in its own games only).

    Every random draw comes from `eval_rng` (world seeds, bot moves and, by a forked torch generator, the agent's
    actions), so that evaluating never changes the training run. Returns {reference: (wins, draws, losses) as
    fractions}. With `video_path`, game 0 (against the first reference) is saved as a GIF (every 4th step).
    """
    E, N = eval_games * len(names), num_heroes
    env = make_team_env(env_id, E, int(eval_rng.integers(2**31)), num_heroes)
    rows, opponent = np.arange(E), np.repeat(np.arange(len(names)), eval_games)  # index into names
    agent_side = rows % eval_games % 2  # the agent plays each side in half of the games against each reference
    with torch.random.fork_rng(), torch.inference_mode():
        torch.manual_seed(int(eval_rng.integers(2**31)))
        obs, info = env.reset()
        frames, step = [], 0
        state = tuple(torch.zeros(1, E * N, agent.lstm.hidden_size, device=device) for _ in range(2))  # LSTM (h, c)
        done, scores = torch.zeros(E * N).to(device), np.full(E, np.nan)
        while np.isnan(scores).any():  # until every game has ended once
            x = torch.as_tensor(obs[rows, agent_side], device=device).flatten(0, 1)
            mask = torch.as_tensor(info["action_mask"][rows, agent_side], device=device).flatten(0, 1)
            active = torch.as_tensor(np.repeat(info["acting"][rows, agent_side].any(-1), N), device=device)
            action, _, _, _, state = agent.get_action_and_value(x, state, done, active, mask)
            actions = np.zeros((E, 2, N), dtype=np.int64)
            actions[rows, agent_side] = action.cpu().numpy().reshape(E, N)
            for i, name in enumerate(names):
                games = opponent == i
                bot = env.bot_actions(name, obs, info, 1 - agent_side, eval_rng, games)[games]
                actions[rows[games], 1 - agent_side[games]] = bot
            if video_path and np.isnan(scores[0]) and step % 4 == 0:
                frames.append(Image.fromarray(env.render(0)))
            step += 1
            obs, _, next_done, info = env.step(actions)
            finished = info["game_over"] & np.isnan(scores)
            scores[finished] = (info["outcome"][finished, agent_side[finished]] + 1) / 2  # 1 win, 0.5 draw, 0 loss
            done = torch.as_tensor(np.repeat(next_done, N), dtype=torch.float32, device=device)
    if frames:
        os.makedirs(os.path.dirname(video_path), exist_ok=True)
        frames[0].save(video_path, save_all=True, append_images=frames[1:], duration=100, loop=0)
    results = {}
    for i, name in enumerate(names):
        against = scores[opponent == i]
        if name in evaluator.references:  # (a held-out bot is not rated)
            evaluator.update_many(name, against)
        results[name] = ((against == 1).mean(), (against == 0.5).mean(), (against == 0).mean())
    return results
