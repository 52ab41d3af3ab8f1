"""cleanfive/ppo_lstm_selfplay.py: the recipe's maths against direct computations, and tiny end-to-end runs."""

import hashlib
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from driver import drive
from golden import check_run
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from threads_at_exit import WRAPPER, assert_no_gloo_thread_left

from cleanfive.envs.evaluation import print_reference_table, robust_rung, trained_bots
from cleanfive.trueskill_league import ReferenceEvaluator

SCRIPT = Path(__file__).resolve().parents[1] / "cleanfive" / "ppo_lstm_selfplay.py"
TINY = [
    "--total-timesteps", "768", "--num-envs", "8", "--num-steps", "32", "--bptt-len", "16",
    "--num-minibatches", "2", "--update-epochs", "1", "--pool-every", "1", "--eval-every", "2",
    "--eval-games", "2", "--hidden-size", "32", "--no-cuda",
]  # fmt: skip
# the default references at the default games: their ratings ship with the package, nothing is rated; a run with
# references of its own rates them from 2 games a pair (FEW), in its own folder
FEW = ["--reference-games", "2"]
# 3 updates of 4 games, one evaluation (at the last update, 3): full games are the cost of a lane or football
# evaluation, whatever their number (the board runs evaluate at update 2 too: the chosen references, not all)
TEAM_TINY = ["--total-timesteps", "384", "--num-envs", "4", "--num-minibatches", "2", "--eval-games", "1", *FEW]
TEAM_TINY += ["--eval-every", "3"]
SMOKE = {
    "ConnectFour-v1": [],
    "TicTacToe-v1": [],
    "Moba5v5-v0": [*TEAM_TINY, "--num-heroes", "3", "--references", "random", "push"],
    # 16-step segments (192 steps in all) and one rating game: a game is 500 steps of VMAS physics
    "VmasFootball-v0": [*TEAM_TINY, "--num-heroes", "2", "--references", "random", "chase", "--reference-games", "1"]
    + ["--num-steps", "16", "--bptt-len", "8", "--total-timesteps", "192"],
}
SMOKE_BOARD = ("ConnectFour-v1", "TicTacToe-v1")
USER_ERRORS = [
    (["--env-id", "CartPole-v1"], "ConnectFour-v1"),
    (["--env-id", "NoSuchGame-v0"], "TicTacToe-v1"),
    (["--num-steps", "40"], "--bptt-len"),
    (["--references", "random"], "at least two"),
    (["--policy-lag", "-1"], "--policy-lag"),
    (["--bot-fraction", "1.5"], "--bot-fraction"),
    (["--bot-opponents", "greedy", "search9"], "unknown --bot-opponents ['search9']"),
    (["--references", "random", "greedy", "--bot-opponents", "search3"], "--bot-opponents search3: not among the"),
    (["--score-weights", "gold=1"], "ConnectFour-v1's components are win"),
    (["--score-weights", "win=much"], "name=number"),
    (["--score-weights", "win=inf"], "name=number"),
    (["--horizon-seconds", "0.5"], "--horizon-seconds"),
    (["--capture-video"], "does not render"),
]
# the same checks as test_reliability.py's test_bad_input_exits_2_with_one_line[ppo_lstm_selfplay-...] cases
# (impossible split, out of range 0 and 1, --resume and --eval-only missing file)
RELIABILITY_USER_ERRORS = [
    (["--num-minibatches", "3"], "--num-minibatches"),
    (["--learning-rate", "0"], "--learning-rate"),
    (["--gae-lambda", "1.5"], "--gae-lambda"),
    (["--resume", "no_such_checkpoint.pt"], "--resume"),
    (["--eval-only", "no_such_model.cleanfive_model"], "--eval-only"),
]
# --policy-lag K: runs of 2 updates (lag 1) and of 3 updates (lags 1 and 2), a checkpoint after every update
LAG = [*TINY, "--no-anneal-lr", "--ent-coef-final", "0.01", "--bot-fraction", "0", "--eval-every", "100"]
LAG += ["--no-random-openings"]  # (games from the empty board: in 3 updates the learner beats a past version)
LAG += ["--bot-fraction-end", "0", "--save-every", "1", "--references", "random", "greedy", *FEW]
LAG_RUNS = {(2, 1): ["--total-timesteps", "512", "--policy-lag", "1"]}
LAG_RUNS |= {(3, lag): ["--total-timesteps", "768", "--policy-lag", str(lag)] for lag in (1, 2)}
# --score-weights: the world's own weight, no override, and another weight
WEIGHTS = [*TINY, "--total-timesteps", "256", "--references", "random", "greedy", "--save-model"]
WEIGHTS += FEW
WEIGHT_RUNS = {"default": [], "same": ["--score-weights", "win=1"], "half": ["--score-weights", "win=0.5"]}
BOTS = [*TINY, "--total-timesteps", "3072", "--past-fraction", "0", "--eval-every", "100"]
BOTS += ["--references", "greedy", "lookahead", *FEW]
BOT_RUNS = {"tactical": ["--bot-fraction", "1", "--bot-fraction-end", "1"]}
# a perturbed bot, not a reference: greedy with a random opening of 42 stones (+opening42), so every move at random
BOT_RUNS |= {"random only": [*BOT_RUNS["tactical"], "--bot-opponents", "greedy+opening42"]}
BOT_RUNS |= {"rising": ["--bot-fraction", "0", "--bot-fraction-end", "1"]}  # no bot games in the first update
# evaluation draws from generators of its own: how often it runs does not change the training
EVALS = [*TINY, "--past-fraction", "0.5", "--bot-fraction", "0.5", "--save-model"]
EVAL_RUNS = {"often": ["--eval-every", "1", "--eval-games", "6"], "rarely": ["--eval-every", "100"]}
EVAL_RUNS |= {"rarely, no mirror": ["--eval-every", "100", "--no-mirror"]}  # the same rollouts, without images
# one team sequence per minibatch (8 games x 2 sides x 2 chunks = 32): some minibatches hold no active row, and the
# encoder, hero embedding and LSTM get no gradient from them (issue 39: a crash under torchrun and with per-parameter
# clipping)
EMPTY_MINIBATCH = [*TINY, "--num-minibatches", "32", "--total-timesteps", "1536", "--no-mirror"]  # (images: 2)
EMPTY_MINIBATCH += ["--eval-every", "100"]


def run(tmp_path, *flags):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    """Every run and user error of this module in one driver process (tests/driver.py), each run in a folder of its
    own: {name: (CompletedProcess, folder)}, the runs of a test named (test, ...)."""
    root = tmp_path_factory.mktemp("driven")
    smoke = ["--save-model", "--clip-grad-per-param"]
    cases = {("smoke", e): (root / e, [*TINY, "--env-id", e, *f, *smoke]) for e, f in SMOKE.items()}
    cases |= {("error", i): (root / "errors", [*TINY, *f]) for i, (f, _) in enumerate(USER_ERRORS)}
    cases |= {("lag", *k): (root / f"lag_{k[0]}_{k[1]}", [*LAG, *f]) for k, f in LAG_RUNS.items()}
    cases |= {("weights", k): (root / f"weights_{k}", [*WEIGHTS, *f]) for k, f in WEIGHT_RUNS.items()}
    cases |= {("bots", k): (root / f"bots_{k.replace(' ', '_')}", [*BOTS, *f]) for k, f in BOT_RUNS.items()}
    cases |= {("evals", k): (root / f"evals_{k.replace(', ', '_')}", [*EVALS, *f]) for k, f in EVAL_RUNS.items()}
    cases |= {("empty minibatch",): (root / "empty_minibatch", [*EMPTY_MINIBATCH, "--clip-grad-per-param"])}
    # a file from before --square-head (the bundled TicTacToe model, the key taken out) is refused, naming the
    # converter; the bundled model itself (converted) is played without the head
    bundled = torch.load(SCRIPT.parent / "models" / "tictactoe.cleanfive_model", weights_only=True)
    (root / "former").mkdir()
    del bundled["args"]["square_head"]
    torch.save(bundled, root / "former" / "before_square_head.cleanfive_model")
    for key, model in (("former", root / "former" / "before_square_head.cleanfive_model"), ("bundled", None)):
        model = model or SCRIPT.parent / "models" / "tictactoe.cleanfive_model"
        flags = ["--eval-only", str(model), "--eval-games", "1", "--references", "random", "greedy", *FEW, "--no-cuda"]
        cases |= {(key,): (root / key, flags)}
    # a checkpoint without the head, resumed as if written before the flag
    no_head = [*TINY, *FEW, "--no-square-head", "--save-every", "2", "--total-timesteps", "512"]
    cases |= {("no head",): (root / "no_head", no_head)}
    return drive(SCRIPT, cases, timeout=600)


@pytest.mark.parametrize("env_id", SMOKE)
def test_tiny_run_writes_cleanrl_metrics_and_trueskill(driven, env_id):
    result, tmp_path = driven["smoke", env_id]
    assert result.returncode == 0, result.stderr
    # the world's defaults, named first, and a flag given instead of a world's default
    bot_fraction = {"ConnectFour-v1": 0.5, "TicTacToe-v1": 0.5, "Moba5v5-v0": 0.2, "VmasFootball-v0": 0.5}[env_id]
    horizon = {"Moba5v5-v0": 100.0}.get(env_id, 10.0)
    learning_rate = 0.002 if env_id in SMOKE_BOARD else 0.001
    first_line = result.stdout.splitlines()[0]
    assert first_line.startswith(f"{env_id}: ") and f"--bot-fraction {bot_fraction}," in first_line
    num_envs = 8 if env_id in SMOKE_BOARD else 4  # TINY's, or TEAM_TINY's after it
    assert f"--horizon-seconds {horizon}," in first_line and f"--num-envs {num_envs}," in first_line
    assert f"--learning-rate {learning_rate}," in first_line
    # a board game's flag that the world cannot use is off, and the first line says so (not silently)
    off = "" if env_id in SMOKE_BOARD else f", --no-mirror (not in {env_id}), --no-square-head (not in {env_id})"
    off += "" if env_id in SMOKE_BOARD else f", --no-random-openings (not in {env_id})"
    assert first_line.endswith("}" + off), first_line
    # as flag values, not a Python tuple: the board games' rule bots and search bots up to search3 (not search4)
    board_bots = "random greedy lookahead search1 search2 search3"
    bots = {"VmasFootball-v0": "random", "Moba5v5-v0": "(every reference)"}.get(env_id, board_bots)
    assert f"--bot-opponents {bots}," in first_line
    (run_dir,) = (tmp_path / "runs").glob("*__*__*")
    assert run_dir.name.startswith(f"{env_id}__ppo_lstm_selfplay__1__")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    if env_id in ("ConnectFour-v1", "TicTacToe-v1"):  # tiny team-world runs end no game
        assert "charts/episodic_return" in tags and "charts/episodic_length" in tags
    for tag in [
        "charts/SPS",
        "charts/trueskill_mu",
        "charts/trueskill_sigma",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "league/pool_size",
        "eval/winrate_random",
        "charts/team_spirit",
        "charts/ent_coef",
    ]:
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    mu = [e.value for e in events.Scalars("charts/trueskill_mu")]
    evaluations = 2 if env_id in SMOKE_BOARD else 1  # at iteration 2 and the last (3), or the last only
    assert len(mu) == evaluations
    # the parameters and the ratings the seeded run ends with, as kept in tests/golden/runs.json
    returns = [e.value for e in events.Scalars("charts/episodic_return")] if "charts/episodic_return" in tags else []
    check_run(f"ppo_lstm_selfplay {env_id}", result.stdout, trueskill_mu=mu, episodic_return=returns)
    assert [e.value for e in events.Scalars("league/pool_size")] == [1, 2, 3]
    saved = torch.load(run_dir / "ppo_lstm_selfplay.cleanfive_model", weights_only=True)
    assert saved["args"]["env_id"] == env_id and "actor.weight" in saved["model"]
    assert saved["args"]["mirror"] == (env_id in SMOKE_BOARD)  # on by default; the team worlds have no mirror image
    assert saved["args"]["random_openings"] == (env_id in SMOKE_BOARD)  # likewise: the team worlds have no openings
    assert saved["args"]["square_head"] == (env_id in SMOKE_BOARD)  # on by default; the team worlds have no board
    # the summary: the last evaluation plays every reference and held-out bot; what the model trained against, its
    # robust rung
    references = {"Moba5v5-v0": ["random", "push"], "VmasFootball-v0": ["random", "chase"]}
    summary = result.stdout.splitlines()
    rows = [[cell.strip(" `") for cell in line.strip("|").split("|")] for line in summary if line.startswith("| `")]
    board = ["random"]  # the board games: each ladder bot, then the held-out bots on its rung (perturbed, other leaf)
    for bot in ("greedy", "lookahead", "search1", "search2", "search3"):
        board += [bot, f"{bot}+random15", f"{bot}+opening4", *([f"centre{bot[-1]}"] if bot[-1] in "23" else [])]
    assert [row[0] for row in rows] == references.get(env_id, [*board, "search4"])
    assert all(row[1] == row[0].split("+")[0].replace("centre", "search") for row in rows)  # its rung
    trained = {"VmasFootball-v0": "random", "Moba5v5-v0": "random push"}.get(env_id, board_bots)
    assert " ".join(row[0] for row in rows if row[2] == "yes") == trained  # marked in the table, and named below
    assert f"trained against: {trained}" in summary and any(line.startswith("robust rung: ") for line in summary)


@pytest.mark.parametrize("case", range(len(USER_ERRORS)), ids=[" ".join(f) for f, _ in USER_ERRORS])
def test_user_errors_exit_2_with_one_line(driven, case):
    result, _ = driven["error", case]
    assert result.returncode == 2, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and USER_ERRORS[case][1] in lines[0] and "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("flags", "says"), RELIABILITY_USER_ERRORS)
def test_user_errors_that_test_reliability_checks_exit_2_with_one_line(tmp_path, flags, says):
    """Covered in the default run by test_reliability.py::test_bad_input_exits_2_with_one_line[ppo_lstm_selfplay-*]."""
    result = run(tmp_path, *TINY, *flags)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.stderr


def test_policy_lag_acts_with_the_version_k_updates_old(driven):
    """--policy-lag K: the checkpoint keeps the models of the last K + 1 updates, bit-equal to those of shorter runs
    (no schedule depends on the run's length, so a shorter run is a prefix of a longer one), and update 3 acts with
    version 3 - K: lags 1 and 2 agree through update 2 (both act with version 0) and differ after update 3."""

    def checkpoint(updates, lag):
        result, tmp_path = driven["lag", updates, lag]
        assert result.returncode == 0, result.stderr
        (path,) = (tmp_path / "runs").glob("*/checkpoint.pt")
        return torch.load(path, weights_only=True)

    def equal(a, b):
        return all(torch.equal(a[k], b[k]) for k in a)

    two, lag1, lag2 = checkpoint(2, 1), checkpoint(3, 1), checkpoint(3, 2)
    assert [len(c["versions"]) for c in (two, lag1, lag2)] == [2, 2, 3]
    assert all(equal(c["versions"][-1], c["model"]) for c in (two, lag1, lag2))
    # versions 2 and 1: runs with lags 1 and 2 agree through update 2, which acts with version 0 in both
    assert equal(lag1["versions"][0], two["model"]) and equal(lag2["versions"][1], two["model"])
    assert equal(lag2["versions"][0], two["versions"][0])
    assert not equal(lag1["model"], lag2["model"])  # update 3 acted with version 1 (lag 1) or version 0 (lag 2)
    # the pool's quality scores after its games against past versions (a win lowers the beaten version's quality,
    # Appendix H), and the parameters, as kept for this machine class (tests/golden/runs.json)
    qualities = lag1["pool"]["qualities"]
    assert any(q != 0 for q in qualities), "no past version was beaten: the quality update went unchecked"
    check_run("ppo_lstm_selfplay ConnectFour-v1 --policy-lag 1", driven["lag", 3, 1][0].stdout, qualities=qualities)


def test_bot_fraction_plays_games_against_the_reference_bots(driven):
    """--bot-fraction 1 --past-fraction 0: every game after the first ones faces a reference bot, logged under
    league/winrate_vs_bots. Against greedy and lookahead (which take a winning move and block one) an untrained
    learner wins few games; had the learner driven both sides, it would win about half (it plays either side).
    With --bot-opponents greedy+opening42 (greedy perturbed: random moves while the board holds fewer than 42
    stones, so every move), its bot games are against random play, of which it wins about half."""

    tactical, random_only = bot_game_rates(driven, "tactical"), bot_game_rates(driven, "random only")
    # BOTS' --references greedy lookahead: the default bot games' other bots are left out, and the first line says so
    first_line = driven["bots", "tactical"][0].stdout.splitlines()[0]
    assert "--bot-opponents greedy lookahead," in first_line, first_line
    assert first_line.endswith(", --bot-opponents without random search1 search2 search3 (not among the references)")
    assert "--bot-opponents greedy+opening42," in driven["bots", "random only"][0].stdout.splitlines()[0]
    assert len(tactical) >= 8 and np.mean([e.value for e in tactical]) < 0.25, [e.value for e in tactical]
    assert len(random_only) >= 8 and np.mean([e.value for e in random_only]) > 0.3, [e.value for e in random_only]


def test_bot_share_anneals_from_bot_fraction_to_bot_fraction_end(driven):
    """--bot-fraction 0 --bot-fraction-end 1: no game of the first update is against a bot; the share then rises
    (update k of 12 starts its new games against a bot with probability (k - 1) / 12), so bot games end later on."""
    rising = bot_game_rates(driven, "rising")
    first_update = 8 * 32  # TINY: 8 games x 32 steps
    assert len(rising) >= 3 and min(e.step for e in rising) > first_update, [e.step for e in rising]


def bot_game_rates(driven, name):
    """The league/winrate_vs_bots events of BOT_RUNS[name] (one per update in which games against bots ended)."""
    result, tmp_path = driven["bots", name]
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "runs").glob("*__*__*")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    assert "league/winrate_vs_past" not in events.Tags()["scalars"]
    return list(events.Scalars("league/winrate_vs_bots"))


def test_score_weights_override_the_worlds_weights(driven):
    """--score-weights win=1 (Connect Four's default) trains bit-identically to no override; win=0.5 does not."""

    def model(name):
        result, tmp_path = driven["weights", name]
        assert result.returncode == 0, result.stderr
        (path,) = (tmp_path / "runs").glob("*/ppo_lstm_selfplay.cleanfive_model")
        return torch.load(path, weights_only=True)["model"]

    default, same, half = model("default"), model("same"), model("half")
    assert all(torch.equal(default[k], same[k]) for k in default)
    assert not all(torch.equal(default[k], half[k]) for k in default)


def test_evaluation_settings_do_not_change_training(driven):
    often, rarely = driven["evals", "often"][0], driven["evals", "rarely"][0]
    assert often.returncode == 0 and rarely.returncode == 0, often.stderr + rarely.stderr
    assert often.stdout.count("eval time=") == 3 and rarely.stdout.count("eval time=") == 1
    assert often.stdout.splitlines()[-1] == rarely.stdout.splitlines()[-1]  # params_sha256=...
    # the default clipping path (the smoke runs clip per parameter), against tests/golden/runs.json
    check_run("ppo_lstm_selfplay ConnectFour-v1 bot and past games", rarely.stdout)


def test_mirror_trains_on_the_images_too(driven):
    """--mirror (the board games' default): the same rollouts' first update already differs from --no-mirror's, so
    the final parameters do (the flag is live)."""
    mirror, plain = driven["evals", "rarely"][0], driven["evals", "rarely, no mirror"][0]
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert plain.stdout.splitlines()[-1].startswith("params_sha256=")
    assert plain.stdout.splitlines()[-1] != mirror.stdout.splitlines()[-1]


def torchrun(cwd, *flags):
    cwd.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [WRAPPER, str(SCRIPT)]  # (it prints the threads left at exit)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*command, *flags], cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_minibatch_without_active_rows_clips_per_parameter_without_crashing(driven):
    result, _ = driven["empty minibatch",]
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1].startswith("params_sha256=")


# 3 updates of 2 processes x 8 games, one team sequence per minibatch, so that some minibatches reach no encoder
# (their zero gradients go into the all-reduce: issue 39's crash)
TORCHRUN = [*EMPTY_MINIBATCH, "--past-fraction", "0.5", "--save-every", "1", "--eval-every", "2"]


def test_torchrun_two_processes_even_with_minibatches_without_active_rows(tmp_path):
    """Two processes train, rank 0 evaluates and logs, rank 1 logs its own games; a resume needs as many processes.
    (That two launches repeat bit for bit is a slow test: each launch is three interpreters.)"""
    first = torchrun(tmp_path / "a", *TORCHRUN)
    assert first.returncode == 0, first.stderr[-3000:]
    assert len([x for x in first.stdout.splitlines() if x.startswith("params_sha256=")]) == 1  # printed by rank 0
    assert first.stdout.count("eval time=") == 2  # rank 0 evaluates, at update 2 and at the last
    assert_no_gloo_thread_left(first.stderr)
    (run_dir,) = (tmp_path / "a" / "runs").glob("*__*__*")
    assert (run_dir / "rank1").is_dir()  # rank 1's own games are logged beside rank 0's
    # the observation statistics count both processes' rows: more than one process can see (one mover a game a step)
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    given = dict(zip(TORCHRUN, TORCHRUN[1:], strict=False))  # each flag's last value, as the parser takes it
    one_process = saved["iteration"] * int(given["--num-envs"]) * int(given["--num-steps"])
    assert one_process < saved["model"]["obs_count"] <= 2 * one_process + 1
    resumed = run(tmp_path / "a", "--resume", str(run_dir / "checkpoint.pt"))
    assert resumed.returncode == 2 and "resume with as many processes as the run had (2)" in resumed.stderr


@pytest.mark.slow
def test_torchrun_two_launches_repeat_bit_for_bit(tmp_path):
    first, second = torchrun(tmp_path / "a", *TORCHRUN), torchrun(tmp_path / "b", *TORCHRUN)
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-3000:] + second.stderr[-3000:]
    hashes = [[x for x in r.stdout.splitlines() if x.startswith("params_sha256=")] for r in (first, second)]
    assert len(hashes[0]) == 1 and hashes[0] == hashes[1]


# ---------------------------------------------------------------------------------------------------------------------
# the recipe's maths, against direct per-hero computations


def load_script(name="ppo_lstm_selfplay"):
    spec = importlib.util.spec_from_file_location(name, SCRIPT.with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# five_surgery.py carries its own copy of the recipe's maths (one script is one algorithm): every maths test below
# runs against both files, so the copies cannot drift apart; a test of what only the self-play script has uses
# `selfplay`
FIVE = ("ppo_lstm_selfplay", "five_surgery")


@pytest.fixture(scope="module", params=FIVE)
def script(request):
    return load_script(request.param)


@pytest.fixture(scope="module")
def selfplay():
    return load_script()


def direct_rewards(scores, weights, is_win, time, tau, zero_sum, decay_base, decay_seconds):
    """Appendix G one hero at a time: weights, zero-sum, team spirit, then time decay of all but the win."""
    E, S, N, C = scores.shape
    out = np.zeros((E, S, N))
    for e in range(E):
        parts = []
        for win_part in (True, False):
            raw = np.array([[sum(weights[c] * scores[e, s, i, c] for c in range(C) if is_win[c] == win_part)
                             for i in range(N)] for s in range(S)])  # fmt: skip
            zs = np.array([[raw[s, i] - (raw[1 - s].mean() if zero_sum else 0.0) for i in range(N)] for s in range(S)])
            parts.append(np.array([[(1 - tau) * zs[s, i] + tau * zs[s].mean() for i in range(N)] for s in range(S)]))
        out[e] = parts[0] + decay_base ** (time[e] / decay_seconds) * parts[1]
    return out


@pytest.mark.parametrize("tau", [0.0, 0.3, 1.0])
def test_shape_rewards_matches_direct_computation(script, tau):
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(4, 2, 3, 5)).astype(np.float32)
    weights = rng.uniform(0.1, 2.0, size=5).astype(np.float32)
    is_win = np.array([True, False, False, False, False])
    time = np.array([0.0, 50.0, 100.0, 400.0])
    args = SimpleNamespace(time_decay=0.6, time_decay_seconds=100.0)
    got = script.shape_rewards(scores, weights, is_win, time, tau, args)
    want = direct_rewards(scores, weights, is_win, time, tau, True, 0.6, 100.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum((1, 2)), 0.0, atol=1e-5)  # zero-sum: both teams' rewards add up to 0 in a game
    # the win is never decayed: a win-only score keeps its full weight at any time
    win_only = np.zeros_like(scores)
    win_only[:, 0, :, 0] = 1.0
    late = script.shape_rewards(win_only, weights, is_win, np.full(4, 1e4), tau, args)
    np.testing.assert_allclose(late, script.shape_rewards(win_only, weights, is_win, np.zeros(4), tau, args))


def test_update_moments_equals_mean_and_variance_of_all_rows(script):
    rng = np.random.default_rng(1)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (5, 17, 1, 0, 40)]  # 0: a rollout without a decision
    mean, var, count = torch.zeros(4, dtype=torch.float64), torch.ones(4, dtype=torch.float64), torch.tensor(1e-12)
    for batch in batches:
        mean, var, count = script.update_moments(mean, var, count, torch.as_tensor(batch))
        assert torch.isfinite(mean).all() and torch.isfinite(var).all()
    rows = np.concatenate(batches)
    np.testing.assert_allclose(mean.numpy(), rows.mean(0), rtol=1e-9)
    np.testing.assert_allclose(var.numpy(), rows.var(0), rtol=1e-6)


def new_agent(script, obs_size, **kwargs):
    """The script's Agent (the self-play script takes an observation shape, the surgery script a width)."""
    return script.Agent((obs_size,) if hasattr(script.Agent, "square_logits") else obs_size, **kwargs)


def embed(agent, x):
    """The features the LSTM takes in (the self-play script also returns its square head's logits)."""
    out = agent.embed(x)
    return out[0] if isinstance(out, tuple) else out


def get_states(agent, x, state, done, active):
    """The LSTM's outputs and states (the self-play script also returns its square head's logits)."""
    return agent.get_states(x, state, done, active)[:2]


def test_sampling_from_a_diverged_network_does_not_crash_and_the_fault_stop_is_one_line(script, capsys):
    """Finite weights whose logits overflow float32: sampling still returns legal actions (from
    torch.nan_to_num(logits)) instead of torch's traceback about the probabilities, so that the once-per-update finite
    check stops the run with its one line and exit code 1; a healthy network samples as before."""
    torch.manual_seed(0)
    N, obs_size = 1, 6
    agent = new_agent(script, obs_size, num_actions=4, num_heroes=N, hidden_size=16)
    state = (torch.zeros(1, 2 * N, 16), torch.zeros(1, 2 * N, 16))
    x, done, mask = torch.randn(2 * N, obs_size), torch.zeros(2 * N), torch.ones(2 * N, 4, dtype=torch.bool)
    active = torch.ones(2 * N, dtype=torch.bool)
    agent.get_action_and_value(x, state, done, active, mask)
    with torch.no_grad():  # finite weights aligned with the first hero's features: its logits sum to inf
        hidden, _ = get_states(agent, x, state, done, active)
        agent.actor.weight.copy_(3e38 * hidden[0].sign().expand_as(agent.actor.weight))
        assert not agent.actor(hidden).isfinite().all()  # what the finite check after each update reads
    mask[:, 0] = False
    action, _, _, _, _ = agent.get_action_and_value(x, state, done, active, mask)
    assert 1 <= action[0] < 4  # the first hero's logits are +inf: it samples among its legal actions
    with pytest.raises(SystemExit) as stop:
        script.fault_stop(7, "runs/r/checkpoint.pt")
    assert stop.value.code == 1
    assert capsys.readouterr().err == (
        "error: non-finite loss or parameters at update 7; stopped. Last good checkpoint: runs/r/checkpoint.pt\n"
    )


def test_cross_hero_max_pool_mixes_heroes_of_a_team_only(script):
    torch.manual_seed(0)
    N, obs_size = 3, 6
    agent = new_agent(script, obs_size, num_actions=4, num_heroes=N, hidden_size=16)
    x = torch.randn(2 * N, obs_size)  # two teams of three heroes, heroes of a team in consecutive rows
    base = embed(agent, x)
    changed = x.clone()
    changed[1] += 10.0  # hero 1 of team 0 sees something else
    after = embed(agent, changed)
    pool = agent.pool_size
    assert not torch.allclose(after[0, -pool:], base[0, -pool:])  # its teammates' pooled features move
    torch.testing.assert_close(after[0, :-pool], base[0, :-pool])  # their own features do not
    torch.testing.assert_close(after[N:], base[N:])  # the other team is untouched
    # the hero-id input: the same observation in two hero slots gives different features
    same = torch.zeros(N, obs_size)
    features = embed(agent, same)
    assert not torch.allclose(features[0, :-pool], features[1, :-pool])


def one_step_at_a_time(script, agent, x, state, done, active):
    """The LSTM over every hero, one step at a time (the script's masked_lstm, padded_lstm's readable reference): a
    hero whose team waits keeps its state and outputs zeros."""
    hidden = embed(agent, x).reshape(done.shape + (-1,))
    out, state = script.masked_lstm(agent.lstm, hidden, done, active, state)
    return out.flatten(0, 1), state


@pytest.mark.parametrize(
    ("T", "waiting", "ends"),
    [(12, 0.0, 0.15), (12, 0.5, 0.15), (12, 0.9, 0.15), (12, 1.0, 0.15), (2, 0.5, 0.7)]
    + [(1, 0.0, 0.5), (1, 0.5, 0.5), (1, 1.0, 0.5)],
)
def test_lstm_over_whole_stretches_and_active_teams_equals_one_step_at_a_time(script, T, waiting, ends):
    """get_states runs one step (T = 1) on the acting heroes; training sequences (T > 1) over stretches of steps
    without a reset in one call where every team acts, otherwise over each hero's active steps between game ends
    as one padded call. Each must equal one step at a time over everyone, where a waiting hero's state carries
    over, in outputs and gradients, and after a step in the state (after training sequences it gives None)."""
    torch.manual_seed(0)
    teams, N, obs_size = 6, 2, 5
    agent = new_agent(script, obs_size, num_actions=3, num_heroes=N, hidden_size=16)
    x = torch.randn(T * teams * N, obs_size)
    state = (torch.randn(1, teams * N, 16), torch.randn(1, teams * N, 16))
    done = (torch.rand(T, teams) < ends).float().repeat_interleave(N, 1)
    active = (torch.rand(T, teams) >= waiting).repeat_interleave(N, 1)  # whole teams act or wait
    active[: min(4, T - 1)] = waiting < 1.0  # a stretch with every team active (none at all where waiting is 1)
    got, got_state = get_states(agent, x, state, done.flatten(), active.flatten())
    want, want_state = one_step_at_a_time(script, agent, x, state, done, active)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if T == 1:
        torch.testing.assert_close(got_state, want_state, rtol=1e-5, atol=1e-5)
    else:
        assert got_state is None
    if waiting < 1.0:  # (with no hero active, nothing depends on the weights)
        weights = torch.randn_like(got)
        grads = [torch.autograd.grad((y * weights).sum(), agent.lstm.weight_hh_l0)[0] for y in (got, want)]
        torch.testing.assert_close(grads[0], grads[1], rtol=1e-4, atol=1e-5)


def test_padded_lstm_does_what_its_docstring_example_says(script):
    """padded_lstm's worked example: two heroes, four steps; three sequences, each from the state its docstring
    names."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(3, 4)
    done = torch.zeros(4, 2)
    done[2, 0] = done[3, 1] = 1
    t, b = torch.tensor([0, 1, 3, 1, 2]), torch.tensor([0, 0, 0, 1, 1])
    hidden, state = torch.randn(5, 3), (torch.randn(1, 2, 4), torch.randn(1, 2, 4))
    out = script.padded_lstm(lstm, hidden, t, b, done, state)
    zero = (torch.zeros(1, 1, 4), torch.zeros(1, 1, 4))
    first, _ = lstm(hidden[:2, None], tuple(s[:, :1] for s in state))  # hero 0, steps 0-1: its carried state
    second, _ = lstm(hidden[2:3, None], zero)  # hero 0, step 3: zero, a game ended before it
    third, _ = lstm(hidden[3:, None], tuple(s[:, 1:] for s in state))  # hero 1, steps 1-2: its carried state
    torch.testing.assert_close(out, torch.cat([first, second, third])[:, 0])


def direct_semi_mdp_advantages(rewards, values, dones, active, next_value, next_done, gamma, lam):
    """GAE decision by decision: from each active step t to the hero's next active step u (or the bootstrap after
    the rollout), R = the rewards discounted per step, cut where a game ends; delta = R + gamma^(u - t) V(u) - V(t);
    A(t) = delta + (gamma^(u - t) lambda) A(u)."""
    T, P = rewards.shape
    dones = np.concatenate([dones, next_done[None]])
    value = np.concatenate([values, next_value[None]])
    advantages = np.zeros((T, P))
    for p in range(P):
        for t in reversed(np.flatnonzero(active[:, p])):
            total, u, ended = 0.0, t, False
            while True:
                total += gamma ** (u - t) * rewards[u, p]
                u += 1
                ended = bool(dones[u, p])
                if ended or u == T or active[u, p]:
                    break
            advantages[t, p] = total - values[t, p]
            if not ended:
                advantages[t, p] += gamma ** (u - t) * (value[u, p] + (lam * advantages[u, p] if u < T else 0.0))
    return advantages


def test_flatten_batch_orders_rows_step_by_step_and_appends_the_mirror_images(script):
    """flatten_batch: row t * P + p holds step t of row p, as CleanRL's b_ tensors; with a mirror, the rows' images
    follow, [copy][step][row]: obs, masks and actions as the mirror gives them, every other tensor repeated (the
    old log-probability too: the probability the image's move was drawn with; research-log-board.md, 24482c5)."""
    T, P, A, K = 4, 3, 5, 2  # K: the LSTM chunks (T / bptt_len)
    gen = torch.Generator().manual_seed(0)
    rollout = dict(obs=torch.rand(T, P, 2, 3, generator=gen), masks=torch.rand(T, P, A, generator=gen) > 0.5)
    rollout |= dict(actions=torch.randint(A, (T, P), generator=gen), advantages=torch.rand(T, P, generator=gen))
    rollout |= dict(logprobs=torch.rand(T, P, generator=gen).log(), h=torch.rand(K, P, 6, generator=gen))

    images = {"obs": lambda v: -v, "masks": lambda v: ~v, "actions": lambda v: v + 100}  # a stand-in's, marked

    def mirror(obs, masks, actions):
        return images["obs"](obs), images["masks"](masks), images["actions"](actions)

    plain, both = script.flatten_batch(rollout), script.flatten_batch(rollout, mirror)
    for key, x in rollout.items():
        rows = len(x) * P
        assert plain[key].shape == (rows, *x.shape[2:]) and both[key].shape == (2 * rows, *x.shape[2:])
        for t, p in itertools.product(range(len(x)), range(P)):
            assert torch.equal(plain[key][t * P + p], x[t, p]) and torch.equal(both[key][t * P + p], x[t, p])
            image = images[key](x[t, p]) if key in images else x[t, p]
            assert torch.equal(both[key][rows + t * P + p], image), key


def test_gae_with_waiting_steps_discounts_lambda_per_decision(script):
    rng = np.random.default_rng(3)
    T, P, gamma, lam = 20, 6, 0.97, 0.9
    rewards, values = rng.normal(size=(T, P)), rng.normal(size=(T, P))
    dones = (rng.random((T, P)) < 0.1).astype(float)
    active = rng.random((T, P)) < 0.6
    next_value, next_done = rng.normal(size=P), (rng.random(P) < 0.2).astype(float)
    tensors = [torch.as_tensor(a) for a in (rewards, values, dones, active, next_value[None], next_done)]
    nobody = torch.zeros(P, dtype=torch.bool)  # no hero left out
    advantages, filled = script.gae(*tensors, nobody, gamma, lam)
    want = direct_semi_mdp_advantages(rewards, values, dones, active, next_value, next_done, gamma, lam)
    np.testing.assert_allclose(advantages.numpy()[active], want[active], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(filled.numpy()[active], values[active])  # the decisions keep their values
    all_active = script.gae(*tensors[:3], torch.ones(T, P, dtype=torch.bool), *tensors[4:], nobody, gamma, lam)[0]
    everyone = np.ones((T, P), dtype=bool)
    want_plain = direct_semi_mdp_advantages(rewards, values, dones, everyone, next_value, next_done, gamma, lam)
    np.testing.assert_allclose(all_active.numpy(), want_plain, rtol=1e-6, atol=1e-6)  # plain GAE when all decide


def test_gae_gives_the_docstrings_example(script):
    """gae's docstring: a hero that decides at steps 0 and 2 and waits at step 1 makes one decision of two steps."""
    gamma, lam, left_out = 0.9, 0.8, torch.zeros(1, dtype=torch.bool)
    rewards, values = torch.tensor([[0.1], [0.2], [0.3]]), torch.tensor([[0.5], [-0.4], [0.7]])
    active, next_value = torch.tensor([[True], [False], [True]]), torch.tensor([[0.6]])
    advantages, filled = script.gae(
        rewards, values, torch.zeros(3, 1), active, next_value, torch.zeros(1), left_out, gamma, lam
    )
    a2 = 0.3 + gamma * 0.6 - 0.7  # the last decision: plain TD error
    assert filled[1, 0].item() == pytest.approx(0.2 + gamma * 0.7)  # V(1) = r(1) + gamma V(2)
    want = 0.1 + gamma * 0.2 + gamma**2 * 0.7 - 0.5 + gamma**2 * lam * a2
    assert advantages[0, 0].item() == pytest.approx(want, rel=1e-6)


@pytest.mark.slow
def test_torchrun_lane_run_killed_and_resumed_ends_bit_identical(tmp_path):
    """Two processes on the lane world (which saves its games): SIGKILL every process after the checkpoint of update
    2, resume with torchrun, and the final parameters equal those of a run that was never interrupted."""
    flags = ["--env-id", "Moba5v5-v0", "--num-heroes", "3", "--num-envs", "4", "--num-steps", "32", "--bptt-len"]
    flags += ["16", "--num-minibatches", "2", "--update-epochs", "1", "--pool-every", "1", "--eval-every", "100"]
    flags += ["--eval-games", "1", "--reference-games", "2", "--references", "random", "push", "--hidden-size", "16"]
    flags += ["--total-timesteps", "1536", "--save-every", "1", "--past-fraction", "0.5"]
    whole = torchrun(tmp_path / "whole", *flags)
    assert whole.returncode == 0, whole.stderr[-3000:]
    killed = tmp_path / "killed"
    killed.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(SCRIPT)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    proc = subprocess.Popen([*command, *flags], cwd=killed, env=env, **quiet)
    deadline = time.time() + 300
    while time.time() < deadline and proc.poll() is None:
        paths = list(killed.glob("runs/*/checkpoint.pt"))
        try:
            if paths and torch.load(paths[0], weights_only=True)["iteration"] >= 2:
                break
        except Exception:  # noqa: BLE001 (a checkpoint being replaced)
            pass
        time.sleep(0.1)
    for pid in filter(str.isdigit, os.listdir("/proc")):  # torchrun and both of its workers
        try:
            if os.readlink(f"/proc/{pid}/cwd") == str(killed):
                os.kill(int(pid), signal.SIGKILL)
        except OSError:
            pass
    proc.wait()
    (path,) = killed.glob("runs/*/checkpoint.pt")
    assert torch.load(path, weights_only=True)["iteration"] < 12  # killed before the end
    resumed = torchrun(killed, "--resume", str(path))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.splitlines()[-1] == whole.stdout.splitlines()[-1]  # params_sha256=...


def test_gae_leaves_out_the_last_decision_of_a_hero_that_waits_at_the_end(script):
    """A hero that decided at the last step and waits at the rollout's end (a board game's side that just moved):
    its earlier decisions get the semi-MDP advantages of a rollout cut after its last decision, bootstrapped from its
    value there, and nothing depends on the value at its waiting state after the rollout (issue 40)."""
    rng = np.random.default_rng(5)
    T, P, gamma, lam = 24, 8, 0.9, 0.95
    rewards, values = rng.normal(size=(T, P)), rng.normal(size=(T, P))
    dones = (rng.random((T, P)) < 0.08).astype(float)
    active = np.zeros((T, P), dtype=bool)
    active[np.arange(T)[:, None] % 2 == np.arange(P) % 2] = True  # two sides taking turns, as on a board
    active &= rng.random((T, P)) < 0.9  # and a few steps on which nobody acts (a game's last board)
    next_done = (rng.random(P) < 0.2).astype(float)
    left_out = torch.as_tensor(active[-1])  # every hero that moved last waits after the rollout
    advantages, drawn = {}, rng.normal(size=P)
    for name, scale in (("a", 1.0), ("b", 100.0)):  # the waiting heroes' values after the rollout change, not the rest
        next_value = drawn * np.where(active[-1], scale, 1.0)
        tensors = [torch.as_tensor(a) for a in (rewards, values, dones, active, next_value[None], next_done)]
        advantages[name], filled = script.gae(*tensors, left_out, gamma, lam)
    torch.testing.assert_close(advantages["a"], advantages["b"])
    want = direct_semi_mdp_advantages(rewards, values, dones, active, next_value, next_done, gamma, lam)
    cut = direct_semi_mdp_advantages(
        rewards[:-1], values[:-1], dones[:-1], active[:-1], values[-1], dones[-1], gamma, lam
    )
    want[:-1, active[-1]] = cut[:, active[-1]]  # the heroes left out: the rollout ends at their last decision
    want[-1, active[-1]] = 0.0  # whose advantage is not computed (weight 0 in the losses)
    np.testing.assert_allclose(advantages["a"].numpy()[active], want[active], rtol=1e-6, atol=1e-6)
    assert active[-1].any() and (~active[-1]).any()


def test_matchmaking_draws_past_versions_and_bots_in_their_shares():
    """--past-fraction 0.2 --bot-fraction 0.5: once the pool holds a version, a new game is against it with
    probability 0.2 and against a bot with 0.5 x 0.8 = 0.4; before it holds one, against a bot with 0.5 (no game is
    drawn as 'past', issue 39). The learner takes either side; its rows and the opponent's split every such game."""
    from cleanfive.envs import matchmaking as script  # (shared by both Five scripts)
    from cleanfive.trueskill_league import OpponentPool

    E, S, N, rng = 20_000, 2, 3, np.random.default_rng(0)
    matchmaking = script.Matchmaking(E, S, N, ("greedy",), past_fraction=0.2, bot_games=True)
    pool, games = OpponentPool(), np.arange(E)
    shares = {}
    for pool_size in (0, 1):
        if pool_size:
            pool.add("v1")
        matchmaking.new_games(games, pool, 0.5, rng)
        shares[pool_size] = {kind: (matchmaking.kind == kind).mean() for kind in (script.PAST, script.BOT)}
    assert shares[0][script.PAST] == 0 and abs(shares[0][script.BOT] - 0.5) < 0.02, shares
    assert abs(shares[1][script.PAST] - 0.2) < 0.02 and abs(shares[1][script.BOT] - 0.4) < 0.02, shares
    assert set(matchmaking.index[matchmaking.kind == script.BOT]) == {0} and matchmaking.bots == ("greedy",)
    against = matchmaking.kind != script.LATEST
    assert abs(matchmaking.learner_side[against].mean() - 0.5) < 0.02
    learner = matchmaking.learner_rows().reshape(E, S * N)
    assert learner[~against].all() and (learner[against].sum(1) == N).all()
    opponent = np.zeros(E * S * N, dtype=bool)
    opponent[matchmaking.opponent_rows(np.flatnonzero(against))] = True
    assert (opponent.reshape(E, S * N)[against] == ~learner[against]).all() and not opponent.reshape(E, -1)[
        ~against
    ].any()
    assert (matchmaking.learner_side[~against] == 0).all()  # 0 in a game of the latest policy against itself


def test_saved_files_hold_plain_data_that_round_trips(script, tmp_path):
    """to_plain and its inverse (the RUN MANAGEMENT block of every script): NumPy arrays of every dtype the worlds keep,
    the generators' states and nested containers come back equal, with their types; the file loads with
    weights_only=True."""
    tree = {
        "arrays": {"f32": np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1], "b": np.array([True, False])},
        "ints": (np.arange(3, dtype=np.int64), np.zeros((0, 2), dtype=np.uint8), np.array(7, dtype=np.int32)),
        "rng": script.rng_states(),
        "generator": np.random.default_rng(3).bit_generator.state,
        "tensor": torch.arange(3),
        "values": [1, 2.5, "x", None, np.float64(0.5), np.bool_(True)],
    }
    path = tmp_path / "f.pt"
    torch.save(script.to_plain(tree), path)
    back = script.to_plain(torch.load(path, weights_only=True), inverse=True)

    def same(a, b):
        if isinstance(a, np.ndarray):
            return type(b) is np.ndarray and a.dtype == b.dtype and np.array_equal(a, b)
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and torch.equal(a, b)
        if isinstance(a, dict):
            return type(b) is type(a) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        if isinstance(a, list | tuple):
            return type(b) is type(a) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
        return a == b and (not isinstance(a, np.generic) or type(b) is type(a.item()))

    assert same(tree, back)
    np.random.set_state(back["rng"]["numpy"])  # the generators take their states back
    np.random.default_rng().bit_generator.state = back["generator"]


def test_a_file_written_before_plain_data_is_refused_then_converted(selfplay, driven, tmp_path, capsys):
    """A checkpoint as scripts wrote it before 2026-11-27 (NumPy arrays pickled): one line that names the converter,
    exit 2; cleanfive/convert_saved.py turns it into the plain file the selfplay writes today, which then loads."""
    result, folder = driven["lag", 2, 1]
    assert result.returncode == 0, result.stderr
    (new,) = (folder / "runs").glob("*/checkpoint.pt")
    today = selfplay.to_plain(torch.load(new, weights_only=True), inverse=True)
    old = tmp_path / "checkpoint.pt"
    torch.save({**today, "selfplay": "ppo_lstm_selfplay.py"}, old)  # NumPy arrays pickled as such
    with pytest.raises(SystemExit) as exit_info:
        selfplay.load_saved(str(old), "--resume", selfplay.CHECKPOINT_KEYS)
    assert exit_info.value.code == 2 and "convert_saved.py" in capsys.readouterr().err
    converter, before = SCRIPT.with_name("convert_saved.py"), hashlib.sha256(old.read_bytes()).hexdigest()
    converted = subprocess.run([sys.executable, str(converter), str(old)], capture_output=True, text=True, timeout=120)
    assert converted.returncode == 0, converted.stderr
    assert torch.equal(torch.load(old, weights_only=True)["model"]["actor.weight"], today["model"]["actor.weight"])
    assert torch.load(old, weights_only=True)["converted_from"] == [before]  # the file it was, by its digest
    assert (tmp_path / "checkpoint.pt.old").exists()
    loaded = selfplay.load_saved(str(old), "--resume", selfplay.CHECKPOINT_KEYS)
    local, want = loaded["ranks"][0], today["ranks"][0]
    assert np.array_equal(local["rng"]["numpy"][1], want["rng"]["numpy"][1])  # the legacy NumPy state's key array


ROBUST_MUS = {"random": 0.0, "greedy": 9.7, "lookahead": 16.1, "search1": 19.4}  # win rates below in this order
ROBUST_HELD_OUT = {"greedy+random15": "greedy"}  # and last, against a held-out bot on greedy's rung


@pytest.mark.parametrize(
    "wins, trained, rung",
    [
        ((0.9, 0.7, 0.4, 0.6, 0.8), (), "greedy (worst win rate up to it: 0.700 vs greedy)"),
        # a reference it trained against does not count: search1 beaten, lookahead (untrained) lost
        ((0.9, 0.8, 0.3, 0.9, 0.85), ("search1",), "greedy (worst win rate up to it: 0.800 vs greedy)"),
        # a trained one lost does not count, its held-out bot does; the worst of those held is named, not the last
        ((0.55, 0.2, 0.6, 0.3, 0.9), ("greedy",), "lookahead (worst win rate up to it: 0.550 vs random)"),
        # a trained one beaten does not hold its rung where its held-out bot is lost
        ((0.9, 0.9, 0.9, 0.9, 0.3), ("greedy",), "random (worst win rate up to it: 0.900 vs random)"),
        # a rung of trained bots only is passed over, even where the model lost to them
        ((0.3, 0.95, 0.9, 0.92, 0.93), ("random",), "search1 (worst win rate up to it: 0.900 vs lookahead)"),
        ((0.49, 0.9, 0.9, 0.9, 0.9), (), "none"),
    ],
)
def test_robust_rung_is_the_strongest_reference_up_to_which_every_untrained_bot_is_won(capsys, wins, trained, rung):
    import trueskill

    evaluator = ReferenceEvaluator({k: trueskill.Rating(mu, 1.0) for k, mu in ROBUST_MUS.items()})
    names = [*ROBUST_MUS, *ROBUST_HELD_OUT]
    results = {name: (win, 0.0, 1.0 - win) for name, win in reversed(list(zip(names, wins, strict=True)))}
    print_reference_table(results, evaluator, 64, trained, ROBUST_HELD_OUT)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("| bot | rung | trained against |")
    rows = [[cell.strip(" `") for cell in line.strip("|").split("|")] for line in out if line.startswith("| `")]
    # by TrueSkill, the held-out bot under its rung, unrated; the bots it trained against marked
    assert [row[:2] for row in rows] == [[k, k] for k in ROBUST_MUS][:2] + [["greedy+random15", "greedy"]] + [
        [k, k] for k in list(ROBUST_MUS)[2:]
    ]
    assert [row[0] for row in rows if row[2] == "yes"] == [k for k in names if k in trained]
    assert rows[2][3] == "held out" and rows[1][3] == "9.70"
    assert f"robust rung: {rung}" in out and f"trained against: {' '.join(trained) or 'no bot'}" in out
    # the benchmark's final table finds the same rung (benchmark/board_table.py calls this function)
    held, worst = robust_rung({k: w for k, (w, _, _) in results.items()}, list(ROBUST_MUS), ROBUST_HELD_OUT, trained)
    assert held == rung.split(" ")[0] and (worst is None) == (rung == "none")


def test_trained_bots_are_the_bot_opponents_of_a_run_with_the_bot_curriculum():
    refs = ("random", "greedy")
    run = {"bot_fraction": 0.5, "bot_fraction_end": 0.0, "bot_opponents": ("greedy+random15",), "references": ()}
    assert trained_bots(run, refs) == ("greedy+random15",)
    assert trained_bots(run | {"bot_opponents": ()}, refs) == refs  # (): every reference
    assert trained_bots(run | {"bot_opponents": (), "references": ("lookahead", "greedy")}, refs) == (
        "lookahead",
        "greedy",
    )
    assert trained_bots(run | {"bot_fraction": 0.0}, refs) == ()  # self-play only


@pytest.mark.parametrize("env_id", ["ConnectFour-v1", "TicTacToe-v1"])
@pytest.mark.parametrize("waiting", [True, False])  # some rows wait (the padded LSTM call), or none (stretches)
def test_square_head_gives_each_move_the_logit_of_the_square_it_fills(selfplay, env_id, waiting):
    """--square-head: a move's logit is the actor's plus the square head's map at the square the move fills (Connect
    Four: the lowest empty square of its column, found here by walking up the column; TicTacToe: the move's own
    square), on the rows that act; a row that waits gets the actor's logits alone. The log-probabilities the update
    uses are those logits' (get_action_and_value and get_logits agree)."""
    torch.manual_seed(0)
    env = selfplay.make_team_env(env_id, 1, 0)
    (channels, height, width), num_actions = env.obs_shape, env.num_actions
    agent = selfplay.Agent(env.obs_shape, num_actions, 1, 16, move_squares=env.move_squares)
    torch.nn.init.normal_(agent.square_head[2].weight)  # (its initial weights are near zero)
    rows = 10
    board = torch.randint(-1, 2, (rows, height, width))  # -1 empty, 0 own, 1 the opponent's
    if env_id == "ConnectFour-v1":  # stones lie on stones: a column's k stones at its bottom k squares
        filled = torch.randint(0, height + 1, (rows, 1, width))
        board = torch.where(
            torch.arange(height)[None, :, None] >= height - filled, torch.randint(0, 2, board.shape), -1
        )
    x = torch.zeros(rows, channels, height, width)
    x[:, 0], x[:, 1], x[:, 2] = board == 0, board == 1, 1.0
    active = torch.arange(rows) % 3 > 0 if waiting else torch.ones(rows, dtype=torch.bool)
    hidden, _, squares = agent.get_states(x, selfplay.zero_state(agent, rows, "cpu"), torch.zeros(rows), active)
    maps = agent.square_head(agent.encoder[:5](agent.normalize(x)))[:, 0]
    want = agent.actor(hidden).detach().clone()
    for r in np.flatnonzero(active):
        for move in range(num_actions):
            if env_id == "TicTacToe-v1":
                square = divmod(move, width)
            else:
                empty = [row for row in range(height) if board[r, row, move] < 0]
                square = (max(empty) if empty else 0, move)  # (a full column's move is masked)
            want[r, move] += maps[r, square[0], square[1]]
    got = agent.get_logits(hidden, squares)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    mask = torch.ones(rows, num_actions, dtype=torch.bool)
    for move in range(num_actions):
        action = torch.full((rows,), move)
        _, logprob, _, _, _ = agent.get_action_and_value(
            x, selfplay.zero_state(agent, rows, "cpu"), torch.zeros(rows), active, mask, action
        )
        torch.testing.assert_close(logprob, torch.log_softmax(got, -1)[:, move], rtol=1e-5, atol=1e-6)


def test_a_model_trained_with_square_head_is_played_with_it_and_not_grown(driven, tmp_path):
    """A --save-model file records --square-head: the Arena and benchmark/board_table.py (the final table,
    connect4_tactics.py) build their network with the head; five_surgery.py refuses it (one line, exit code 2)."""
    from cleanfive.arena import load_model

    sys.path.insert(0, str(SCRIPT.parents[1] / "benchmark"))
    import board_table

    result, folder = driven["smoke", "ConnectFour-v1"]  # (--square-head: on by default)
    assert result.returncode == 0, result.stderr
    (path,) = (folder / "runs").glob("*/*.cleanfive_model")
    assert torch.load(path, weights_only=True)["args"]["square_head"] is True
    model = load_model(str(path))
    assert model.agent.square_head is not None and board_table.load_agent(str(path))[0].square_head is not None
    surgery = [sys.executable, str(SCRIPT.with_name("five_surgery.py")), "--checkpoint", str(path), "--no-cuda"]
    refused = subprocess.run(surgery, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "--square-head" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr


def test_a_checkpoint_from_before_square_head_resumes_without_one_once_converted(driven, tmp_path):
    """A checkpoint whose Args hold no square_head (written before the flag, here a run without the head with the key
    taken out) and with --bot-ladder's flags and win rates (removed in issue 87): the script reads today's files only,
    so cleanfive/convert_saved.py brings it to today's (the run had no head and no ladder); it resumes
    without the head, where today's default would build one; one more update saves a model without it."""
    first, folder = driven["no head",]
    assert first.returncode == 0, first.stderr[-3000:]
    (written,) = (folder / "runs").glob("*/checkpoint.pt")
    path = tmp_path / "runs" / written.parent.name / "checkpoint.pt"
    path.parent.mkdir(parents=True)
    checkpoint = torch.load(written, weights_only=True)
    del checkpoint["args"]["square_head"]
    checkpoint["args"] |= {"total_timesteps": 768, "save_model": True}  # a third update, then the model
    checkpoint["args"] |= {"bot_ladder": 0.0, "bot_ladder_top": 0}
    for local in checkpoint["ranks"]:
        local["bot_win_rate"] = torch.zeros(2, dtype=torch.float64)
    torch.save(checkpoint, path)
    converter = SCRIPT.with_name("convert_saved.py")
    converted = subprocess.run([sys.executable, str(converter), str(path)], capture_output=True, text=True, timeout=120)
    assert converted.returncode == 0, converted.stderr
    today = torch.load(path, weights_only=True)
    assert today["args"]["square_head"] is False and "bot_ladder" not in today["args"]
    assert not any("bot_win_rate" in local for local in today["ranks"])
    resumed = run(tmp_path, "--resume", str(path))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    saved = torch.load(path.with_name("ppo_lstm_selfplay.cleanfive_model"), weights_only=True)
    assert saved["args"]["square_head"] is False and not any(k.startswith("square_head.") for k in saved["model"])


def test_convert_saved_brings_each_older_format_to_todays():
    """Each step of cleanfive/convert_saved.py's upgrade: a file of ppo_lstm_selfplay.py that names no script gets
    it, a flag added since gets the value its run had, one removed since goes, the learner's side is renamed and the
    bot win rates go; a checkpoint of a run that used a removed flag is not converted; a file of today is kept."""
    from cleanfive.convert_saved import upgrade

    lane = {"env_id": "Moba5v5-v0", "bot_ladder": 0.0, "bot_ladder_top": 0}
    old = {"args": lane, "model": {"hero_embedding.weight": 0}}
    new = upgrade({**old, "ranks": [{"side": np.ones(2), "bot_win_rate": np.zeros(3)}]})
    added = {"square_head": False, "random_openings": False}  # trained before the flags
    assert new["script"] == "ppo_lstm_selfplay.py" and new["args"] == {"env_id": "Moba5v5-v0", **added}
    (local,) = new["ranks"]
    assert set(local) == {"learner_side"} and local["learner_side"].tolist() == [1, 1]
    assert "bot_ladder" not in upgrade({**old, "args": lane | {"bot_ladder": 0.5}})["args"]  # a model: evaluated alike
    with pytest.raises(ValueError, match="a4d57ae"):
        upgrade({**old, "args": lane | {"bot_ladder": 0.5}, "ranks": [{}]})
    today = {"script": "five_surgery.py", "args": {"env_id": "Moba5v5-v1"}, "model": {}}
    assert upgrade(today) == today
    # --quiet changed no run: it goes whatever its value, from a checkpoint too, in every script's files
    assert upgrade({**today, "args": today["args"] | {"quiet": True}, "ranks": []})["args"] == today["args"]
    assert upgrade({"script": "cleanba_impala.py", "args": {"seed": 2, "quiet": True}})["args"] == {"seed": 2}


def test_a_file_from_before_square_head_is_converted_then_played_without_one(driven):
    """--square-head is on by default now; a file that holds no value for it was trained without one. The script
    does not guess: --eval-only refuses it with one line that names the converter; the bundled TicTacToe model,
    trained before the flag, is converted (square_head False), and its weights load and play the references."""
    result, _ = driven["former",]
    assert result.returncode == 2 and "convert_saved.py" in result.stderr.strip().splitlines()[-1], result.stderr
    saved = torch.load(SCRIPT.parent / "models" / "tictactoe.cleanfive_model", weights_only=True)
    assert saved["args"]["square_head"] is False and not any(key.startswith("square_head.") for key in saved["model"])
    result, _ = driven["bundled",]
    assert result.returncode == 0, result.stderr
    rows = [line.split("`")[1] for line in result.stdout.splitlines() if line.startswith("| `")]
    assert rows == ["random", "greedy", "greedy+random15", "greedy+opening4"], result.stdout  # and greedy's held-out


def test_the_flags_marked_world_hold_the_default_worlds_settings(script):
    """Args shows a run's settings: the flags marked (world) default to the default world's world_defaults, and
    world_args gives another --env-id's (the flag in either spelling, with or without `=`); an unknown id keeps
    Args' own, for make_world to refuse with one line."""
    from cleanfive.envs.teams import TEAM_ENV_IDS, world_defaults

    own = world_defaults(script.Args.env_id)
    args = script.Args()
    checked = [key for key in own if not (key == "num_heroes" and hasattr(args, "checkpoint"))]  # surgery: its model's
    assert len(checked) >= 9 and all(getattr(args, key) == own[key] for key in checked), (vars(args), own)
    for argv in (["--env-id", "VmasFootball-v0"], ["--env_id=VmasFootball-v0", "--seed", "2"]):
        football = script.world_args(argv)
        assert football.env_id == "VmasFootball-v0"
        assert {key: getattr(football, key) for key in own} == world_defaults("VmasFootball-v0")
    assert script.world_args(["--env-id", "Nowhere-v0"]).num_envs == args.num_envs
    # every world's defaults name the same flags, which --eval-only takes from a saved run (world_defaults(Args.env_id))
    assert all(world_defaults(env_id).keys() == own.keys() for env_id in TEAM_ENV_IDS)
