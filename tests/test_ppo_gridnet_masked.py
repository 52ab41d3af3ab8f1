"""cleanfive/ppo_gridnet_masked.py: the masked Gridnet distribution against direct computation, the invalid-action
statistics, the network, and (in one driver process, one JVM) smoke runs, --eval-only and user errors."""

import hashlib
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from driver import drive
from golden import check_run
from needs import needs_microrts
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from cleanfive.envs.microrts import ACTION_DIMS, MASK_SIZE, NUM_PLANES
from cleanfive.ppo_gridnet_masked import (
    MASK_VALUE,
    Agent,
    action_stats,
    gridnet_distribution,
    num_stages,
    transposed_conv_at,
)

SCRIPT = Path(__file__).resolve().parents[1] / "cleanfive" / "ppo_gridnet_masked.py"
OFFSETS = np.cumsum((0,) + ACTION_DIMS[:-1])


def random_case(seed, batch=3, cells=5):
    """Random logits and a random mask in which every component of a cell has >= 1 legal entry, except that cell
    0 of every batch row is fully masked (no available unit) and cell 1 cannot produce (its produce direction
    and type components have no legal entry, as for a unit without the resources to build)."""
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, cells, MASK_SIZE, generator=g, dtype=torch.float64)
    mask = torch.rand(batch, cells, MASK_SIZE, generator=g) < 0.5
    for o, d in zip(OFFSETS, ACTION_DIMS, strict=True):
        pick = torch.randint(d, (batch, cells), generator=g)
        mask[..., o : o + d].scatter_(-1, pick.unsqueeze(-1), True)
    mask[:, 0] = False
    mask[:, 1, OFFSETS[4] : OFFSETS[6]] = False
    return logits, mask


def distribution(logits, mask, sample_masked, score_masked, action=None):
    """gridnet_distribution at the cells that act, selected and summed back per batch row as the Agent does (every
    cell acts unless sampling masked): logits, mask (B, C, 78) -> action (B, C, 7), log-prob and entropy (B,)."""
    cells = mask.any(-1) if sample_masked else torch.ones_like(mask[..., 0])
    b, c = cells.nonzero(as_tuple=True)
    acted = None if action is None else action[b, c]
    acted, logprob, entropy = gridnet_distribution(logits[b, c], mask[b, c], sample_masked, score_masked, acted)
    action = torch.zeros_like(mask[..., :7], dtype=torch.long).index_put((b, c), acted) if action is None else action
    zeros = logits.new_zeros(logits.shape[0])
    return action, zeros.index_add(0, b, logprob), zeros.index_add(0, b, entropy)


def direct(logits, mask, action, masked):
    """Log-prob and entropy written out with Python loops: softmax over legal entries (or all), summed."""
    logprob = np.zeros(logits.shape[0])
    entropy = np.zeros(logits.shape[0])
    for b in range(logits.shape[0]):
        for c in range(logits.shape[1]):
            if not mask[b, c].any():  # no available unit: the cell issues no action
                continue
            for i, (o, d) in enumerate(zip(OFFSETS, ACTION_DIMS, strict=True)):
                lg, m = logits[b, c, o : o + d].numpy(), mask[b, c, o : o + d].numpy()
                keep = m if masked else np.ones(d, dtype=bool)
                if not keep.any():  # a component without legal entries: uniform, constant, no entropy
                    logprob[b] -= math.log(d)
                    continue
                z = np.exp(lg[keep]).sum()
                logprob[b] += lg[action[b, c, i]] - math.log(z)
                p = np.exp(lg[keep]) / z
                entropy[b] -= (p * np.log(p)).sum()
    return logprob, entropy


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_masked_distribution_matches_direct_computation(seed):
    logits, mask = random_case(seed)
    action, logprob, entropy = distribution(logits, mask, True, True)
    legal = mask.gather(-1, action + torch.as_tensor(OFFSETS))
    has_legal = torch.stack([m.any(-1) for m in mask.split(ACTION_DIMS, -1)], -1)
    assert legal[has_legal].all(), "a masked sample picked an illegal entry"
    assert (action[:, 0] == 0).all(), "a cell without an available unit must issue NOOP"
    want_logprob, want_entropy = direct(logits, mask, action, masked=True)
    np.testing.assert_allclose(logprob.numpy(), want_logprob, rtol=1e-9)
    np.testing.assert_allclose(entropy.numpy(), want_entropy, rtol=1e-9)
    # scoring given actions reproduces the sampled log-prob
    _, logprob2, _ = distribution(logits, mask, True, True, action)
    np.testing.assert_allclose(logprob2.numpy(), logprob.numpy())


@pytest.mark.parametrize("seed", [0, 1])
def test_naive_and_unmasked_distributions_use_all_entries(seed):
    logits, mask = random_case(seed)
    action, logprob, entropy = distribution(logits, mask, True, False)  # naive: sample masked
    assert mask.gather(-1, action + torch.as_tensor(OFFSETS))[:, 2:].all()
    want_logprob, want_entropy = direct(logits, mask, action, masked=False)
    np.testing.assert_allclose(logprob.numpy(), want_logprob, rtol=1e-9)
    np.testing.assert_allclose(entropy.numpy(), want_entropy, rtol=1e-9)
    # penalty: no mask at all, every cell counts (cell 0 included)
    action, logprob, entropy = distribution(logits, mask, False, False)
    want_logprob, want_entropy = direct(logits, torch.ones_like(mask), action, masked=False)
    np.testing.assert_allclose(logprob.numpy(), want_logprob, rtol=1e-9)
    np.testing.assert_allclose(entropy.numpy(), want_entropy, rtol=1e-9)


def test_masked_logits_get_exactly_zero_gradient_and_naive_ones_do_not():
    logits, mask = random_case(3)
    action, _, _ = distribution(logits, mask, True, True)
    grads = {}
    for name, score_masked in [("masking", True), ("naive", False)]:
        x = logits.clone().requires_grad_(True)
        _, logprob, entropy = distribution(x, mask, True, score_masked, action)
        (logprob.sum() + 0.01 * entropy.sum()).backward()
        grads[name] = x.grad
    available = mask.any(-1, keepdim=True)
    illegal = ~mask & available  # illegal entries of cells that do act
    assert (grads["masking"][~mask] == 0).all()
    assert (grads["masking"][mask] != 0).any()
    assert (grads["naive"][illegal] != 0).all()
    assert (grads["naive"][:, 0] == 0).all()  # the cell without a unit is left out in both


def test_masked_value_is_large_negative_and_sampling_never_picks_it():
    assert MASK_VALUE <= -1e8
    logits = torch.zeros(1, 1, MASK_SIZE)
    logits[..., 1:6] = 50.0  # huge preference for illegal action types
    mask = torch.zeros(1, 1, MASK_SIZE, dtype=torch.bool)
    mask[..., 0] = True
    for o in OFFSETS[1:]:
        mask[..., o] = True
    for _ in range(20):
        action, _, entropy = distribution(logits, mask, True, True)
        assert action[0, 0, 0] == 0
    assert entropy.item() == 0.0  # a single legal entry per component: no entropy


def one_cell_obs(planes):
    obs = torch.zeros(1, 1, 1, NUM_PLANES)
    obs[0, 0, 0, planes] = 1
    return obs


def test_action_stats_gridnet_analogues():
    mask_idle = torch.zeros(1, 1, MASK_SIZE, dtype=torch.bool)
    mask_idle[..., [0, 1, 6, 7]] = True  # NOOP or move north / east
    busy = torch.zeros(1, 1, MASK_SIZE, dtype=torch.bool)
    move_south = torch.tensor([[[1, 2, 0, 0, 0, 0, 0]]])
    move_north = torch.tensor([[[1, 0, 0, 0, 0, 0, 0]]])
    harvest = torch.tensor([[[2, 0, 0, 0, 0, 0, 0]]])
    noop = torch.zeros(1, 1, 7, dtype=torch.long)
    empty, own_worker, enemy, resource = [10, 13], [11, 17], [12, 17], [10, 14]
    cases = [
        (empty, busy, harvest, [1, 0, 0, 0]),
        (own_worker, busy, harvest, [0, 1, 0, 0]),
        (enemy, busy, harvest, [0, 0, 1, 0]),
        (resource, busy, harvest, [0, 0, 1, 0]),
        (own_worker, mask_idle, move_south, [0, 0, 0, 1]),  # legal type, illegal direction
        (own_worker, mask_idle, harvest, [0, 0, 0, 1]),  # illegal type
        (own_worker, mask_idle, move_north, [0, 0, 0, 0]),
        (own_worker, mask_idle, noop, [0, 0, 0, 0]),
        (empty, busy, noop, [0, 0, 0, 0]),
    ]
    for planes, mask, action, want in cases:
        got = action_stats(one_cell_obs(planes), mask, action)
        assert got.tolist() == [want], (planes, action.tolist(), got.tolist())


@pytest.mark.parametrize(("size", "stages"), [((16, 16), 4), ((4, 4), 2), ((10, 10), 1), ((24, 24), 3), ((9, 8), 0)])
def test_encoder_decoder_stages_and_shapes(size, stages):
    assert num_stages(*size) == stages
    if stages:
        h, w = size
        agent = Agent(h, w)
        obs = torch.zeros(2, h, w, NUM_PLANES)
        mask = torch.ones(2, h * w, MASK_SIZE, dtype=torch.bool)
        action, logprob, entropy, value = agent.get_action_and_value(obs, mask, True, True)
        assert action.shape == (2, h * w, 7) and logprob.shape == entropy.shape == (2,) and value.shape == (2, 1)


@pytest.mark.parametrize("size", [(16, 16), (4, 4), (8, 6)])
def test_logits_at_the_acting_cells_match_the_whole_transposed_conv(size):
    h, w = size
    torch.manual_seed(0)
    agent = Agent(h, w)
    torch.nn.init.normal_(agent.actor[-1].weight)  # logits of order 1, not 0.01
    obs = (torch.rand(3, h, w, NUM_PLANES) < 0.3).float()
    features = agent.actor[:-1](agent.encoder(obs.permute(0, 3, 1, 2)))
    full = agent.actor[-1](features).permute(0, 2, 3, 1)  # (B, H, W, 78)
    b, y, x = (i.flatten() for i in torch.meshgrid(torch.arange(3), torch.arange(h), torch.arange(w), indexing="ij"))
    torch.testing.assert_close(transposed_conv_at(agent.actor[-1], features, b, y, x), full[b, y, x])
    # the agent scores the sampled actions as the distribution does on the whole logits
    mask = (torch.rand(3, h * w, MASK_SIZE) < 0.5) & (torch.rand(3, h * w, 1) < 0.3)
    for sample_masked, score_masked in [(True, True), (True, False), (False, False)]:
        action, logprob, entropy, _ = agent.get_action_and_value(obs, mask, sample_masked, score_masked)
        want = distribution(full.reshape(3, h * w, MASK_SIZE), mask, sample_masked, score_masked, action)
        torch.testing.assert_close((logprob, entropy), want[1:])
        if sample_masked:
            assert (action[~mask.any(-1)] == 0).all(), "a cell without an available unit must issue NOOP"


needs_java = needs_microrts
TINY = [
    "--map-path", "maps/4x4/basesWorkers4x4.xml", "--reward-weight", "0", "1", "0", "0", "0", "0",
    "--num-selfplay-envs", "2", "--num-bot-envs", "2", "--bots", "passiveAI", "--max-steps", "100",
    "--total-timesteps", "1024", "--num-steps", "64", "--update-epochs", "1", "--eval-episodes", "2",
    "--eval-games", "1", "--eval-bots", "randomAI", "passiveAI", "--league-games", "1", "--no-cuda",
]  # fmt: skip


def run(tmp_path, *flags):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *flags], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def scalar_tags_and_summary(tmp_path, result):
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("basesWorkers4x4__ppo_gridnet_masked__1__")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    lengths = [e.value for e in events.Scalars("charts/episodic_length")]
    assert len(lengths) >= 4 and max(lengths) <= 100
    (summary,) = [line for line in result.stdout.splitlines() if line.startswith("summary ")]
    fields = dict(kv.split("=") for kv in summary.split()[1:])
    assert {"r_episode", "a_null", "a_busy", "a_owner", "invalid", "t_solve", "t_first", "SPS"} <= fields.keys()
    return run_dir, set(events.Tags()["scalars"]), {k: v for k, v in fields.items() if k != "strategy"}


USER_ERRORS = [
    (["--invalid-penalty", "-0.1"], "--strategy penalty"),
    (["--strategy", "penalty"], "--invalid-penalty"),
    (["--strategy", "penalty", "--invalid-penalty", "0.5"], "<= 0"),
    (["--num-minibatches", "3"], "--num-minibatches"),
    # issue 39's fuzz: a minibatch of one sample has no standard deviation to normalise its advantage by (was NaN)
    (["--num-minibatches", "256"], "--norm-adv needs minibatches of 2 or more"),
    (["--map-path", "maps/nowhere.xml"], "not found"),
    (["--map-path", "maps/NoWhereToRun9x8.xml"], "even sides"),
    (["--bots", "noSuchBot"], "coacAI"),
    (["--eval-bots", "noSuchBot"], "coacAI"),
    (["--num-selfplay-envs", "3"], "even"),
    (["--clip-coef", "0"], "--clip-coef"),
    (["--gae-lambda", "1.5"], "--gae-lambda"),
    (["--num-selfplay-envs", "0", "--num-bot-envs", "0"], "at least one env"),
]
# the smoke runs (then --eval-only on the masking run's model), each in a folder of its own
RUNS = {
    "masking": [*TINY, "--save-model"],
    "eval_only": [*TINY, "--eval-only", "GLOB:../masking/runs/*/ppo_gridnet_masked.cleanfive_model"],
    "penalty": [*TINY, "--strategy", "penalty", "--invalid-penalty", "-0.1", "--eval-games", "0"],
}


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    """Every run and user error of this module in one driver process: {name: (CompletedProcess, folder)}, with the
    user errors as {("error", index): ...}."""
    root = tmp_path_factory.mktemp("driven")
    cases = {name: (root / name, flags) for name, flags in RUNS.items()}
    cases |= {("error", i): (root / "errors", TINY + flags) for i, (flags, _) in enumerate(USER_ERRORS)}
    return drive(SCRIPT, cases)


@needs_java
def test_tiny_masking_run_metrics_league_save_and_eval_mode(driven):
    result, tmp_path = driven["masking"]
    run_dir, tags, fields = scalar_tags_and_summary(tmp_path, result)
    for tag in [
        "charts/episodic_return",
        "charts/raw_resource",
        "charts/SPS",
        "invalid/a_null",
        "losses/policy_loss",
        "losses/value_loss",
        "losses/entropy",
        "losses/approx_kl",
        "eval/return_mask",
        "eval/a_null_nomask",
        "league/trueskill_mu",
        "league/winrate_randomAI",
    ]:
        assert tag in tags, f"{tag} missing from {sorted(tags)}"
    assert float(fields["a_null"]) == float(fields["invalid"]) == float(fields["eval_mask_invalid"]) == 0
    assert float(fields["eval_nomask_a_null"]) > 0  # without its mask the policy acts on empty cells
    assert sum(line.startswith("league bot=") for line in result.stdout.splitlines()) == 2
    saved = torch.load(run_dir / "ppo_gridnet_masked.cleanfive_model", weights_only=True)
    assert saved["args"]["strategy"] == "masking" and "critic.3.weight" in saved["model"]
    digest = hashlib.sha256()  # the last line: params_sha256 of the final parameters, equal to the saved model's
    for key, value in saved["model"].items():
        digest.update(key.encode())
        digest.update(value.numpy().tobytes())
    assert result.stdout.splitlines()[-1] == f"params_sha256={digest.hexdigest()}"
    check_run("ppo_gridnet_masked masking", result.stdout)  # tests/golden/runs.json
    # evaluation mode: reload the model and only evaluate
    result, _ = driven["eval_only"]
    assert result.returncode == 0, result.stderr
    assert "summary " in result.stdout and "update " not in result.stdout and "league bot=" in result.stdout


@needs_java
def test_tiny_penalty_run_counts_invalid_actions(driven):
    result, tmp_path = driven["penalty"]
    _, tags, fields = scalar_tags_and_summary(tmp_path, result)
    assert "invalid/invalid" in tags and not any(t.startswith("league/") for t in tags)
    assert float(fields["invalid"]) > 0 and float(fields["a_null"]) > 0


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
