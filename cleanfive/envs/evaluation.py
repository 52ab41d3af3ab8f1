"""The final table of a model of the team scripts (ppo_lstm_selfplay.py, five_surgery.py), shared with the benchmarks.

A run's last evaluation and ``--eval-only`` play a model against every reference and held-out bot; the summary they
print is :func:`print_reference_table`: win, draw and loss rates by TrueSkill, the bots the model trained against
(:func:`trained_bots`) and its **robust rung** (issue 50, :func:`robust_rung`), the strongest reference up to which it
wins at least ``ROBUST_WIN_RATE`` of its games against every bot it did not train against. ``benchmark/board_table.py``
finds the same rung from its own games.
"""

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
