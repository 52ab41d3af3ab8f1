"""cleanfive/ppo_action_guidance.py: the ε schedule at its boundaries, the task rewards and the distance to the enemy
base against direct computation, the behaviour log-prob of the ε-greedy policy, and (in one driver process, one JVM)
smoke runs of the three tasks, PLO leaving a policy bit-identical, --eval-only and user errors; resume after SIGKILL
and the stop on non-finite parameters (subprocesses of their own) are slow tests, covered by tests/test_reliability.py
in the default run."""

import hashlib
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from driver import drive
from golden import check_run
from needs import needs_microrts
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from cleanfive.envs.microrts import ACTION_DIMS, MASK_SIZE, NUM_PLANES
from cleanfive.ppo_action_guidance import (
    AUX,
    MAIN,
    STRATEGIES,
    TASKS,
    Agent,
    base_distance,
    epsilon_at,
    guided_action,
    task_rewards,
)

SCRIPT = Path(__file__).resolve().parents[1] / "cleanfive" / "ppo_action_guidance.py"


# ---------------------------------------------------------------- the ε schedule (Section 8.3.1)


@pytest.mark.parametrize("strategy", ["long-adaptation", "short-adaptation", "mixed-policy"])
def test_epsilon_schedule_matches_piecewise_linear_formula(strategy):
    start, shift, adaptation, end = STRATEGIES[strategy]
    total = 10_000_000  # the thesis' budget: the presets are its steps / 10M
    shift_end, adaptation_end = shift * total, (shift + adaptation) * total
    for step in np.linspace(0, total, 1001).tolist() + [shift_end - 1, shift_end, adaptation_end - 1, adaptation_end]:
        want = np.interp(step, [shift_end, adaptation_end], [start, end])  # flat, linear, flat
        assert epsilon_at(step, total, start, shift, adaptation, end) == pytest.approx(want, abs=1e-12)


def test_epsilon_schedule_boundaries_in_thesis_steps():
    total = 10_000_000
    long = (*STRATEGIES["long-adaptation"],)  # shift 2M, adaptation 7M, epsilon_end 0
    assert long == (0.95, 0.2, 0.7, 0.0)
    assert epsilon_at(0, total, *long) == 0.95
    assert epsilon_at(1_999_999, total, *long) == 0.95  # held through the shift period
    assert epsilon_at(2_000_000, total, *long) == pytest.approx(0.95)  # decay starts at the shift's end
    assert epsilon_at(5_500_000, total, *long) == pytest.approx(0.475)  # half-way through the adaptation
    assert epsilon_at(8_999_999, total, *long) == pytest.approx(0.95 / 7e6)
    assert epsilon_at(9_000_000, total, *long) == 0.0 and epsilon_at(total, total, *long) == 0.0
    short = STRATEGIES["short-adaptation"]  # shift 800k, adaptation 1M
    assert epsilon_at(799_999, total, *short) == 0.95 and epsilon_at(1_800_000, total, *short) == 0.0
    mixed = STRATEGIES["mixed-policy"]  # epsilon_end 0.5: the auxiliary policy keeps acting half of the time
    assert epsilon_at(3_000_000, total, *mixed) == pytest.approx(0.725) and epsilon_at(total, total, *mixed) == 0.5
    # a configured start of 1 and no adaptation period: 1 until the shift ends, then epsilon_end at once
    assert epsilon_at(499, 1000, 1.0, 0.5, 0.0, 0.1) == 1.0 and epsilon_at(500, 1000, 1.0, 0.5, 0.0, 0.1) == 0.1
    # the baselines: sparse never lets the auxiliary policy act, shaped always does
    assert all(epsilon_at(s, 100, *STRATEGIES["sparse"]) == 0.0 for s in range(101))
    assert all(epsilon_at(s, 100, *STRATEGIES["shaped"]) == 1.0 for s in range(101))


# ---------------------------------------------------------------- task rewards (Section 8.4.1)


def random_obs(seed, envs=6, height=6, width=8):
    """One-hot-ish observations: each cell is empty, a resource, or a unit of a random type and owner."""
    rng = np.random.default_rng(seed)
    obs = np.zeros((envs, height, width, NUM_PLANES), dtype=np.float32)
    kind = rng.integers(0, 4, size=(envs, height, width))  # 0 empty, 1 resource, 2 own unit, 3 enemy unit
    unit_type = rng.integers(15, 21, size=(envs, height, width))  # base, barracks, worker, light, heavy, ranged
    unit_type[rng.random((envs, height, width)) < 0.8] = 16  # mostly barracks, so that bases and units are rare
    for e, y, x in np.ndindex(envs, height, width):
        if kind[e, y, x] == 0:
            obs[e, y, x, [10, 13]] = 1
        elif kind[e, y, x] == 1:
            obs[e, y, x, [11 if e % 2 else 10, 14]] = 1  # resources, sometimes on the "self" owner plane
        else:
            obs[e, y, x, [10 + kind[e, y, x] - 1, unit_type[e, y, x]]] = 1
    obs[0, ..., 15] = 0  # env 0: no base at all
    obs[1, ..., 17:21] = 0  # env 1: no worker or combat unit at all
    return torch.as_tensor(obs)


def direct_distance(obs):
    out = []
    for e in range(obs.shape[0]):
        own = [(y, x) for y, x in np.ndindex(obs.shape[1:3]) if obs[e, y, x, 11] and obs[e, y, x, 17:21].any()]
        bases = [(y, x) for y, x in np.ndindex(obs.shape[1:3]) if obs[e, y, x, 12] and obs[e, y, x, 15]]
        out.append(min((math.dist(a, b) for a in own for b in bases), default=math.inf))
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_base_distance_matches_loops(seed):
    obs = random_obs(seed)
    got = base_distance(obs).numpy()
    want = direct_distance(obs)
    assert np.isinf(got[:2]).all() and np.isfinite(want[2:]).any()
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("task", list(TASKS))
def test_task_rewards_weights_and_closer_term(task):
    _, _, sparse, shaped = TASKS[task]
    rng = np.random.default_rng(3)
    raw = rng.integers(-1, 3, size=(5, 6)).astype(np.float32)
    distance = np.array([3.0, 2.0, math.inf, 4.0, 5.0], dtype=np.float32)
    next_distance = np.array([2.0, 2.5, 1.0, math.inf, 1.0], dtype=np.float32)
    done = np.array([False, False, False, False, True])
    weights = torch.tensor([sparse, shaped], dtype=torch.float32)
    got = task_rewards(*map(torch.as_tensor, (raw, distance, next_distance, done)), weights).numpy()
    for e in range(5):
        ok = np.isfinite(distance[e]) and np.isfinite(next_distance[e]) and not done[e]
        closer = distance[e] - next_distance[e] if ok else 0.0
        for row, w in enumerate((sparse, shaped)):
            want = sum(w[k] * raw[e, k] for k in range(6)) + w[6] * closer
            assert got[row, e] == pytest.approx(want, abs=1e-5)
    # the sparse rewards of Section 8.4.1: attacks, combat units, the outcome; no distance term
    assert sparse[6] == 0 and sum(sparse) == 1


def test_guided_action_logprob_is_the_acting_policy():
    torch.manual_seed(0)
    h, w, E = 4, 4, 64
    agents = nn.ModuleList([Agent(h, w), Agent(h, w)])
    with torch.no_grad():
        for p in agents[AUX].parameters():
            p.add_(torch.randn_like(p))  # make the two policies disagree
    obs = (torch.rand(E, h, w, NUM_PLANES) < 0.2).float()
    mask = torch.rand(E, h * w, MASK_SIZE) < 0.6
    mask[..., [0, 6, 10, 14, 18, 22, 29]] = True  # every component keeps a legal entry
    scores = {}
    with torch.no_grad():
        for epsilon in (0.0, 0.5, 1.0):
            action, logprob, values = guided_action(agents, (MAIN, AUX), obs, mask, epsilon)
            assert action.shape == (E, h * w, len(ACTION_DIMS)) and values.shape == (2, E)
            score = [agents[p].get_action_and_value(obs, mask, True, True, action)[1] for p in (MAIN, AUX)]
            scores[epsilon] = (logprob, *score)
        # only the policies asked for run: the other value row stays 0
        _, _, values = guided_action(agents, (MAIN,), obs, mask, 0.0)
        assert (values[AUX] == 0).all() and (values[MAIN] != 0).all()
    logprob, by_main, by_aux = scores[0.0]
    torch.testing.assert_close(logprob, by_main)
    logprob, by_main, by_aux = scores[1.0]
    torch.testing.assert_close(logprob, by_aux)
    logprob, by_main, by_aux = scores[0.5]
    from_main, from_aux = torch.isclose(logprob, by_main), torch.isclose(logprob, by_aux)
    assert (from_main | from_aux).all() and from_main.sum() > 10 and from_aux.sum() > 10


# ---------------------------------------------------------------- the script, in subprocesses

needs_java = needs_microrts
TINY = [
    "--map-path",
    "maps/4x4/basesWorkers4x4.xml",
    "--num-envs",
    "4",
    "--max-steps",
    "100",
    "--total-timesteps",
    "512",
    "--num-steps",
    "64",
    "--update-epochs",
    "1",
    "--eval-episodes",
    "4",
    "--no-cuda",
    "--save-every",
    "0",
]  # fmt: skip  (2 updates of 4 envs x 64 frames)


def run(tmp_path, *flags):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def summary_of(result):
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("summary ")]
    return dict(kv.split("=") for kv in line.split()[1:])


def initial_agents(size=4, seed=1):
    """The two networks as the script builds them right after seeding, with its one torch thread (the QR
    decomposition of the orthogonal initialisation can differ in the last bit with the number of threads)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        return nn.ModuleList([Agent(size, size), Agent(size, size)])
    finally:
        torch.set_num_threads(threads)


def state_dict_sha256(state):
    """The hash that the script prints last (`params_sha256=`), of a saved state_dict."""
    digest = hashlib.sha256()
    for key, value in state.items():
        digest.update(key.encode())
        digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def unchanged(model, prefix):
    """Whether the saved parameters of policy `prefix` ("0." main, "1." aux) are bit-identical to their init."""
    init = initial_agents().state_dict()
    return all(torch.equal(model[k], init[k]) for k in model if k.startswith(prefix))


def scalar_tags(tmp_path):
    (run_dir,) = (tmp_path / "runs").iterdir()
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return run_dir, events


USER_ERRORS = [
    (["--num-minibatches", "3"], "--num-minibatches"),
    # issue 39's fuzz: a minibatch of one sample has no standard deviation to normalise its advantage by (was NaN)
    (["--num-minibatches", "256"], "--norm-adv needs minibatches of 2 or more"),
    (["--learning-rate", "0"], "--learning-rate 0.0 is out of range"),
    (["--gamma", "1.5"], "--gamma"),
    (["--gae-lambda", "1.5"], "--gae-lambda"),
    (["--clip-coef", "0"], "--clip-coef"),
    (["--num-envs", "0"], "--num-envs"),
    (["--total-timesteps", "0"], "--total-timesteps"),
    (["--epsilon-end", "1.5"], "--epsilon-end"),
    (["--strategy", "sparse", "--shift", "0.1"], "--shift only applies"),
    (["--map-path", "maps/nowhere.xml"], "not found"),
    (["--map-path", "maps/NoWhereToRun9x8.xml"], "even sides"),
    (["--resume", "missing.pt"], "cannot use --resume missing.pt"),
    (["--resume", "corrupt.pt"], "cannot use --resume corrupt.pt"),
    (["--resume", "wrong_size.cleanfive_model"], "holds no"),  # a saved model is no checkpoint
    (["--eval-only", "missing.cleanfive_model"], "cannot use --eval-only"),
    (["--eval-only", "other_script.cleanfive_model"], "of this script"),
    (["--eval-only", "wrong_size.cleanfive_model"], "does not fit"),
    (["--capture-video"], "xvfb-run"),
]
# the smoke runs of the three tasks (then --eval-only on the first one's model), each in a folder of its own
RUNS = {
    "attack": [
        *TINY, "--task", "LearnToAttack", "--strategy", "short-adaptation", "--save-model",
        "--eval-games", "1", "--eval-bots", "randomAI", "passiveAI", "--league-games", "1",
    ],
    "eval_only": ["--eval-only", "GLOB:../attack/runs/*/ppo_action_guidance.cleanfive_model", "--num-envs", "2"],
    "plo": [*TINY, "--task", "ProduceCombatUnits", "--strategy", "short-adaptation", "--plo", "--save-model"],
    "shaped": [*TINY, "--task", "DefeatRandomEnemy", "--strategy", "shaped", "--save-model"],
}  # fmt: skip


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    """Every run and user error of this module in one driver process: {name: (CompletedProcess, folder)}, with the
    user errors as {("error", index): ...}."""
    root = tmp_path_factory.mktemp("driven")
    folder = root / "errors"
    folder.mkdir()
    (folder / "corrupt.pt").write_bytes(b"not a checkpoint")
    args = {"task": "LearnToAttack", "map_path": "maps/10x10/basesWorkers10x10.xml", "max_steps": 100}
    args |= {"strategy": "sparse", "epsilon_end": 0.0}
    other = {"strategy": "masking", "reward_weight": (0, 1, 0, 0, 0, 0)}  # ppo_gridnet_masked.py's Args
    torch.save({"script": "ppo_gridnet_masked.py", "args": other, "model": {}}, folder / "other_script.cleanfive_model")
    model = {"script": "ppo_action_guidance.py", "args": args, "model": initial_agents(4).state_dict()}
    torch.save(model, folder / "wrong_size.cleanfive_model")
    cases = {name: (root / name, flags) for name, flags in RUNS.items()}
    cases |= {("error", i): (folder, TINY + flags) for i, (flags, _) in enumerate(USER_ERRORS)}
    return drive(SCRIPT, cases, env={"DISPLAY": ""})  # no display: --capture-video must refuse


@needs_java
def test_learn_to_attack_action_guidance_trains_both_policies_then_eval_only(driven):
    result, tmp_path = driven["attack"]
    fields = summary_of(result)
    run_dir, events = scalar_tags(tmp_path)
    assert run_dir.name.startswith("basesWorkers4x4__ppo_action_guidance__1__")
    tags = set(events.Tags()["scalars"])
    for tag in [
        "charts/episodic_return",
        "charts/shaped_episodic_return",
        "charts/raw_attack",
        "charts/epsilon",
        "charts/SPS",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/policy_loss_aux",
        "losses/value_loss_aux",
        "losses/approx_kl",
        "eval/sparse_return",
        "invalid/a_null",
        "league/trueskill_mu",
    ]:
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    lengths = [e.value for e in events.Scalars("charts/episodic_length")]
    assert len(lengths) >= 4 and max(lengths) <= 100
    # with 512 of 512 steps, short adaptation (shift 8%, adaptation 10%) ends with epsilon 0
    assert [e.value for e in events.Scalars("charts/epsilon")][-1] == 0.0
    assert fields["strategy"] == "short-adaptation" and fields["plo_skips_main"] == fields["plo_skips_aux"] == "0"
    assert {"sparse_return", "shaped_return", "t_first", "SPS", "eval_sparse_return", "eval_shaped_return"} <= set(
        fields
    )
    # gridnet's statistics (0 under invalid action masking) and its TrueSkill league
    assert float(fields["a_null"]) == float(fields["invalid"]) == 0 and "trueskill_mu" in fields
    assert sum(line.startswith("league bot=") for line in result.stdout.splitlines()) == 2
    saved = torch.load(run_dir / "ppo_action_guidance.cleanfive_model", weights_only=True)
    assert result.stdout.splitlines()[-1] == f"params_sha256={state_dict_sha256(saved['model'])}"
    check_run("ppo_action_guidance LearnToAttack", result.stdout)  # tests/golden/runs.json
    assert saved["args"]["task"] == "LearnToAttack" and saved["args"]["epsilon_end"] == 0.0
    assert not unchanged(saved["model"], "0.") and not unchanged(saved["model"], "1.")  # both learned
    # --eval-only: the task and strategy come from the model, nothing is trained
    result, _ = driven["eval_only"]
    fields = summary_of(result)
    assert "update " not in result.stdout and fields["task"] == "LearnToAttack" and fields["episodes"] == "0"
    # the saved model's evaluation games, as kept for this machine class (tests/golden/runs.json)
    returns = {key: fields[key] for key in ("eval_sparse_return", "eval_shaped_return")}
    check_run("ppo_action_guidance LearnToAttack --eval-only", None, **returns)


@needs_java
def test_produce_combat_units_plo_leaves_the_main_policy_bit_identical(driven):
    # 100-frame games cannot produce a combat unit (a barracks alone takes longer to build): R_M is 0 throughout,
    # so PLO skips every update of the main policy; the auxiliary policy harvests (R_A1 > 0) and learns
    result, tmp_path = driven["plo"]
    fields = summary_of(result)
    assert fields["plo_skips_main"] == "2" and int(fields["plo_skips_aux"]) < 2
    assert float(fields["sparse_return"]) == 0 and float(fields["shaped_return"]) > 0
    run_dir, events = scalar_tags(tmp_path)
    assert [e.value for e in events.Scalars("charts/plo_skipped_main")] == [1.0, 1.0]
    assert "losses/policy_loss" not in events.Tags()["scalars"] and "losses/policy_loss_aux" in events.Tags()["scalars"]
    model = torch.load(run_dir / "ppo_action_guidance.cleanfive_model", weights_only=True)["model"]
    assert unchanged(model, "0.") and not unchanged(model, "1.")


@needs_java
def test_defeat_random_enemy_shaped_baseline_trains_the_auxiliary_policy_only(driven):
    result, tmp_path = driven["shaped"]
    fields = summary_of(result)
    assert fields["plo_skips_main"] == fields["plo_skips_aux"] == "0"
    run_dir, events = scalar_tags(tmp_path)
    tags = set(events.Tags()["scalars"])
    assert "losses/policy_loss_aux" in tags and "losses/policy_loss" not in tags
    assert {e.value for e in events.Scalars("charts/epsilon")} == {1.0}
    assert {e.value for e in events.Scalars("charts/episodic_return")} <= {-1.0, 0.0, 1.0}  # R_M: the outcome
    model = torch.load(run_dir / "ppo_action_guidance.cleanfive_model", weights_only=True)["model"]
    assert unchanged(model, "0.") and not unchanged(model, "1.")


@pytest.mark.slow
@needs_java
def test_resume_after_sigkill_continues_the_same_run(tmp_path):
    """Slow: tests/test_reliability.py::test_sigkill_then_resume_loses_no_update[ppo_action_guidance] covers resume
    after SIGKILL in the default run (same run name, no update lost or repeated); this one adds that the other
    flags are ignored on --resume and the checkpoint's keys."""
    flags = [*TINY, "--total-timesteps", "1536", "--strategy", "sparse", "--save-every", "2"]  # 6 updates
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *flags], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.time() + 240
    while not list(tmp_path.glob("runs/*/checkpoint.pt")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    (path,) = tmp_path.glob("runs/*/checkpoint.pt")
    checkpoint = torch.load(path, weights_only=True)
    k, g = checkpoint["iteration"], checkpoint["global_step"]
    assert k % 2 == 0 and g == k * 256 and checkpoint["args"]["strategy"] == "sparse"
    assert {"model", "optimizer", "rng", "history", "plo_skips", "run_name"} <= checkpoint.keys()
    # other flags are ignored: the checkpoint's Args (6 updates, sparse) are used
    result = run(tmp_path, "--resume", str(path), "--total-timesteps", "99999", "--strategy", "shaped")
    fields = summary_of(result)
    assert f"resumed from {path} at update {k} (global_step {g})" in result.stdout
    assert "update 6/6 global_step=1536" in result.stdout and fields["strategy"] == "sparse"
    run_dir, events = scalar_tags(tmp_path)  # the same runs/ folder, curves continued after the checkpoint
    steps = [e.step for e in events.Scalars("charts/SPS")]
    assert steps == sorted(steps) and steps[-1] == 1536 and len(steps) == 6


@pytest.mark.slow
@needs_java
def test_absurd_learning_rate_stops_with_one_line_and_exit_1(tmp_path):
    """Slow: tests/test_reliability.py::test_numerical_fault_stops_with_one_line_and_keeps_the_last_good_checkpoint
    [ppo_action_guidance] covers the stop on non-finite parameters (one line, exit 1) in the default run; this one
    adds the fault at update 1, with no checkpoint to name."""
    result = run(tmp_path, *TINY, "--learning-rate", "1e12")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert (
        lines[0]
        == "error: non-finite loss or parameters at update 1; stopped. Last good checkpoint: none (use --save-every)"
    )


@needs_java
@pytest.mark.parametrize("case", range(len(USER_ERRORS)), ids=[" ".join(f) for f, _ in USER_ERRORS])
def test_user_errors_exit_2_with_one_line(driven, case):
    result, _ = driven["error", case]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(lines) == 1 and USER_ERRORS[case][1] in lines[0] and lines[0].startswith("error: "), result.stderr


def test_missing_java_exits_2_with_install_hint(tmp_path):
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no `java` on PATH
    result = subprocess.run(
        [sys.executable, str(SCRIPT), *TINY], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Java" in lines[0]
    assert f"cannot open map {TINY[TINY.index('--map-path') + 1]!r}" in lines[0]  # which map it could not open
