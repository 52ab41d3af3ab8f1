"""cleanfive/five_surgery.py: each surgery operation on random networks, and a checkpoint operated end to end."""

import importlib.util
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from driver import drive
from golden import check_run
from saved_models import save_selfplay_model
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from cleanfive.convert_saved import upgrade

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "cleanfive" / "five_surgery.py"
# float32 round-off: outputs of size ~1 after 8 recurrent steps move by a few ulps when a sum changes order (seen:
# up to ~3e-6, when a fold moves a large clipped input into the bias); a real change of the function is far larger
TOL = 1e-5
D, A, N, H = 10, 6, 3, 16  # observation columns, actions, heroes per side, hidden size of the random networks


def load_script():
    spec = importlib.util.spec_from_file_location("five_surgery", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fs():
    return load_script()


def random_agent(fs, seed=0, obs_size=D):
    """An Agent whose every parameter and normalisation statistic is random (nothing starts at a convenient 0)."""
    torch.manual_seed(seed)
    agent = fs.Agent(obs_size, A, N, H)
    with torch.no_grad():
        for param in agent.parameters():
            param.normal_(0.0, 0.5)
        agent.obs_mean.normal_(0.0, 1.0)
        agent.obs_var.uniform_(0.5, 2.0)
    return agent


def random_games(seed=0, steps=8, teams=4, obs_size=D):
    """Observations (T, teams * N, obs_size) with large values (some clipped at +-5 after normalisation), done flags."""
    gen = torch.Generator().manual_seed(seed)
    obs = 3.0 * torch.randn(steps, teams * N, obs_size, generator=gen)
    done = (torch.rand(steps, teams, generator=gen) < 0.2).float().repeat_interleave(N, 1)
    return obs, done


def outputs(agent, obs, done):
    """Logits and values along the games, the LSTM state carried from zero, written without the script's helpers."""
    state = (torch.zeros(1, obs.shape[1], agent.lstm.hidden_size), torch.zeros(1, obs.shape[1], agent.lstm.hidden_size))
    with torch.no_grad():
        everyone = torch.ones(done.numel(), dtype=torch.bool)
        hidden = agent.get_states(obs.flatten(0, 1), state, done.flatten(), everyone)[0]  # (either script's Agent)
        return agent.actor(hidden), agent.critic(hidden)


def max_delta(old, new, obs, done, new_obs=None):
    """max |delta logits| over the old actions and max |delta value| of `new` (fed `new_obs`) against `old`."""
    logits, value = outputs(old, obs, done)
    new_logits, new_value = outputs(new, obs if new_obs is None else new_obs, done)
    return (new_logits[:, : logits.shape[1]] - logits).abs().max().item(), (new_value - value).abs().max().item()


def test_widen_dense_is_exact_and_breaks_symmetry(fs):
    old = random_agent(fs)
    new = fs.agent_from_state(fs.widen_dense(old.state_dict(), 7, torch.Generator().manual_seed(1)))
    assert new.encoder[0].weight.shape == (H + 7, D) and new.encoder[0].bias.shape == (H + 7,)
    assert new.encoder[2].weight.shape == (H, H + 7)
    torch.testing.assert_close(new.encoder[0].weight[:H], old.encoder[0].weight, rtol=0, atol=0)
    assert (new.encoder[2].weight[:, H:] == 0).all()  # Equation 6: W2 = [W2 0]
    rows = new.encoder[0].weight[H:]
    assert rows.abs().min() > 0 and torch.linalg.matrix_rank(rows) == 7  # random rows, no two alike
    obs, done = random_games()
    assert max(max_delta(old, new, obs, done)) <= TOL


def test_add_inputs_reads_new_columns_with_zero_weights(fs):
    old = random_agent(fs)
    columns, mean, var = torch.tensor([D, D + 1, D + 2]), torch.tensor([1.0, -2.0, 0.5]), torch.tensor([4.0, 1.0, 9.0])
    new = fs.agent_from_state(fs.add_inputs(old.state_dict(), columns, mean, var))
    assert new.encoder[0].weight.shape == (H, D + 3) and (new.encoder[0].weight[:, D:] == 0).all()
    assert new.input_index.tolist() == list(range(D + 3))
    torch.testing.assert_close(new.obs_mean[D:], mean)
    torch.testing.assert_close(new.obs_var[D:], var)
    # Equation 8: the new world's observation extends the old one; same game state, same outputs
    obs, done = random_games()
    extended = torch.cat([obs, 100.0 * torch.randn(*obs.shape[:2], 3)], -1)
    assert max(max_delta(old, new, obs, done, extended)) <= TOL
    # the new inputs do reach the network once their weights move
    with torch.no_grad():
        new.encoder[0].weight[:, D:] = 1.0
    assert max(max_delta(old, new, obs, done, extended)) > 1e-2


@pytest.mark.parametrize("constant", [0.7, 40.0])  # 40: normalised beyond +5, so the fold must clip like the network
def test_fold_inputs_moves_constant_columns_into_the_bias(fs, constant):
    old = random_agent(fs)
    obs, done = random_games()
    obs[..., [2, 7]] = torch.tensor([constant, -1.5])
    state = old.state_dict()
    new = fs.agent_from_state(fs.fold_inputs(state, (2, 7), torch.tensor([constant, -1.5])))
    assert new.input_index.tolist() == [0, 1, 3, 4, 5, 6, 8, 9]
    assert new.encoder[0].weight.shape == (H, D - 2) and new.obs_mean.shape == (D - 2,)
    # B' = B + W[:, i] x_i with x_i the normalised, clipped constant, in float64 written out here
    w, b = state["encoder.0.weight"].double(), state["encoder.0.bias"].double()
    mean, var = state["obs_mean"].tolist(), state["obs_var"].tolist()
    x = [min(max((c - mean[i]) / math.sqrt(var[i] + 1e-8), -5.0), 5.0) for i, c in [(2, constant), (7, -1.5)]]
    want = b + w[:, 2] * x[0] + w[:, 7] * x[1]
    torch.testing.assert_close(new.encoder[0].bias.double(), want, rtol=0, atol=1e-5)
    assert max(max_delta(old, new, obs, done)) <= TOL
    # folding is exact only where the input really is constant
    obs[..., 2] = torch.randn(obs.shape[:2])
    assert max(max_delta(old, new, obs, done)) > 1e-3


def test_add_actions_leaves_the_old_policy_unchanged_while_masked(fs):
    old = random_agent(fs)
    new = fs.agent_from_state(fs.add_actions(old.state_dict(), 2))
    assert (
        new.actor.weight.shape == (A + 2, H) and (new.actor.weight[A:] == 0).all() and (new.actor.bias[A:] == 0).all()
    )
    obs, done = random_games()
    logits, _ = outputs(new, obs, done)
    assert (logits[:, A:] == 0).all()  # the new logits start at 0
    assert max(max_delta(old, new, obs, done)) <= TOL
    # masked (feature off): the very same distribution over the old actions; legal: the new actions take probability
    x, d, everyone = obs.flatten(0, 1), done.flatten(), torch.ones(done.numel(), dtype=torch.bool)
    mask = torch.rand(len(x), A, generator=torch.Generator().manual_seed(2)) < 0.7
    mask[:, 0] = True
    actions = torch.randint(A, (len(x),)) * 0  # no-op, always legal
    state = (torch.zeros(1, obs.shape[1], H), torch.zeros(1, obs.shape[1], H))
    with torch.no_grad():
        _, old_logprob, old_entropy, _, _ = old.get_action_and_value(x, state, d, everyone, mask, actions)
        off = torch.cat([mask, torch.zeros(len(x), 2, dtype=torch.bool)], 1)
        _, logprob, entropy, _, _ = new.get_action_and_value(x, state, d, everyone, off, actions)
        on = torch.cat([mask, torch.ones(len(x), 2, dtype=torch.bool)], 1)
        _, on_logprob, _, _, _ = new.get_action_and_value(x, state, d, everyone, on, actions)
    assert (logprob - old_logprob).abs().max() <= TOL and (entropy - old_entropy).abs().max() <= TOL
    assert (on_logprob < old_logprob - 1e-3).all()


def test_widen_lstm_keeps_old_gates_and_changes_outputs_with_the_scale(fs):
    old = random_agent(fs)
    obs, done = random_games()
    deltas = []
    for scale in (0.0, 1e-3, 1e-2, 1e-1):
        new = fs.agent_from_state(fs.widen_lstm(old.state_dict(), 5, scale, torch.Generator().manual_seed(3)))
        assert new.lstm.hidden_size == H + 5 and new.lstm.input_size == old.lstm.input_size
        assert new.actor.weight.shape == (A, H + 5) and new.critic.weight.shape == (1, H + 5)
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"):  # gate blocks i, f, g, o
            old_gates = getattr(old.lstm, name).reshape(4, H, -1)
            new_gates = getattr(new.lstm, name).reshape(4, H + 5, -1)
            assert torch.equal(new_gates[:, :H, : old_gates.shape[2]], old_gates)
            assert new_gates[:, H:].abs().max() <= 6 * scale  # N(0, scale^2) entries
        deltas.append(max(max_delta(old, new, obs, done)))
    assert deltas[0] <= TOL  # scale 0 is exact (and leaves the new units identical: Appendix B's dilemma)
    assert TOL < deltas[1] < deltas[2] < deltas[3]


def test_operate_applies_every_operation_and_the_pool_gets_the_same_surgery(fs):
    plan = {
        "fold": ((4,), torch.tensor([2.0])),
        "inputs": (torch.tensor([D, D + 1]), torch.zeros(2), torch.ones(2)),
        "widen_dense": 3,
        "widen_lstm": 4,
        "actions": 1,
    }
    obs, done = random_games(obs_size=D + 2)
    obs[..., 4] = 2.0
    pool = [random_agent(fs, seed) for seed in range(3)]
    operated = [fs.agent_from_state(fs.operate(a.state_dict(), plan, 0.0, seed=7)) for a in pool]
    for old, new in zip(pool, operated, strict=True):
        assert new.input_index.tolist() == [0, 1, 2, 3, 5, 6, 7, 8, 9, D, D + 1]
        assert new.encoder[0].weight.shape == (H + 3, D + 1)
        assert new.lstm.hidden_size == H + 4 and new.actor.out_features == A + 1
        assert max(max_delta(old, new, obs[..., :D], done, obs)) <= TOL
    # with new LSTM weights, every member gets the same ones (same seed)
    widened = [fs.operate(a.state_dict(), plan, 0.1, seed=7)["lstm.weight_hh_l0"] for a in pool]
    assert torch.equal(widened[0][:, H:], widened[1][:, H:]) and not torch.equal(widened[0][:, :H], widened[1][:, :H])


def test_models_of_ppo_lstm_selfplay_load_with_every_column_as_input(fs):
    spec = importlib.util.spec_from_file_location("ppo_lstm_selfplay", ROOT / "cleanfive" / "ppo_lstm_selfplay.py")
    parent = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(parent)
    torch.manual_seed(0)
    trained = parent.Agent((D,), A, N, H)
    agent = fs.agent_from_state(trained.state_dict())
    assert agent.input_index.tolist() == list(range(D))
    obs, done = random_games()
    assert max(max_delta(trained, agent, obs, done)) == 0.0


@pytest.mark.parametrize(
    ("iteration", "share"), [(1, 0.0), (5, 0.0), (6, 0.25), (7, 0.5), (9, 1.0), (30, 1.0)]
)  # fmt: skip
def test_new_action_share_is_zero_during_lr0_then_linear(fs, iteration, share):
    args = type("Args", (), {"lr0_updates": 5, "anneal_updates": 4})
    assert fs.new_action_share(iteration, args) == share


# ---------------------------------------------------------------------------------------------------------------------
# end to end: a tiny run on Moba5v5-v0 saved, then operated into Moba5v5-v1 and trained a few updates

TINY = [
    "--num-envs", "4", "--num-steps", "16", "--bptt-len", "8", "--num-minibatches", "2", "--update-epochs", "1",
    "--pool-every", "1", "--eval-every", "100", "--eval-games", "1", "--reference-games", "1",
    "--references", "random", "push", "--no-cuda",
]  # fmt: skip
SURGERY_TINY = ["--verify-games", "2", "--verify-steps", "24", "--parity-games", "2", "--lr0-updates", "1"]
HERO_ID_3_4 = ["14", "15"]  # Moba5v5 hero-id one-hot entries of heroes 3 and 4: always 0 in a team of 3


def run(cwd, script, *flags):
    cmd = [sys.executable, str(script), *flags]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def v0_model(tmp_path_factory):
    """A Moba5v5-v0 model of ppo_lstm_selfplay.py (3 heroes a side, untrained: tests/saved_models.py), with two past
    versions as a checkpoint holds."""
    cwd = tmp_path_factory.mktemp("v0")
    path = save_selfplay_model(cwd / "ppo_lstm_selfplay.cleanfive_model", "Moba5v5-v0", 3, seed=1, hidden=32)
    saved = torch.load(path, weights_only=True)
    # the pool of a checkpoint: two past versions (perturbed copies) with their quality scores
    model = saved["model"]
    params = [k for k in model if not k.startswith("obs_")]  # the normalisation statistics stay as they are
    past = [{k: v + 0.01 * i * torch.randn_like(v) if k in params else v for k, v in model.items()} for i in (1, 2)]
    with_pool = {**saved, "past_agents": past, "pool": {"eta": 0.01, "keys": ["v1", "v2"], "qualities": [0.0, -0.1]}}
    torch.save(with_pool, cwd / "with_pool.pt")
    return cwd / "with_pool.pt"


USER_ERRORS = [
    (["--checkpoint", "missing.cleanfive_model"], "--checkpoint"),
    (["--checkpoint", "{model}", "--env-id", "ConnectFour-v1"], "Moba5v5-v0"),
    (["--checkpoint", "{model}", "--env-id", "Moba5v5-v1"], "--add-actions"),
    (["--checkpoint", "{model}", "--env-id", "Moba5v5-v0", "--add-inputs"], "--add-inputs"),
    (["--checkpoint", "{model}", "--add-actions", "--fold-inputs", "19"], "--fold-inputs"),  # game time varies
    (["--checkpoint", "{model}", "--add-actions", "--widen-lstm", "-1"], "--widen-lstm"),
    (["--checkpoint", "{model}", "--add-actions", "--score-weights", "gold"], "name=number"),
]
BAD_FILES = [("--checkpoint", "garbage"), ("--checkpoint", "foreign")]
# the same checks as test_reliability.py's test_bad_input_exits_2_with_one_line[five_surgery---resume another
# script's file] and [five_surgery---eval-only another script's file]
RELIABILITY_BAD_FILES = [("--resume", "foreign"), ("--eval-only", "foreign")]


def bad_file(folder, content):
    """A file that is no torch file ("garbage"), or one of another script ("foreign"), as folder/bad.pt."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "bad.pt"
    if content == "garbage":
        path.write_bytes(b"PK\x03\x04 not a torch file")
    else:  # a file of another script
        torch.save({"args": {"env_id": "Moba5v5-v0", "other": 1}, "model": {"network.0.weight": torch.zeros(2)}}, path)
    return path


@pytest.fixture(scope="module")
def driven(tmp_path_factory, v0_model):
    """The runs and user errors of five_surgery.py in this module's default tests, in one driver process
    (tests/driver.py): {name: (CompletedProcess, folder)}.

    "operated": the v0 model operated into Moba5v5-v1 (new inputs and action, a wider first layer, two inputs folded)
    and trained two updates, with --save-model. "lr0": a wider LSTM, two updates at learning rate 0."""
    root = tmp_path_factory.mktemp("driven")
    v1 = [*TINY, *SURGERY_TINY, "--env-id", "Moba5v5-v1", "--total-timesteps", "128", "--checkpoint", str(v0_model)]
    operated = ["--anneal-updates", "1", "--add-inputs", "--add-actions", "--widen-dense", "8", "--fold-inputs"]
    lr0 = ["--lr0-updates", "2", "--add-inputs", "--add-actions", "--widen-lstm", "4", "--lstm-scales", "0.01"]
    cases = {
        "operated": (root / "operated", [*v1, *operated, *HERO_ID_3_4, "--save-model"]),
        "lr0": (root / "lr0", [*v1, *lr0, "--save-model"]),
    }
    for i, (flags, _) in enumerate(USER_ERRORS):
        flags = [f.format(model=v0_model) for f in flags]
        cases["error", i] = (root / f"error{i}", [*TINY, *SURGERY_TINY, "--total-timesteps", "64", *flags])
    for flag, content in BAD_FILES:
        cases[flag, content] = (bad_file(root / f"{flag}_{content}", content).parent, [flag, "bad.pt"])
    return drive(SCRIPT, cases, timeout=600)


@pytest.fixture(scope="module")
def operated(driven):
    return driven["operated"]


def test_checkpoint_accepts_models_of_ppo_lstm_selfplay_and_converted_ones_without_script_key(fs, v0_model, tmp_path):
    saved = torch.load(v0_model, weights_only=True)
    assert saved["script"] == "ppo_lstm_selfplay.py"
    _, env_id, agent = fs.load_trained(str(v0_model), "--checkpoint")
    assert env_id == "Moba5v5-v0" and agent.num_heroes == 3
    older = {k: v for k, v in saved.items() if k != "script"}  # a file of before the key: refused, then converted
    torch.save(older, tmp_path / "older.pt")
    with pytest.raises(SystemExit) as stop:
        fs.load_trained(str(tmp_path / "older.pt"), "--checkpoint")
    assert stop.value.code == 2
    torch.save(upgrade(older), tmp_path / "converted.pt")  # (cleanfive/convert_saved.py)
    assert fs.load_trained(str(tmp_path / "converted.pt"), "--checkpoint")[1] == "Moba5v5-v0"
    torch.save({**saved, "script": "cleanba_impala.py"}, tmp_path / "other.pt")
    with pytest.raises(SystemExit) as stop:
        fs.load_trained(str(tmp_path / "other.pt"), "--checkpoint")
    assert stop.value.code == 2


def test_surgery_on_a_checkpoint_then_training_on_v1(operated):
    result, tmp_path = operated
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    (check,) = [line for line in lines if line.startswith("surgery (lstm scale 0)")]
    deltas = re.search(r"max \|delta logits\| (\S+), max \|delta value\| (\S+);", check).groups()
    assert max(float(x) for x in deltas) <= TOL and "over 2 games" in check
    (pool_line,) = [line for line in lines if "in the opponent pool operated alike" in line]
    assert "surgery: 3 versions" in pool_line and float(pool_line.split("max |delta| ")[1]) <= TOL

    (run_dir,) = (tmp_path / "runs").glob("*__*__*")
    assert run_dir.name.startswith("Moba5v5-v1__five_surgery__1__")
    saved = torch.load(run_dir / "five_surgery.cleanfive_model", weights_only=True)
    model = saved["model"]
    assert model["input_index"].tolist() == [*range(14), *range(16, 181)]  # hero ids 3, 4 folded; v1 inputs added
    assert model["encoder.0.weight"].shape == (32 + 8, 181 - 2) and model["actor.weight"].shape == (28, 32)
    assert saved["args"]["env_id"] == "Moba5v5-v1" and saved["args"]["num_heroes"] == 3

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in ["surgery/max_delta_logits", "surgery/parity_score", "surgery/new_action_share", "charts/SPS",
                "charts/trueskill_mu", "losses/policy_loss", "league/pool_size"]:  # fmt: skip
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    # learning rate 0 for the first update, then the new actions come in: 0 % of games, then 100 % (anneal 1 update)
    assert [e.value for e in events.Scalars("charts/learning_rate")][0] == 0.0
    assert [e.value for e in events.Scalars("surgery/new_action_share")] == [0.0, 1.0]
    assert [e.value for e in events.Scalars("league/pool_size")] == [4, 5]  # the 3 operated versions, then 1 each
    check_run("five_surgery Moba5v5-v0 to v1", result.stdout, surgery_check=check)  # tests/golden/runs.json


def test_learning_rate_zero_leaves_every_parameter_unchanged(driven, v0_model):
    result, tmp_path = driven["lr0"]
    assert result.returncode == 0, result.stderr
    assert "surgery (lstm scale 0.01)" in result.stdout  # the only scale tried, at parity in drawn tiny games
    (path,) = tmp_path.glob("runs/*/five_surgery.cleanfive_model")
    model = torch.load(path, weights_only=True)["model"]
    trained = torch.load(v0_model, weights_only=True)["model"]
    for name in ("lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0"):
        gates, old_gates = model[name].reshape(4, 36, -1), trained[name].reshape(4, 32, -1)  # blocks i, f, g, o
        assert torch.equal(gates[:, :32, : old_gates.shape[2]], old_gates)
    assert torch.equal(model["encoder.0.weight"][:, :178], trained["encoder.0.weight"])
    assert torch.equal(model["actor.weight"][:27, :32], trained["actor.weight"])


@pytest.mark.parametrize("case", range(len(USER_ERRORS)), ids=[" ".join(f) for f, _ in USER_ERRORS])
def test_user_errors_exit_2_with_one_line(driven, case):
    result, _ = driven["error", case]
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and USER_ERRORS[case][1] in lines[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize(("flag", "content"), BAD_FILES)
def test_a_corrupt_or_foreign_file_exits_2(driven, flag, content):
    result, _ = driven[flag, content]
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and f"{flag} bad.pt" in lines[0], result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("flag", "content"), RELIABILITY_BAD_FILES)
def test_a_foreign_file_for_resume_or_eval_only_exits_2(tmp_path, flag, content):
    """Covered in the default run by test_reliability.py::test_bad_input_exits_2_with_one_line[five_surgery---resume
    another script's file] and [five_surgery---eval-only another script's file]."""
    bad_file(tmp_path, content)
    result = run(tmp_path, SCRIPT, flag, "bad.pt")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and f"{flag} bad.pt" in lines[0], result.stderr


@pytest.mark.slow
def test_resume_after_sigkill_ends_with_the_same_parameters(tmp_path, v0_model):
    """Covered in the default run by test_reliability.py::test_sigkill_then_resume_loses_no_update[five_surgery]
    (a killed and resumed surgery run ends bit-identical to an uninterrupted one); this one also checks that the
    resumed run ignores other flags and does not operate again."""
    flags = [*TINY, *SURGERY_TINY, "--env-id", "Moba5v5-v1", "--total-timesteps", "192", "--anneal-updates", "1"]
    flags += ["--checkpoint", str(v0_model), "--add-inputs", "--add-actions", "--widen-dense", "4", "--save-model"]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert run(tmp_path / "a", SCRIPT, *flags).returncode == 0
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), *flags, "--save-every", "1"],
        cwd=tmp_path / "b",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 240
    while not list(tmp_path.glob("b/runs/*/checkpoint.pt")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    (path,) = tmp_path.glob("b/runs/*/checkpoint.pt")
    checkpoint = torch.load(path, weights_only=True)
    k, g = checkpoint["iteration"], checkpoint["global_step"]
    assert k < 3 and g == k * 64 and len(checkpoint["past_agents"]) == 3 + k  # the operated pool, then 1 per update
    # other flags are ignored: the checkpoint's Args are used, and the network is not operated again
    result = run(tmp_path / "b", SCRIPT, "--resume", str(path), "--total-timesteps", "99999", "--widen-dense", "9")
    assert result.returncode == 0, result.stderr
    assert f"resumed from {path} at update {k} (global_step {g})" in result.stdout and "surgery (" not in result.stdout
    (uninterrupted,) = tmp_path.glob("a/runs/*/five_surgery.cleanfive_model")
    (resumed,) = tmp_path.glob("b/runs/*/five_surgery.cleanfive_model")
    want, got = (torch.load(p, weights_only=True)["model"] for p in (uninterrupted, resumed))
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)


@pytest.mark.slow
def test_absurd_learning_rate_stops_with_one_line_and_keeps_the_last_good_checkpoint(tmp_path, v0_model):
    """Covered in the default run by test_reliability.py::test_numerical_fault_stops_with_one_line_and_keeps_the_last_
    good_checkpoint[five_surgery] (the same --learning-rate 1e30 after an update at learning rate 0)."""
    # update 1 at learning rate 0 writes a checkpoint; update 2 at 1e30 makes the parameters infinite
    flags = [*TINY, *SURGERY_TINY, "--total-timesteps", "192", "--learning-rate", "1e30", "--save-every", "1"]
    result = run(tmp_path, SCRIPT, "--checkpoint", str(v0_model), "--add-inputs", "--add-actions", *flags)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    match = re.fullmatch(
        r"error: non-finite loss or parameters at update 2; stopped\. Last good checkpoint: (\S+)", lines[0]
    )
    checkpoint = torch.load(tmp_path / match.group(1), weights_only=True)
    assert checkpoint["iteration"] == 1 and all(v.isfinite().all() for v in checkpoint["model"].values())


@pytest.mark.slow
def test_eval_only_rates_a_saved_model_and_records_a_video(tmp_path, operated):
    """Covered in the default run by test_reliability.py::test_saved_model_plays_with_eval_only_and_records_a_video
    [five_surgery] (--eval-only on a saved surgery model with --capture-video); this one also reads the printed
    results and the video's path."""
    (model,) = operated[1].glob("runs/*/five_surgery.cleanfive_model")  # --eval-only takes this script's files
    flags = ["--eval-only", str(model), "--eval-games", "1", "--reference-games", "1", "--capture-video"]
    result = run(tmp_path, SCRIPT, *flags, "--references", "random", "push", "--no-cuda")
    assert result.returncode == 0, result.stderr
    assert "| `random` | " in result.stdout and "| `push` | " in result.stdout and "trueskill_mu=" in result.stdout
    assert "surgery" not in result.stdout and not list(tmp_path.glob("runs/*/*.cleanfive_model"))
    assert len(list(tmp_path.glob("videos/Moba5v5-v1__five_surgery__*/eval.gif"))) == 1


def test_world_versions_compare_as_numbers(fs):
    """--env-id must be the checkpoint's world at the same or a later version: "v10" is later than "v9" (as strings
    it is not), another world or a malformed version is neither."""
    assert fs.same_or_later("Moba5v5-v9", "Moba5v5-v10") and not fs.same_or_later("Moba5v5-v10", "Moba5v5-v9")
    assert fs.same_or_later("Moba5v5-v0", "Moba5v5-v0") and fs.same_or_later("Moba5v5-v0", "Moba5v5-v1")
    assert not fs.same_or_later("Moba5v5-v0", "ConnectFour-v1") and not fs.same_or_later("Moba5v5-v0", "Moba5v5-vx")
