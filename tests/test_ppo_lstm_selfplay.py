"""End-to-end smoke runs of cleanfive/ppo_lstm_selfplay.py in a subprocess, with tiny budgets."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

SCRIPT = Path(__file__).resolve().parents[1] / "cleanfive" / "ppo_lstm_selfplay.py"
TINY = [
    "--total-timesteps", "1536", "--num-envs", "8", "--num-steps", "32", "--bptt-len", "16",
    "--num-minibatches", "2", "--update-epochs", "1", "--pool-every", "1", "--eval-every", "2",
    "--eval-games", "4", "--reference-games", "16", "--hidden-size", "32", "--no-cuda",
]  # fmt: skip


def run(tmp_path, *flags):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("env_id", ["ConnectFour-v1", "TicTacToe-v1"])
def test_tiny_run_writes_cleanrl_metrics_and_trueskill(tmp_path, env_id):
    result = run(tmp_path, *TINY, "--env-id", env_id, "--save-model")
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith(f"{env_id}__ppo_lstm_selfplay__1__")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    for tag in [
        "charts/episodic_return",
        "charts/SPS",
        "charts/trueskill_mu",
        "charts/trueskill_sigma",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "league/pool_size",
        "eval/winrate_random",
    ]:
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    mu = [e.value for e in events.Scalars("charts/trueskill_mu")]
    assert len(mu) == 3 and all(abs(m) < 100 for m in mu)  # evaluations at iterations 2, 4 and the last (6)
    assert [e.value for e in events.Scalars("league/pool_size")] == [1, 2, 3, 4, 5, 6]
    saved = torch.load(run_dir / "ppo_lstm_selfplay.cleanfive_model", weights_only=False)
    assert saved["args"]["env_id"] == env_id and "actor.weight" in saved["model"]


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--env-id", "CartPole-v1"], "ConnectFour-v1"),
        (["--env-id", "NoSuchGame-v0"], "TicTacToe-v1"),
        (["--num-minibatches", "3"], "--num-minibatches"),
        (["--num-steps", "40"], "--bptt-len"),
    ],
)
def test_user_errors_exit_2_with_one_line(tmp_path, flags, says):
    result = run(tmp_path, *TINY, *flags)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.stderr
