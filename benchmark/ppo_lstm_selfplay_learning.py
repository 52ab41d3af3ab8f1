"""Learning benchmark of cleanfive/ppo_lstm_selfplay.py on one world: TrueSkill and win rates against time.

Runs one process per seed (``--jobs`` at a time, one torch thread each when more than one) for ``--minutes`` of wall
time or (``--clock cpu``) of its own CPU time, reads the evaluation lines it prints and tabulates per seed and across
seeds when the win rate against each reference bot first reached a threshold (on --clock, and in steps) and the
TrueSkill reached. A run that ends and saves its model (``-- --save-model``) plays it against every reference,
``--final-games`` games each: on the board games held-out perturbed ones too, sampled and most likely moves
(``benchmark/board_table.py``; each model's robust rung follows), in the team worlds with the script's ``--eval-only``
(win, draw and loss rates); on Connect Four the perfect-play judge's numbers too (``benchmark/connect4_judge.py``).
A kept run whose model has no final table (or judge) yet gets it. Writes a plot and the tables into
docs/ppo_lstm_selfplay.md between the world's markers (or ``--block``'s) unless --no-docs.
``--script-at`` trains the script of an earlier commit instead: a change's own effect, side by side.
``--resumable`` writes a checkpoint at each evaluation: run the command again and a seed that was stopped midway
goes on from its last one (the table names it: a world that cannot save its state restarts the games in flight);
on Connect Four each of those checkpoints is judged too, and the plot gains the judge against CPU time.
``--head-to-head`` (board games) plays each seed's final model against the world's bundled model (``bundled``) and
against the same seed's final model of each named block (its kept run; the model file must be in this tree's runs/
and be the one that block's final table played), 512 games a pair from the empty board, sampled moves, each side in
half (``cleanfive/arena.py``'s ``play_match``); a kept run gets the matches it lacks.

    uv run --all-extras python benchmark/ppo_lstm_selfplay_learning.py --env-id Moba5v5-v0 --seeds 1 2 3 --minutes 60 \\
        --jobs 2 -- --num-heroes 3 --num-envs 32 --hidden-size 128
    uv run --all-extras python benchmark/ppo_lstm_selfplay_learning.py --seeds 1 2 3 --minutes 30 --clock cpu \\
        --jobs 3 --script-at d753023 --block connect4_boot_before
"""

import argparse
import ast
import hashlib
import itertools
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import board_table
import connect4_judge
import numpy as np
import provenance as pv
import torch

from cleanfive.envs.teams import world_defaults

SCRIPT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
DOC = pv.ROOT / "docs" / "ppo_lstm_selfplay.md"
LATE = 5 / 6  # "last sixth": the evaluations from this share of a run's last step on, a steadier "by the end"
EARLY = 1 / 6  # "after the first sixth": the judged checkpoints after this share of a run's last step
MEASURED = ("cleanfive/envs/teams.py", "cleanfive/trueskill_league.py")  # with the script and the world's file
BOARD_LADDER = ["random", "greedy", "lookahead", *(f"search{k}" for k in range(1, 5))]
# per world: its references weakest first (the script's default --references), the win-rate targets, the docs block
WORLDS = {
    "ConnectFour-v1": (
        BOARD_LADDER,
        [("random", 0.95), ("lookahead", 0.60), ("search2", 0.50)],  # the last: issue 40's target
        "connect4",
        "board",
    ),
    # a draw with best play: its final table's loss column is the one to read (issue 50: no loss to `search4`)
    "TicTacToe-v1": (BOARD_LADDER, [("random", 0.95)], "tictactoe", "board"),
    "Moba5v5-v0": (["random", "push", "lasthit"], [("random", 0.95), ("push", 0.5), ("lasthit", 0.5)], "moba", "moba"),
    # a goal ends the game, so a win is a goal scored first (draw: no goal in 500 steps)
    "VmasFootball-v0": (
        ["random", "vmas_ai25", "vmas_ai50", "chase", "vmas_ai75", "vmas_ai"],
        [("random", 0.5), ("chase", 0.5)],
        "football",
        "football",
    ),
}
HEAD_TO_HEAD_GAMES = 512  # games a pair: a score's standard error at most 0.5 / sqrt(512) = 0.022
BUNDLED = {"ConnectFour-v1": "connect4", "TicTacToe-v1": "tictactoe"}  # cleanfive/models/<name>.cleanfive_model
PARSER = pv.parser(__file__, __doc__, results="learning")
PARSER.add_argument("--env-id", choices=sorted(WORLDS), default="ConnectFour-v1", help="the world to train in")
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training seeds, one run each")
PARSER.add_argument("--minutes", type=float, default=30.0, help="budget per seed, on --clock")
PARSER.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="cpu: the run's own CPU time")
PARSER.add_argument("--jobs", type=int, default=1, help="seeds run at once (>1: one torch thread each)")
PARSER.add_argument("--block", help="docs block (and plot) to write, if not the world's own: a variant's results")
PARSER.add_argument("--script-at", metavar="COMMIT", help="train the script as of COMMIT (with this tree's worlds)")
PARSER.add_argument(
    "--resumable",
    action="store_true",
    help="checkpoint at each evaluation: run again, a stopped seed goes on from there",
)
PARSER.add_argument("--final-games", type=int, default=512, help="the final table's games per reference")
PARSER.add_argument(
    "--head-to-head",
    nargs="+",
    metavar="OPPONENT",
    help="board games: each final model against `bundled` (the world's bundled model) and each named block's model",
)
EVAL_EVERY = argparse.ArgumentParser(add_help=False, allow_abbrev=False)  # the extra flags' --eval-every, if any
EVAL_EVERY.add_argument("--eval-every", type=int)
SO_FAR = ("checkpoint", "rows", "ratings", "resumed", "started")  # what --resumable keeps of a run in flight


def run_seed(seed: int, args: argparse.Namespace, so_far: Path, identity: dict) -> dict:
    """Run one seed for ``--minutes`` of ``--clock``; its evaluations (``rows``: wall and CPU seconds, step, mu, load,
    win rates) and the references' ratings it printed at the start (``ratings``). With ``--resumable`` the script
    writes a checkpoint at each evaluation and ``so_far`` keeps the rows (git ignores it: it names a local file):
    run again (the same ``identity``: flags, clock, code; the budget may differ), a seed that was stopped (a
    machine's restart, a session's end) goes on from its last checkpoint, its rows and clocks from there
    (``resumed``: the steps it went on from; what ran after them before the stop is not counted)."""
    script = pv.script_at(args.script_at, SCRIPT) if args.script_at else SCRIPT
    evaluations = EVAL_EVERY.parse_known_args(args.extra)[0].eval_every or world_defaults(args.env_id)["eval_every"]
    save_every = evaluations if args.resumable else 0  # --resumable: a checkpoint just after each evaluation
    cmd = [sys.executable, "-u", str(script), "--env-id", args.env_id, "--seed", str(seed)]
    cmd += ["--save-every", str(save_every)]
    rows, ratings, model, start, offset = [], {}, None, time.time(), {"time": 0.0, "cpu": 0.0}
    checkpoint, resumed, started, out_of_budget, judged = None, [], pv.now(), False, None
    if args.resumable:  # in a run folder named by the block
        exp_name = f"{SCRIPT.stem}__{so_far.parent.name}"  # (another block's run of this seed is not ours)
        cmd += ["--exp-name", exp_name]
        kept = pv.load_kept(so_far, **{k: v for k, v in identity.items() if k != "minutes"})  # (budget: may grow)
        if kept and Path(kept["checkpoint"]).exists():  # (the script takes the run's flags from its checkpoint)
            checkpoint, rows, ratings, resumed, started = (kept[k] for k in SO_FAR)
            cmd += ["--resume", checkpoint]
    for line, cpu in pv.stream([*cmd, *args.extra], 1 if args.jobs > 1 else None):
        model = line.removeprefix("model saved to ") if line.startswith("model saved to ") else model
        if line.startswith("reference ratings: "):
            ratings = ast.literal_eval(line.removeprefix("reference ratings: "))
        if line.startswith("resumed from "):  # "... (global_step G)": the evaluations after G are played again
            step = int(line.rsplit("global_step ", 1)[1].rstrip(")"))
            rows, resumed = [row for row in rows if row["step"] <= step], [*resumed, step]
            offset = {key: rows[-1][key] if rows else 0.0 for key in offset}
            print(f"  seed {seed}: resumed at step {step:,}", flush=True)
        if line.startswith("eval "):
            row = pv.eval_row(line)
            row |= {
                "time": round(row["time"] + offset["time"], 1),
                "cpu": cpu + offset["cpu"],
                "load": os.getloadavg()[0],
            }
            rows.append(row)
            print(f"  seed {seed}: {line}", flush=True)
            if args.resumable:  # the folder of this sitting's run (it keeps its name when resumed) holds the checkpoint
                checkpoint = checkpoint or str(
                    newest_run(f"{args.env_id}__{exp_name}__{seed}", start) / "checkpoint.pt"
                )
                judged = judge_checkpoint(checkpoint, rows, args.env_id, judged)
                pv.keep(
                    so_far, identity | dict(zip(SO_FAR, (checkpoint, rows, ratings, resumed, started), strict=True))
                )
        out_of_budget = (cpu + offset["cpu"] if args.clock == "cpu" else time.time() - start + offset["time"]) > (
            args.minutes * 60
        )
        if out_of_budget:
            break
    if checkpoint:  # the checkpoint written after the last evaluation line
        judge_checkpoint(checkpoint, rows, args.env_id, judged)
    run = {"rows": rows, "ratings": ratings} | ({"resumed": resumed, "started": started} if resumed else {})
    if model is not None:  # (else stopped by the budget before it saved its model)
        run |= {"model": model, "final": final_table(model, seed, args)}
    if not out_of_budget:  # (stopped by the budget, its rows stay: a larger budget can go on from there)
        so_far.unlink(missing_ok=True)
    return run


def judge_checkpoint(checkpoint: str, rows: list[dict], env_id: str, judged: float | None) -> float | None:
    """--resumable on Connect Four: the perfect-play judge (``benchmark/connect4_judge.py``, overall) of the run's
    checkpoint, written just after an evaluation and read at the next evaluation's line (or at its own, or after the
    run), kept as ``judge`` in the row of the evaluation at the checkpoint's step. ``judged``: the modification time
    of the file judged last (not judged again); returns that of this one."""
    path = Path(checkpoint)
    if env_id != connect4_judge.ENV_ID or not path.exists() or path.stat().st_mtime == judged:
        return judged
    mtime = path.stat().st_mtime
    try:
        result = connect4_judge.judge(checkpoint)
    except SystemExit:  # a file the judge cannot read (it said why in one line): no point on the curve, the run goes on
        return mtime
    for row in rows:
        if row["step"] == result["global_step"]:
            row["judge"] = {metric: round(result["overall"][metric], 4) for metric in connect4_judge.METRICS}
    return mtime


def newest_run(name: str, since: float) -> Path:
    """The folder under runs/ of the newest run named ``name``__<time> made since ``since`` (a time)."""
    found = [d for d in (pv.ROOT / "runs").glob(f"{name}__*") if d.stat().st_mtime >= since - 1]  # (1: a tick)
    pv.check(bool(found), f"no runs/{name}__* folder since the run started: where is its checkpoint?")
    return max(found, key=lambda d: d.stat().st_mtime)


def final_table(model: str, seed: int, args: argparse.Namespace) -> dict:
    """The saved model of a run against every reference, ``--final-games`` games each, sampled moves: on the board
    games most likely moves too and the held-out perturbed bots (``benchmark/board_table.py``); elsewhere the
    script's own ``--eval-only`` (each side in half of the games): ``games``, ``results`` ({reference: [win, draw,
    loss]}) and the ``trained`` and ``robust rung`` lines it prints; ``model_sha256``: which file it played."""
    digest = {"model_sha256": hashlib.sha256((pv.ROOT / model).read_bytes()).hexdigest()}
    if args.env_id == connect4_judge.ENV_ID:  # and the perfect-play judge
        return board_table.final_table(model, args.final_games, seed) | digest | {"judge": connect4_judge.judge(model)}
    if args.env_id in board_table.BOARD_ENV_IDS:
        return board_table.final_table(model, args.final_games, seed) | digest
    script = pv.script_at(args.script_at, SCRIPT) if args.script_at else SCRIPT
    cmd = [sys.executable, "-u", str(script), "--env-id", args.env_id, "--seed", str(seed), *args.extra]
    cmd += ["--eval-only", model, "--eval-games", str(args.final_games)]  # (after the extra flags: these win)
    out = {"games": args.final_games, "results": {}} | digest
    for line, _ in pv.stream(cmd, 1 if args.jobs > 1 else None):
        if line.startswith("| `"):  # | `name` | ... | win | draw | loss | games | (its rung, trained, μ between)
            cells = [cell.strip(" `") for cell in line.strip("|").split("|")]
            out["results"][cells[0]] = [float(rate) for rate in cells[-4:-1]]
        for key in ("trained against", "robust rung"):
            out |= {key: line.removeprefix(f"{key}: ")} if line.startswith(f"{key}: ") else {}
    return out


def team_table(finals: dict[str, dict]) -> list[str]:
    """The team worlds' final table: per reference and seed, win / draw / loss rates and the share of the decided
    games won (a football win is a goal scored first: a goal ends the game), then what each model trained against
    and its robust rung, as the script prints them."""
    seeds, games = list(finals), "/".join(sorted({str(f["games"]) for f in finals.values()}))
    lines = [f"Each cell: {games} games, the model on each side in half; sampled actions: win / draw / loss rate "]
    lines[0] += "(the share of the decided games won)."
    lines += ["", "| vs | " + " | ".join(seeds) + " |", "|---|" + "---:|" * len(seeds)]
    for name in next(iter(finals.values()))["results"]:
        cells = []
        for seed in seeds:
            win, draw, loss = finals[seed]["results"][name]
            decided = f"{win / (win + loss):.2f}" if win + loss else "—"
            cells.append(f"{win:.2f} / {draw:.2f} / {loss:.2f} ({decided})")
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    for key in ("trained against", "robust rung"):
        lines.append(f"| {key} | " + " | ".join(finals[seed].get(key, "—") for seed in seeds) + " |")
    return lines


def ladder_bots(extra: list[str]) -> list[str]:
    """The training bots of a --bot-ladder run, weakest first, as its --bot-opponents name them ([] if it names none
    or has no ladder)."""
    if "--bot-ladder" not in extra or "--bot-opponents" not in extra:
        return []
    return list(itertools.takewhile(lambda x: not x.startswith("--"), extra[extra.index("--bot-opponents") + 1 :]))


def stopped_by_budget(found: dict[int, dict | None], extra: list[str]) -> list[str]:
    """The seeds of a --save-model run that the budget stopped before they saved their model ("seed 1 at 9.04M
    steps"): their "final" rows are their last evaluation and they have no final table."""
    if "--save-model" not in extra:
        return []
    return [
        f"seed {s} at {run['rows'][-1]['step'] / 1e6:.2f}M steps"
        for s, run in found.items()
        if run and run["rows"] and "model" not in run
    ]


def resumed_seeds(found: dict[int, dict | None]) -> list[str]:
    """The seeds that went on from a checkpoint in a later sitting ("seed 3 at step 8,257,536"): a world that cannot
    save its state (football) restarts the games in flight there, so such a run is not the one an unbroken run
    would have been."""
    return [
        f"seed {s} at step {', '.join(f'{step:,}' for step in run['resumed'])}"
        for s, run in found.items()
        if run and run.get("resumed")
    ]


def used_minutes(run: dict, clock: str) -> float:
    """The minutes of ``clock`` a kept run had used at its last evaluation."""
    return run["rows"][-1]["cpu" if clock == "cpu" else "time"] / 60 if run["rows"] else 0.0


def other_budget_seeds(found: dict[int, dict | None], minutes: float) -> list[str]:
    """The seeds kept from a sitting under another budget ("seed 1 (budget 125, ended at 100.5)"): each ended within
    this one, so it is the run this budget would have given."""
    return [
        f"seed {s} (budget {run['minutes']:g}, ended at {used_minutes(run, run['clock']):.1f})"
        for s, run in found.items()
        if run and run["minutes"] != minutes
    ]


def kept_or_train(seed: int, block: str, args: argparse.Namespace) -> dict | None:
    """The kept run of ``seed`` if it had this world, budget, clock, threads and extra flags (or another budget
    that it ended within, with its model, before this budget would have stopped it); else, unless --from-results,
    run it and keep it (so that one table can span sittings)."""
    expected = {"env_id": args.env_id, "seed": seed, "minutes": args.minutes, "clock": args.clock}
    expected |= {"threads": 1 if args.jobs > 1 else None, "extra": args.extra}
    expected |= {"script_at": args.script_at} if args.script_at else {}  # (absent from the runs of this tree's script)
    path = args.results / block / f"seed{seed}.json"
    code = (SCRIPT, f"cleanfive/envs/{WORLDS[args.env_id][3]}.py", *MEASURED)
    so_far = path.with_suffix(".so_far.json")  # (--resumable: a stopped run's rows and checkpoint)
    other = pv.load_kept(path, **{k: v for k, v in expected.items() if k != "minutes"})
    if other and "model" in other and used_minutes(other, args.clock) <= args.minutes:
        expected["minutes"] = other["minutes"]  # (a run that ended before either budget would have stopped it)
    train = partial(run_seed, seed, args, so_far, expected | {"code": pv.code_version(*code)})
    run = pv.kept_or_run(path, f"seed {seed}", expected, args.from_results, train, code)
    if run and run.get("model") and "final" not in run:  # (a run kept before its world had a final table)
        run |= {"final": final_table(run["model"], seed, args)}
        pv.keep(path, run)
    model = pv.ROOT / run["model"] if run and run.get("model") else None
    if model and args.env_id == connect4_judge.ENV_ID and "judge" not in run["final"] and model.exists():
        if run["final"].get("model_sha256") in digests(model):  # the file it played
            run["final"]["judge"] = connect4_judge.judge(str(model))
            pv.keep(path, run)
    for opponent in args.head_to_head or []:  # --head-to-head: the matches the kept run lacks
        kept = run["final"].get("head_to_head", {}) if model else {}
        kept_bundled = opponent == "bundled" and "bundled" in kept
        if kept_bundled and kept["bundled"]["opponent_sha256"] not in digests(bundled_file(args)):
            former = kept.pop("bundled")  # the bundled model was replaced since (not converted): the former one's
            kept[f"bundled@{former['opponent_sha256'][:8]}"] = former
        if model and opponent not in run["final"].get("head_to_head", {}):
            if result := head_to_head(model, run["final"].get("model_sha256"), seed, opponent, args):
                run["final"].setdefault("head_to_head", {})[opponent] = result
                pv.keep(path, run)
    return run


def bundled_file(args: argparse.Namespace) -> Path:
    return pv.ROOT / "cleanfive" / "models" / f"{BUNDLED[args.env_id]}.cleanfive_model"


def bundled_sha256(args: argparse.Namespace) -> str:
    return hashlib.sha256(bundled_file(args).read_bytes()).hexdigest()


def digests(path: Path) -> set[str]:
    """The sha256 of the file ``path`` and of each earlier version of it that ``cleanfive/convert_saved.py`` turned
    into it (its ``converted_from``): results that name any of them name this model."""
    saved = torch.load(path, map_location="cpu", weights_only=True)  # a file is data, never code
    return {hashlib.sha256(path.read_bytes()).hexdigest(), *saved.get("converted_from", [])}


def played_file(path: Path, sha256: str | None) -> Path | None:
    """``path`` if it exists and is the file whose digest its final table kept (``sha256``, or a version of it
    before a conversion), else None."""
    return path if path.exists() and sha256 in digests(path) else None


def head_to_head(model: Path, sha256: str, seed: int, opponent: str, args: argparse.Namespace) -> dict | None:
    """--head-to-head: the final model of ``seed`` (``model``, whose final table played the file of digest ``sha256``)
    against ``opponent``: ``bundled`` (the world's bundled model) or a block (its kept run of the same seed, its
    model as its final table played it), HEAD_TO_HEAD_GAMES games (``board_table.match``, seeded by ``seed``).
    Returns the model's win, draw and loss rates and the opponent's digest; None (said in one line) where a file is
    missing or not the one its results name."""
    if opponent == "bundled":
        other, other_sha256 = bundled_file(args), bundled_sha256(args)
    else:
        kept = pv.load_kept(args.results / opponent / f"seed{seed}.json", env_id=args.env_id) or {}
        other, other_sha256 = pv.ROOT / kept.get("model", "-"), kept.get("final", {}).get("model_sha256")
    if not played_file(model, sha256) or not played_file(other, other_sha256):
        print(f"  seed {seed}: no head-to-head against {opponent}: {other} or {model} is missing or another file")
        return None
    rates = board_table.match(str(model), str(other), HEAD_TO_HEAD_GAMES, seed)
    return {"games": HEAD_TO_HEAD_GAMES, **rates, "opponent_sha256": other_sha256}


def head_to_head_table(finals: dict[int, dict | None], opponents: list[str]) -> list[str]:
    """--head-to-head's rows: per opponent, the final models' score (win + draw / 2) and win, draw and loss rates,
    per seed and across seeds ("—": a seed without that match). A match kept against a bundled model replaced since
    (``bundled@<its digest>``) stays in the kept results, not in the table: history, which the research log tells."""
    rows = []
    for opponent in opponents:
        matches = [(final or {}).get("head_to_head", {}).get(opponent) for final in finals.values()]
        if not any(matches):
            continue
        against = "the bundled model" if opponent == "bundled" else f"`{opponent}`'s model of the same seed"
        scores = [m["win"] + m["draw"] / 2 if m else np.nan for m in matches]
        rows.append((f"score against {against} (win + draw / 2)", scores, ".3f", 1.0))
        for outcome in ("win", "draw", "loss"):
            rates = [m[outcome] if m else np.nan for m in matches]
            rows.append((f"{outcome} rate against {against}", rates, ".3f", 1.0))
    if not rows:
        return []
    note = (
        f"Head to head (`--head-to-head`): each final model against the opponents named, {HEAD_TO_HEAD_GAMES} games "
        "a pair from the empty board, sampled moves, each side in half of the games (`cleanfive/arena.py`)."
    )
    return [note, "", *pv.seed_table(list(finals), rows)]


def judge_table(finals: dict[int, dict]) -> list[str]:
    """The perfect-play judge's rows of the final models (``finals``: seed -> final table; a seed without a judged
    model: "—"): overall keeps, optimal and sampled, the open wins in one move taken (not in judges kept from before
    that count), then keeps by phase, per seed and across seeds."""
    judged = [final["judge"] for final in finals.values() if final and "judge" in final]
    if not judged:
        return []
    phases = [key for key in judged[0] if "–" in key]  # "0–6", ...
    n = judged[0]["overall"]["n"]

    def values(key, metric):
        return [final["judge"][key][metric] if final and "judge" in final else np.nan for final in finals.values()]

    rows = [
        (f"most likely move keeps the outcome (all {n:,})", values("overall", "keeps"), ".3f", 1.0),
        ("most likely move optimal", values("overall", "optimal"), ".3f", 1.0),
        ("sampled move keeps it (probability)", values("overall", "sampled"), ".3f", 1.0),
        *((f"most likely keeps, plies {p} ({judged[0][p]['n']:,})", values(p, "keeps"), ".3f", 1.0) for p in phases),
    ]
    if all(once := [judge.get("wins_at_once") for judge in judged]):
        taken = values("wins_at_once", "share")
        rows.insert(3, (f"most likely move wins at once where it can ({once[0]['n']:,})", taken, ".3f", 1.0))
    note = (
        f"Final models judged by a perfect solver (`benchmark/connect4_judge.py`): of the {n:,} solved positions not "
        "lost for the player to move, the share where the model's most likely move keeps the outcome, where it is "
        "optimal, and the probability that a sampled move keeps it; a uniformly random legal move keeps it in "
        f"{judged[0]['overall']['uniform']:.3f}."
    )
    return [note, "", *pv.seed_table(list(finals), rows)]


def mean_band(ax, curves: list[tuple[list, list]], color: str, label: str, points: int = 200) -> None:
    """The mean over seeds of ``curves`` ((x, y) of each seed, x rising), each seed's line interpolated onto a common
    grid within its own span (a seed counts only where it has points), and a band over the seeds' range."""
    curves = [(np.asarray(x, float), np.asarray(y, float)) for x, y in curves if len(x)]
    if not curves:
        return
    grid = np.linspace(min(x[0] for x, _ in curves), max(x[-1] for x, _ in curves), points)
    ys = np.array([np.where((grid >= x[0]) & (grid <= x[-1]), np.interp(grid, x, y), np.nan) for x, y in curves])
    seen = ~np.isnan(ys).all(0)
    grid, ys = grid[seen], ys[:, seen]
    ax.plot(grid, np.nanmean(ys, 0), color=color, lw=1.2, label=label)
    if len(curves) > 1:
        ax.fill_between(grid, np.nanmin(ys, 0), np.nanmax(ys, 0), color=color, alpha=0.2, lw=0)


def main() -> None:
    args = PARSER.parse_args()
    order, targets, block, _ = WORLDS[args.env_id]
    block = args.block or block
    opponents = args.head_to_head or []
    pv.check(not opponents or args.env_id in BUNDLED, f"--head-to-head: the board games only, not {args.env_id}")
    unknown = [name for name in opponents if name != "bundled" and not (args.results / name).is_dir()]
    pv.check(not unknown, f"--head-to-head {' '.join(unknown)}: no such block in {args.results} (or `bundled`)")
    if not args.no_docs:
        pv.markers(DOC, block)

    with ThreadPoolExecutor(args.jobs) as pool:
        found = dict(zip(args.seeds, pool.map(lambda seed: kept_or_train(seed, block, args), args.seeds), strict=True))
    kept = [run for run in found.values() if run is not None]
    pv.check(bool(kept), f"no kept results in {args.results / block} for these runs; run without --from-results")
    runs = {s: run["rows"] if run else [] for s, run in found.items()}
    ratings = kept[0]["ratings"]
    # references weakest first; a reference appears in an evaluation only when it is within 10 TrueSkill points of
    # the agent (Appendix J)
    played = {k for rows in runs.values() for row in rows for k in row}
    ladder = ladder_bots(args.extra) if "bots_in_play" in played else []  # (runs kept before it was printed: none)
    played -= {"time", "cpu", "step", "mu", "load", "bots_in_play", "judge"}
    played &= set(ratings) or played  # the rated references (the summary's held-out bots are in the last row only)
    references = sorted(played, key=lambda k: order.index(k) if k in order else len(order))

    how = "one after the other" if args.jobs == 1 else f"{args.jobs} at a time, one torch thread each"
    note = (
        f" (seeds run {how}). Each evaluation plays the references within 10 TrueSkill points of the agent, so a win "
        "rate against a strong reference exists only once the agent is close to it. CPU time is the run's own (all "
        "its threads)."
    )
    rows = []
    # the times a win-rate target, then a reference's TrueSkill rating (as rated at the start), were first reached
    reached = [(f"win rate ≥ {threshold:.0%} vs `{key}`", key, threshold) for key, threshold in targets]
    # with --bot-ladder, when each training bot above the first joined the bot games' draw
    reached += [(f"`{bot}` in the ladder's bot games", "bots_in_play", n) for n, bot in enumerate(ladder[1:], 2)]
    for name, mu in sorted(ratings.items(), key=lambda item: item[1]):
        reached += [(f"TrueSkill μ ≥ `{name}`'s {mu:.2f}", "mu", mu)] if mu > 0 else []
    never = []  # reached by no seed: named under the table, not three rows of dashes
    for what, key, threshold in reached:
        reach = [pv.first_reach(runs[s], key, threshold) for s in args.seeds]
        if not any(reach):
            never.append(what)
            continue
        # on the budget's clock and in steps (wall minutes of a CPU-held run measure the seeds sharing the cores)
        clock = ("cpu", 60.0, "CPU min") if args.clock == "cpu" else ("time", 60.0, "min")
        for field, scale, unit in [clock, ("step", 1e6, "M steps")]:
            rows.append((f"first {what} ({unit})", [r.get(field, np.nan) for r in reach], ".2f", scale))
    for key in ["mu", *references]:
        values = {s: [r[key] for r in runs[s] if key in r] for s in args.seeds}  # "—": never within 10 points
        label = "TrueSkill μ" if key == "mu" else f"win rate vs `{key}`"
        rows.append((f"final {label}", [v[-1] if v else np.nan for v in values.values()], ".2f", 1.0))
        late = {s: [r[key] for r in runs[s] if key in r and r["step"] >= LATE * runs[s][-1]["step"]] for s in values}
        if any(late.values()):  # a reference more than 10 points away is not played late in a run
            late_means = [np.mean(v) if v else np.nan for v in late.values()]
            rows.append((f"mean {label}, last sixth of the steps", late_means, ".2f", 1.0))
        rows.append((f"best {label}", [max(v) if v else np.nan for v in values.values()], ".2f", 1.0))
    # Connect Four, --resumable: the judge of each checkpoint after the first sixth of the steps, its range (does the
    # share of won and drawn positions kept still rise, or stay within a band?)
    judge_after = {
        s: [r["judge"]["keeps"] for r in runs[s] if "judge" in r and r["step"] > EARLY * runs[s][-1]["step"]]
        for s in args.seeds
    }
    for label, pick in [("lowest", min), ("highest", max)]:
        if any(judge_after.values()):
            row = f"judge (most likely move keeps the outcome) at the checkpoints after the first sixth, {label}"
            rows.append((row, [pick(v) if v else np.nan for v in judge_after.values()], ".3f", 1.0))
    note += f" Runs {pv.kept_provenance(kept)}."
    note += f" The script as of `{args.script_at}`, with this tree's worlds." if args.script_at else ""
    lines = [*pv.header(PARSER, args, None, ".", note), *pv.seed_table(args.seeds, rows)]
    for label, values in [
        ("environment steps per second", [r[-1]["step"] / r[-1]["time"] if r else np.nan for r in runs.values()]),
        ("CPU minutes used", [r[-1]["cpu"] / 60 if r else np.nan for r in runs.values()]),
        (
            "mean 1-minute load average (2 = both cores busy)",
            [np.mean([x["load"] for x in r]) if r else np.nan for r in runs.values()],
        ),
    ]:
        lines.append(f"| {label} | " + " | ".join(f"{v:.0f}" if v > 10 else f"{v:.2f}" for v in values) + " | |")
    lines += ["", f"Reached by no seed: {'; '.join(never)}."] if never else []
    stopped = stopped_by_budget(found, args.extra)
    lines += ["", f"Stopped by the budget before the end, no final table: {', '.join(stopped)}."] if stopped else []
    if others := other_budget_seeds(found, args.minutes):
        lines += ["", f"Kept from a sitting under another budget, ended within this one: {', '.join(others)}."]
    if went_on := resumed_seeds(found):
        lines += ["", f"Went on from a checkpoint in a later sitting (--resumable): {', '.join(went_on)}."]
    finals = {f"seed {s}": run["final"] for s, run in found.items() if run and "final" in run}
    if finals and args.env_id in board_table.BOARD_ENV_IDS:  # every reference, held-out ones included
        lines += ["", "Final models against every reference:", "", *board_table.table(finals)]
        each_seed = {s: run.get("final") if run else None for s, run in found.items()}  # (None: no final table)
        judged, matches = judge_table(each_seed), head_to_head_table(each_seed, opponents)
        lines += ["", *judged] if judged else []
        lines += ["", *matches] if matches else []
    elif finals:
        lines += ["", "Final models against every reference:", "", *team_table(finals)]
    table = "\n".join(lines)
    print(table)
    if args.no_docs:
        return

    judged = any("judge" in r for rows in runs.values() for r in rows)  # --resumable on Connect Four: checkpoints
    fig, axes = pv.subplots(1, 3 if judged else 2, figsize=(16 if judged else 11, 4))
    x, xlabel = ("cpu", "CPU time of the run (minutes)") if args.clock == "cpu" else ("time", "wall time (minutes)")
    seeds = f"mean of {len(args.seeds)} seeds, band: their range" if len(args.seeds) > 1 else f"seed {args.seeds[0]}"
    mu = [([r[x] / 60 for r in runs[s]], [r["mu"] for r in runs[s]]) for s in args.seeds]
    mean_band(axes[0], mu, "C0", seeds)
    for k, ref in enumerate(references):  # one colour per reference: the mean over the seeds, a band over them
        rows = [[r for r in runs[s] if ref in r] for s in args.seeds]
        mean_band(axes[1], [([r[x] / 60 for r in seed], [r[ref] for r in seed]) for seed in rows], f"C{k}", f"vs {ref}")
    for ref, mu in ratings.items():  # the references' ratings, fitted at the start of each run
        axes[0].axhline(mu, ls=":", color="gray")
        axes[0].annotate(ref, (0, mu), fontsize=7, color="gray", va="bottom")
    axes[0].set(xlabel=xlabel, ylabel="TrueSkill μ (random = 0)", title=f"TrueSkill, {args.env_id}")
    axes[1].set(xlabel=xlabel, ylabel="win rate", title=f"win rate vs references ({seeds})", ylim=(0, 1))
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the curves, not over them
    if judged:  # the learning curve toward perfect play: the judge of each evaluation's checkpoint
        for k, s in enumerate(args.seeds):
            rows = [r for r in runs[s] if "judge" in r]
            cpu = [r["cpu"] / 60 for r in rows]
            axes[2].plot(cpu, [r["judge"]["keeps"] for r in rows], ".-", color=f"C{k}", label=f"seed {s}: most likely")
            axes[2].plot(cpu, [r["judge"]["sampled"] for r in rows], ":", color=f"C{k}", label=f"seed {s}: sampled")
        uniform = next(r["judge"]["uniform"] for rows in runs.values() for r in rows if "judge" in r)
        axes[2].axhline(uniform, ls="--", color="gray", label="uniform random move")
        axes[2].set(xlabel="CPU time of the run (minutes)", ylabel="share of not-lost positions kept", ylim=(0, 1))
        axes[2].set(title="move keeps the solver's outcome")
    plot = pv.ROOT / "docs" / "img" / f"ppo_lstm_selfplay_{block}_trueskill.png"
    pv.save_plot(fig, plot)
    image = f"![TrueSkill and win rates against {xlabel.split(' (')[0]}](img/{plot.name})"
    pv.write_block(DOC, block, f"{table}\n\n{image}")


if __name__ == "__main__":
    main()
