"""Tests for cleanfive.trueskill_league against hand-computed TrueSkill, softmax and quality values."""

import json
import math
from statistics import NormalDist

import numpy as np
import pytest
import trueskill

from cleanfive import trueskill_league as tl

# ---------------------------------------------------------------- closed-form two-player TrueSkill (no trueskill)


def _pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def _v_win(t: float, eps: float) -> float:
    return _pdf(t - eps) / _cdf(t - eps)


def _w_win(t: float, eps: float) -> float:
    v = _v_win(t, eps)
    return v * (v + t - eps)


def _v_draw(t: float, eps: float) -> float:
    return (_pdf(-eps - t) - _pdf(eps - t)) / (_cdf(eps - t) - _cdf(-eps - t))


def _w_draw(t: float, eps: float) -> float:
    den = _cdf(eps - t) - _cdf(-eps - t)
    return _v_draw(t, eps) ** 2 + ((eps - t) * _pdf(eps - t) + (eps + t) * _pdf(eps + t)) / den


def _closed_form(mu1, s1, mu2, s2, outcome):
    """Player 1's new (mu, sigma) after a game; outcome 'win', 'loss' or 'draw' for player 1."""
    beta = (25 / 3) / 2
    eps = NormalDist().inv_cdf((0.02 + 1) / 2) * math.sqrt(2) * beta
    c = math.sqrt(2 * beta**2 + s1**2 + s2**2)
    if outcome == "draw":
        t = mu1 - mu2
        v, w, sign = _v_draw(t / c, eps / c), _w_draw(t / c, eps / c), 1.0
    else:  # t is winner minus loser; the loser moves the other way
        sign = 1.0 if outcome == "win" else -1.0
        t = sign * (mu1 - mu2)
        v, w = _v_win(t / c, eps / c), _w_win(t / c, eps / c)
    return mu1 + sign * s1**2 / c * v, math.sqrt(s1**2 * (1 - s1**2 / c**2 * w))


# ---------------------------------------------------------------- environment and two-player rating


def test_environment_parameters():
    env = tl.TRUESKILL
    assert env.sigma == pytest.approx(25 / 3)
    assert env.beta == pytest.approx(25 / 6)
    assert env.tau == 0.0
    assert env.draw_probability == pytest.approx(0.02)
    assert (tl.SIGMA0, tl.BETA, tl.DRAW_PROBABILITY, tl.ETA) == (25 / 3, 25 / 6, 0.02, 0.01)
    assert trueskill.global_env().draw_probability == pytest.approx(0.10)  # global environment untouched


def _evaluator(refs, start=None):
    ev = tl.ReferenceEvaluator(refs)
    if start is not None:
        ev.rating = start
    return ev


@pytest.mark.parametrize("outcome,score", [("win", 1.0), ("loss", 0.0), ("draw", 0.5)])
def test_one_vs_one_matches_closed_form(outcome, score):
    ref = trueskill.Rating(mu=7.0, sigma=2.5)
    ev = _evaluator({"random": trueskill.Rating(0.0, 1.0), "ref": ref}, start=trueskill.Rating(3.0, 6.0))
    new = ev.update_many("ref", [score])
    mu, sigma = _closed_form(3.0, 6.0, 7.0, 2.5, outcome)
    assert new.mu == pytest.approx(mu, rel=1e-6)
    assert new.sigma == pytest.approx(sigma, rel=1e-6)
    assert ev.references["ref"] == ref and ev.references["ref"].sigma == 2.5  # reference stays fixed


def test_win_raises_mu_lowers_sigma_loss_lowers_mu():
    refs = {"random": trueskill.Rating(0.0, 1.0)}
    win = tl.ReferenceEvaluator(refs).update_many("random", [1])
    loss = tl.ReferenceEvaluator(refs).update_many("random", [0])
    assert win.mu > 0 and win.sigma < tl.SIGMA0
    assert loss.mu < 0 and loss.sigma < tl.SIGMA0
    assert refs["random"] == trueskill.Rating(0.0, 1.0)
    with pytest.raises(ValueError):
        tl.ReferenceEvaluator(refs).update_many("random", [0.7])


def test_update_many_is_sequential_closed_form_updates_against_a_fixed_reference():
    """Each game moves the policy by Herbrich et al.'s closed form (tau = 0) against the reference's fixed rating."""
    refs = {"random": trueskill.Rating(0.0, 2.0)}
    a = tl.ReferenceEvaluator(refs)
    a.update_many("random", [1, 0.5, 0, 1])
    mu, sigma = 0.0, tl.SIGMA0  # a fresh evaluator's rating
    for outcome in ["win", "draw", "loss", "win"]:
        mu, sigma = _closed_form(mu, sigma, 0.0, 2.0, outcome)
    assert (a.rating.mu, a.rating.sigma) == pytest.approx((mu, sigma), rel=1e-6)
    assert refs["random"] == trueskill.Rating(0.0, 2.0)  # the reference is not rated


def test_equal_scores_are_a_draw():
    a, b = trueskill.Rating(30.0, 5.0), trueskill.Rating(20.0, 7.0)
    na, nb = tl.rate_game(a, b, 0.5)
    mu, sigma = _closed_form(30.0, 5.0, 20.0, 7.0, "draw")
    assert na.mu == pytest.approx(mu, rel=1e-6) and na.sigma == pytest.approx(sigma, rel=1e-6)
    assert na.mu < 30.0 and nb.mu > 20.0  # the stronger player loses rating on a draw
    lb, la = tl.rate_game(b, a, 0.0)  # b's loss is a's win
    assert (la.mu, la.sigma) == pytest.approx(_closed_form(30.0, 5.0, 20.0, 7.0, "win"), rel=1e-6)
    assert (lb.mu, lb.sigma) == pytest.approx(_closed_form(20.0, 7.0, 30.0, 5.0, "loss"), rel=1e-6)
    with pytest.raises(ValueError):
        tl.rate_game(a, b, 2)


# ---------------------------------------------------------------- reference pool


def test_fit_shift_pins_anchor_and_keeps_differences():
    rng = np.random.default_rng(2)
    names = ["random", "a", "b"]
    results = [(str(x), str(y), float(rng.choice([0, 0.5, 1]))) for x, y in rng.choice(names, (40, 2))]
    results = [r for r in results if r[0] != r[1]]
    by_random, by_b = tl.fit_reference_ratings(results), tl.fit_reference_ratings(results, anchor="b")
    assert by_random["random"].mu == 0.0 and by_b["b"].mu == 0.0
    for x in names:
        assert by_random[x].sigma == pytest.approx(by_b[x].sigma, rel=1e-12)  # sigmas are not shifted
        for y in names:
            assert by_random[x].mu - by_random[y].mu == pytest.approx(by_b[x].mu - by_b[y].mu)
    with pytest.raises(ValueError):
        tl.fit_reference_ratings(results, anchor="missing")


def test_fit_reference_ratings_single_game_closed_form():
    fitted = tl.fit_reference_ratings([("scripted", "random", 1.0)], passes=3)
    mu_w, s_w = _closed_form(25.0, 25 / 3, 25.0, 25 / 3, "win")
    mu_l, s_l = _closed_form(25.0, 25 / 3, 25.0, 25 / 3, "loss")
    assert fitted["random"].mu == 0.0
    assert fitted["scripted"].mu == pytest.approx(mu_w - mu_l, rel=1e-6)
    assert fitted["scripted"].sigma == pytest.approx(s_w, rel=1e-6)
    assert fitted["random"].sigma == pytest.approx(s_l, rel=1e-6)


def test_fit_reference_ratings_orders_agents_and_is_deterministic():
    rng = np.random.default_rng(1)
    strength = {"random": 0.0, "weak": 1.0, "mid": 2.0, "strong": 3.0}
    names = list(strength)
    results = []
    for _ in range(300):
        a, b = rng.choice(names, size=2, replace=False)
        p = 1 / (1 + math.exp(-(strength[a] - strength[b]) * 2))
        results.append((str(a), str(b), float(rng.random() < p)))
    fitted = tl.fit_reference_ratings(results)
    assert fitted["random"].mu == 0.0
    assert 0 < fitted["weak"].mu < fitted["mid"].mu < fitted["strong"].mu
    again = tl.fit_reference_ratings(results)
    assert all(again[k] == fitted[k] for k in names)


def test_choose_within_window_or_nearest():
    refs = {k: trueskill.Rating(mu, 1.0) for k, mu in {"random": 0.0, "a": 8.0, "b": 15.0, "c": 30.0}.items()}
    ev = _evaluator(refs, start=trueskill.Rating(5.0, 3.0))
    assert sorted(ev.choose()) == ["a", "b", "random"]  # |0-5|=5, |8-5|=3, |15-5|=10 (edge included), |30-5|=25
    ev.rating = trueskill.Rating(4.5, 3.0)  # |15-4.5| = 10.5 > 10
    assert sorted(ev.choose()) == ["a", "random"]
    ev.rating = trueskill.Rating(50.0, 3.0)
    assert ev.choose() == ["c"]  # none within 10: the nearest
    assert tl.ReferenceEvaluator(refs).rating == trueskill.Rating(0.0, 25 / 3)


def test_finish_version_logs_and_resets_sigma():
    ev = tl.ReferenceEvaluator({"random": trueskill.Rating(0.0, 1.0)})
    ev.update_many("random", [1, 1])
    logged = ev.finish_version(10)
    assert ev.history == [{"version": 10, "mu": logged.mu, "sigma": logged.sigma}]
    assert ev.rating.mu == logged.mu and ev.rating.sigma == tl.SIGMA0


def test_evaluator_state_round_trip():
    ev = tl.ReferenceEvaluator({"random": trueskill.Rating(0.0, 1.0), "a": trueskill.Rating(9.0, 1.5)})
    ev.update_many("a", [1, 0, 1])
    ev.finish_version(10)
    ev.update_many("random", [1])
    again = tl.ReferenceEvaluator({"x": trueskill.Rating(0.0, 1.0)})
    again.load_state_dict(json.loads(json.dumps(ev.state_dict())))
    assert again.rating == ev.rating and again.references == ev.references and again.history == ev.history
    assert tl.rating_from_dict({"mu": 1.5, "sigma": 2.0}) == trueskill.Rating(1.5, 2.0)


# ---------------------------------------------------------------- opponent pool


def _pool(qualities):
    pool = tl.OpponentPool()
    for i in range(len(qualities)):
        pool.add(f"v{i}")
    pool.qualities = np.array(qualities, dtype=np.float64)
    return pool


def test_probabilities_softmax():
    pool = _pool([0.0, 1.0, -0.5])
    z = 1 + math.e + math.exp(-0.5)
    np.testing.assert_allclose(pool.probabilities(), [1 / z, math.e / z, math.exp(-0.5) / z], rtol=1e-12)
    big = _pool([1000.0, 1000.0, 999.0])  # naive exp would overflow
    z = 2 + math.exp(-1)
    np.testing.assert_allclose(big.probabilities(), [1 / z, 1 / z, math.exp(-1) / z], rtol=1e-12)
    assert tl.OpponentPool().probabilities().shape == (0,)


def test_record_win_quality_update():
    pool = _pool([0.0, 1.0, -0.5])
    p1 = math.e / (1 + math.e + math.exp(-0.5))
    pool.record_win(1)
    np.testing.assert_allclose(pool.qualities, [0.0, 1.0 - 0.01 / (3 * p1), -0.5], rtol=1e-12)
    assert pool.qualities[1] == pytest.approx(0.994697, abs=1e-6)  # 1 - 0.01 / (3 * 0.628530)


def test_add_uses_max_quality():
    pool = tl.OpponentPool()
    pool.add("v0")
    assert pool.qualities.tolist() == [0.0]
    pool.qualities[0] = -0.3
    pool.add("v10")
    pool.qualities[1] = 0.4
    pool.add("v20")
    assert pool.keys == ["v0", "v10", "v20"] and pool.qualities.tolist() == [-0.3, 0.4, 0.4]
    with pytest.raises(ValueError):
        pool.add("v10")
    before = pool.qualities.copy()
    pool.record_win(2)
    e = np.exp(before - before.max())
    assert pool.qualities[2] == pytest.approx(0.4 - 0.01 / (3 * (e / e.sum())[2]))


def test_sampling_frequencies_match_probabilities():
    pool = _pool([0.0, 1.0, -0.5])
    draws = pool.sample(np.random.default_rng(123), 200_000)
    freq = np.bincount(draws, minlength=3) / draws.size
    np.testing.assert_allclose(freq, pool.probabilities(), atol=0.005)
    with pytest.raises(ValueError):
        tl.OpponentPool().sample(np.random.default_rng(0), 1)


def test_pool_state_round_trip():
    pool = _pool([0.0, 1.0, -0.5])
    other = tl.OpponentPool(eta=0.5)
    other.load_state_dict(json.loads(json.dumps(pool.state_dict())))
    assert other.keys == pool.keys and other.eta == 0.01
    np.testing.assert_array_equal(other.qualities, pool.qualities)


def test_record_game_is_the_quality_update_on_a_win_only():
    """Quality sampling: record_game(i, 1) is record_win(i); a draw or a loss changes nothing (Appendix N)."""
    pool, other = _pool([0.0, 1.0, -0.5]), _pool([0.0, 1.0, -0.5])
    pool.record_game(1, 1.0)
    other.record_win(1)
    np.testing.assert_array_equal(pool.qualities, other.qualities)
    pool.record_game(0, 0.5)
    pool.record_game(2, 0.0)
    np.testing.assert_array_equal(pool.qualities, other.qualities)


def test_pfsp_probabilities_follow_decayed_win_rates():
    """PFSP (AlphaStar's "squared" weighting): p_i = (1 - x_i)^2 / sum_j (1 - x_j)^2, x_i the score against member i
    with every count decayed by 0.99 per game against i, recomputed here game by game; 0.5 before a member's first
    game; uniform when the agent beats every member always."""
    pool = tl.OpponentPool(sampling="pfsp")
    for key in ("v0", "v1", "v2"):
        pool.add(key)
    np.testing.assert_allclose(pool.probabilities(), [1 / 3] * 3)  # no game yet: x = 0.5 each
    games = [(0, 1.0), (0, 1.0), (1, 0.0), (0, 0.5), (1, 1.0), (0, 1.0)]
    for index, score in games:
        pool.record_game(index, score)
    x = []
    for member in range(3):
        scores = [score for index, score in games if index == member]
        weights = [0.99 ** (len(scores) - 1 - n) for n in range(len(scores))]  # the latest game weighs 1
        x.append(sum(w * v for w, v in zip(weights, scores, strict=True)) / sum(weights) if scores else 0.5)
    f = (1 - np.array(x)) ** 2
    np.testing.assert_allclose(pool.win_rates(), x, rtol=1e-12)
    np.testing.assert_allclose(pool.probabilities(), f / f.sum(), rtol=1e-12)
    assert pool.qualities.tolist() == [0.0, 0.0, 0.0]  # PFSP leaves the qualities alone
    draws = pool.sample(np.random.default_rng(1), 100_000)
    np.testing.assert_allclose(np.bincount(draws, minlength=3) / draws.size, f / f.sum(), atol=0.005)
    for index in range(3):
        pool.record_game(index, 1.0)
    pool.scores = pool.games.copy()  # the agent won every game against every member
    np.testing.assert_allclose(pool.probabilities(), [1 / 3] * 3)
    with pytest.raises(ValueError):
        tl.OpponentPool(sampling="best")


def test_pfsp_pool_state_round_trip_and_older_files():
    """The PFSP counts and the sampling travel in state_dict; a file from before PFSP loads as quality sampling."""
    pool = tl.OpponentPool(sampling="pfsp")
    pool.add("v0")
    pool.add("v1")
    pool.record_game(1, 0.5)
    other = tl.OpponentPool()
    other.load_state_dict(json.loads(json.dumps(pool.state_dict())))
    assert other.sampling == "pfsp" and other.games.tolist() == [0.0, 1.0] and other.scores.tolist() == [0.0, 0.5]
    np.testing.assert_array_equal(other.probabilities(), pool.probabilities())
    old = {"eta": 0.01, "keys": ["v0"], "qualities": [0.0]}
    other.load_state_dict(old)
    assert other.sampling == "quality" and other.games.tolist() == [0.0] and other.probabilities().tolist() == [1.0]


def test_free_for_all_four_players():
    """Neural MMO's tournaments rate ranked outcomes of more than two parties."""
    players = [trueskill.Rating(25.0, 25 / 3)] * 4
    new = tl.rate_ranked(players, [0, 1, 2, 3])
    deltas = [n.mu - 25.0 for n in new]
    assert deltas[0] > deltas[1] > deltas[2] > deltas[3] and deltas[0] > 0 > deltas[3]
    assert deltas[0] == pytest.approx(-deltas[3], rel=1e-3) and deltas[1] == pytest.approx(-deltas[2], rel=1e-3)
    tied = tl.rate_ranked(players, [0, 0, 1, 1])
    # trueskill caps its multi-team message passing at 10 sweeps: tied players differ by ~2.5e-4
    assert tied[0].mu == pytest.approx(tied[1].mu, abs=1e-3) and tied[2].mu == pytest.approx(tied[3].mu, abs=1e-3)
    assert tied[0].mu > 25.0 > tied[2].mu
    with pytest.raises(ValueError):
        tl.rate_ranked(players[:1], [0])
