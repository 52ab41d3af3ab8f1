"""The PPO maths that every PPO script carries its own copy of, against the papers' formulas written out one sample
at a time: the clipped surrogate and the clipped value loss (the four PPO scripts), CleanRL's GAE (the µRTS pair),
and the schedules and the discount from the horizon (the Five pair)."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PPO = ("ppo_lstm_selfplay", "five_surgery", "ppo_gridnet_masked", "ppo_action_guidance")
FIVE = ("ppo_lstm_selfplay", "five_surgery")
MICRORTS = ("ppo_gridnet_masked", "ppo_action_guidance")


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "cleanfive" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module", params=PPO)
def ppo(request):
    return load(request.param)


def samples(n=200, seed=0):
    rng = np.random.default_rng(seed)
    ratio = np.exp(rng.normal(0, 0.4, n))  # some inside [1 - eps, 1 + eps], most outside
    return rng.normal(size=n), ratio, rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)


@pytest.mark.parametrize("clip_coef", [0.1, 0.2])
def test_policy_loss_is_the_negated_clipped_surrogate(ppo, clip_coef):
    """L^CLIP = min(r A, clip(r, 1 - eps, 1 + eps) A) per sample (PPO, eq. 7); the scripts minimise its negation."""
    advantages, ratio, *_ = samples()
    got = ppo.policy_loss(torch.tensor(advantages), torch.tensor(ratio), clip_coef).numpy()
    want = [-min(r * a, min(max(r, 1 - clip_coef), 1 + clip_coef) * a) for a, r in zip(advantages, ratio, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the clip binds: a positive advantage gains nothing from a ratio above 1 + eps
    assert ppo.policy_loss(torch.tensor([1.0]), torch.tensor([2.0]), clip_coef).item() == pytest.approx(-1 - clip_coef)


@pytest.mark.parametrize("clip_vloss", [True, False])
def test_value_loss_is_half_the_squared_error_clipped_around_the_rollouts_values(ppo, clip_vloss):
    """0.5 max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2) per sample (PPO detail 9), or 0.5 (V - R)^2."""
    _, _, newvalue, values, returns = samples(seed=1)
    eps = 0.2
    got = ppo.value_loss(*(torch.tensor(x) for x in (newvalue, values, returns)), eps, clip_vloss).numpy()
    want = []
    for v, old, ret in zip(newvalue, values, returns, strict=True):
        clipped = old + min(max(v - old, -eps), eps)
        want.append(0.5 * (max((v - ret) ** 2, (clipped - ret) ** 2) if clip_vloss else (v - ret) ** 2))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert clip_vloss == (not np.allclose(got, 0.5 * (newvalue - returns) ** 2))  # the clip is live in the data


@pytest.mark.parametrize("name", MICRORTS)
def test_microrts_gae_is_the_discounted_sum_of_td_errors_within_a_game(name):
    """A_t = sum_l (gamma lambda)^l delta_{t+l}, delta_t = r_t + gamma V_{t+1} - V_t, cut where a game ends (GAE,
    eq. 16); dones[t] says that step t's observation starts a new game, so step t - 1 was the last of the old one."""
    script = load(name)
    rng = np.random.default_rng(2)
    T, E, gamma, lam = 9, 3, 0.9, 0.8
    rewards, values = rng.normal(size=(T, E)), rng.normal(size=(T, E))
    dones = (rng.random((T, E)) < 0.25).astype(float)
    next_value, next_done = rng.normal(size=E), np.array([0.0, 1.0, 0.0])
    got = script.gae(*(torch.tensor(x) for x in (rewards, values, dones, next_value, next_done)), gamma, lam)
    value_after = np.vstack([values[1:], next_value])  # V of the observation after step t
    ends_after = np.vstack([dones[1:], next_done])  # the game ended at step t
    want = np.zeros((T, E))
    for e in range(E):
        for t in range(T):
            for lag in range(T - t):
                s = t + lag
                delta = rewards[s, e] + gamma * value_after[s, e] * (1 - ends_after[s, e]) - values[s, e]
                want[t, e] += (gamma * lam) ** lag * delta
                if ends_after[s, e]:
                    break
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10)


@pytest.mark.parametrize("name", FIVE)
def test_schedules_anneal_linearly_from_the_first_update_to_the_last(name):
    """frac = 1 - (i - 1) / n: the start value at update 1, end + (start - end) / n at update n (CleanRL's learning-rate
    annealing), so team spirit goes 0.3 -> 1, the entropy coefficient and the bot share to their final values."""
    script = load(name)
    n = 8
    fracs = [1.0 - (i - 1.0) / n for i in range(1, n + 1)]
    tau = [script.anneal(0.3, 1.0, f) for f in fracs]
    assert tau[0] == pytest.approx(0.3) and tau[-1] == pytest.approx(1.0 - 0.7 / n)
    np.testing.assert_allclose(np.diff(tau), 0.7 / n)  # equal steps toward the end value
    assert script.anneal(2e-3, 0.0, fracs[-1]) == pytest.approx(2e-3 / n)  # the learning rate's last update
    assert script.anneal(0.5, 0.5, 0.37) == 0.5  # a constant schedule stays constant


@pytest.mark.parametrize("name", FIVE)
def test_discount_gives_the_horizon_in_game_seconds(name):
    """gamma = 1 - T / H, so 1 / (1 - gamma) steps span H seconds (OpenAI Five: a horizon of 360 s at 0.133 s a step
    is gamma 0.99963); Connect Four's 10-ply horizon at a ply a step is gamma 0.9."""
    script = load(name)
    assert script.discount(1.0, 10.0) == pytest.approx(0.9)
    five = script.discount(4 / 30, 360.0)
    assert five == pytest.approx(0.99963, abs=1e-5) and (4 / 30) / (1 - five) == pytest.approx(360.0)
    assert math.isclose(sum(0.9**k for k in range(10_000)), 10.0)  # the horizon as the discounted steps' sum
