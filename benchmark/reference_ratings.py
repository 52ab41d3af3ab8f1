"""The reference ratings that ship with cleanfive: every world's default references, rated by games among themselves.

For each world (its default team size and bots, the scripts' default ``--reference-games``), plays every pair of
references ``games`` games (seed 0) and fits their TrueSkill ratings (OpenAI Five, Appendix J; ``random`` at mu = 0),
exactly as a training run does on its first start (``cleanfive.envs.teams.fit_bots``). Writes them, with the settings
and code version that produced them, to ``cleanfive/envs/reference_ratings.json``: a run whose world, team size, bots,
games and world code match reads them there instead of rating the references itself. Run it again after changing a
world's code or bots (``tests/test_board.py`` says when the file no longer matches the code).

    uv run --all-extras python benchmark/reference_ratings.py
"""

import json
import time

import provenance as pv

from cleanfive.envs.teams import (
    SHIPPED_RATINGS,
    TEAM_ENV_IDS,
    fit_bots,
    make_team_env,
    play_bots,
    ratings_key,
)

WORLD_CODE = ("cleanfive/envs/board.py", "cleanfive/envs/moba.py", "cleanfive/envs/football.py")  # the bots too
GAMES = 400  # the default --reference-games of ppo_lstm_selfplay.py and five_surgery.py
SLICE_GAMES = 24  # the games of the slice that tests/test_reference_ratings.py plays again in the default run
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--worlds", nargs="+", default=list(TEAM_ENV_IDS), choices=TEAM_ENV_IDS, help="worlds to rate")
PARSER.add_argument("--games", type=int, default=GAMES, help="games per pair of references")


if __name__ == "__main__":
    args = PARSER.parse_args()
    shipped = json.loads(SHIPPED_RATINGS.read_text()) if SHIPPED_RATINGS.exists() else {}
    code, rows = pv.code_version("cleanfive/envs/teams.py", *WORLD_CODE, "cleanfive/trueskill_league.py"), []
    for env_id in args.worlds:
        env = make_team_env(env_id, 1, 0)
        references = list(env.bot_names)
        key = ratings_key(env, env_id, references, args.games)
        start = time.time()
        ratings = fit_bots(env_id, env.num_heroes, references, args.games)
        seconds = time.time() - start
        for old in [k for k, v in shipped.items() if v["env_id"] == env_id and v["num_heroes"] == env.num_heroes]:
            del shipped[old]  # one entry per world and team size: the current code's
        shipped[key] = dict(env_id=env_id, num_heroes=env.num_heroes, references=references, games=args.games, seed=0)
        shipped[key] |= dict(world_code=key.rsplit("__", 1)[1], commit=code, date=pv.now(), seconds=round(seconds, 1))
        shipped[key]["ratings"] = {k: {"mu": r.mu, "sigma": r.sigma} for k, r in ratings.items()}
        # a slice that a default test run replays exactly: SLICE_GAMES seeded games of the second and third references
        pair = references[1:3]  # (the first, random, loses nearly every game: a slice of it would say little)
        scores = play_bots(env_id, *pair, SLICE_GAMES, 0, env.num_heroes)
        shipped[key]["slice"] = {"pair": pair, "games": SLICE_GAMES, "scores": [float(s) for s in scores]}
        rows.append((env_id, env.num_heroes, seconds, ratings))
    SHIPPED_RATINGS.write_text(json.dumps(dict(sorted(shipped.items())), indent=1) + "\n")
    print("\n".join(pv.header(PARSER, args, code, "", "")))
    print("| world | heroes | rated in | references (TrueSkill mu ± sigma) |")
    print("|---|---:|---:|---|")
    for env_id, heroes, seconds, ratings in rows:
        ranked = sorted(ratings.items(), key=lambda item: item[1].mu)
        ladder = ", ".join(f"`{name}` {r.mu:.2f} ± {r.sigma:.2f}" for name, r in ranked)
        print(f"| {env_id} | {heroes} | {seconds:.0f} s | {ladder} |")
    print(f"saved {SHIPPED_RATINGS.relative_to(pv.ROOT)}")
