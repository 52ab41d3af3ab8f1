"""Tests for cleanfive.trueskill_league against hand-computed TrueSkill, softmax, quality and speedup values."""

import json
import math
import os
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


# ---------------------------------------------------------------- environment and ranked rating


def test_environment_parameters():
    env = tl.make_trueskill()
    assert env.sigma == pytest.approx(25 / 3)
    assert env.beta == pytest.approx(25 / 6)
    assert env.tau == 0.0
    assert env.draw_probability == pytest.approx(0.02)
    assert (tl.SIGMA0, tl.BETA, tl.DRAW_PROBABILITY, tl.ETA) == (25 / 3, 25 / 6, 0.02, 0.01)
    assert trueskill.global_env().draw_probability == pytest.approx(0.10)  # global environment untouched


@pytest.mark.parametrize("outcome,score", [("win", 1.0), ("loss", 0.0), ("draw", 0.5)])
def test_one_vs_one_matches_closed_form(outcome, score):
    ref = trueskill.Rating(mu=7.0, sigma=2.5)
    ev = tl.ReferenceEvaluator({"random": trueskill.Rating(0.0, 1.0), "ref": ref}, start=trueskill.Rating(3.0, 6.0))
    new = ev.update("ref", score)
    mu, sigma = _closed_form(3.0, 6.0, 7.0, 2.5, outcome)
    assert new.mu == pytest.approx(mu, rel=1e-6)
    assert new.sigma == pytest.approx(sigma, rel=1e-6)
    assert ev.references["ref"] == ref and ev.references["ref"].sigma == 2.5  # reference stays fixed


def test_win_raises_mu_lowers_sigma_loss_lowers_mu():
    refs = {"random": trueskill.Rating(0.0, 1.0)}
    win = tl.ReferenceEvaluator(refs).update("random", 1)
    loss = tl.ReferenceEvaluator(refs).update("random", 0)
    assert win.mu > 0 and win.sigma < tl.SIGMA0
    assert loss.mu < 0 and loss.sigma < tl.SIGMA0
    assert refs["random"] == trueskill.Rating(0.0, 1.0)
    with pytest.raises(ValueError):
        tl.ReferenceEvaluator(refs).update("random", 0.7)


def test_update_many_is_sequential_updates():
    refs = {"random": trueskill.Rating(0.0, 2.0)}
    a = tl.ReferenceEvaluator(refs)
    a.update_many("random", [1, 0.5, 0, 1])
    b = tl.ReferenceEvaluator(refs)
    for s in [1, 0.5, 0, 1]:
        b.update("random", s)
    assert (a.rating.mu, a.rating.sigma) == (b.rating.mu, b.rating.sigma)


def test_free_for_all_four_players():
    players = [trueskill.Rating(25.0, 25 / 3)] * 4
    new = tl.rate_ranked(players, [0, 1, 2, 3])
    deltas = [n.mu - 25.0 for n in new]
    assert deltas[0] > 0 > deltas[3]
    assert deltas[0] > deltas[1] > deltas[2] > deltas[3]
    assert deltas[0] == pytest.approx(-deltas[3], rel=1e-3) and deltas[1] == pytest.approx(-deltas[2], rel=1e-3)
    tied = tl.rate_ranked(players, [0, 0, 1, 1])
    # trueskill caps its multi-team message passing at 10 sweeps: tied players differ by ~2.5e-4
    assert tied[0].mu == pytest.approx(tied[1].mu, abs=1e-3) and tied[2].mu == pytest.approx(tied[3].mu, abs=1e-3)
    assert tied[0].mu > 25.0 > tied[2].mu


def test_equal_ranks_are_a_draw():
    a, b = trueskill.Rating(30.0, 5.0), trueskill.Rating(20.0, 7.0)
    na, nb = tl.rate_ranked([a, b], [0, 0])
    mu, sigma = _closed_form(30.0, 5.0, 20.0, 7.0, "draw")
    assert na.mu == pytest.approx(mu, rel=1e-6) and na.sigma == pytest.approx(sigma, rel=1e-6)
    assert na.mu < 30.0 and nb.mu > 20.0  # the stronger player loses rating on a draw
    with pytest.raises(ValueError):
        tl.rate_ranked([a], [0])


# ---------------------------------------------------------------- reference pool


def test_shift_pins_anchor_and_keeps_differences():
    raw = {"random": trueskill.Rating(18.0, 3.0), "a": trueskill.Rating(25.0, 2.0), "b": trueskill.Rating(40.5, 1.0)}
    shifted = tl.shift_ratings(raw, "random")
    assert shifted["random"].mu == 0.0
    assert shifted["a"].mu == pytest.approx(7.0) and shifted["b"].mu == pytest.approx(22.5)
    for x in raw:
        assert shifted[x].sigma == raw[x].sigma
        for y in raw:
            assert shifted[x].mu - shifted[y].mu == pytest.approx(raw[x].mu - raw[y].mu)
    with pytest.raises(ValueError):
        tl.shift_ratings(raw, "missing")


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
    ev = tl.ReferenceEvaluator(refs, start=trueskill.Rating(5.0, 3.0))
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


def test_add_uses_max_quality_and_loss_changes_nothing():
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
    pool.record_game(1, 0.0)
    pool.record_game(2, 0.5)
    np.testing.assert_array_equal(pool.qualities, before)  # loss and draw: no update
    pool.record_game(2, 1.0)
    assert pool.qualities[2] == pytest.approx(0.4 - 0.01 / (3 * pool_p(before)[2]))


def pool_p(q):
    e = np.exp(q - q.max())
    return e / e.sum()


def test_sampling_frequencies_match_probabilities():
    pool = _pool([0.0, 1.0, -0.5])
    draws = pool.sample(np.random.default_rng(123), 200_000)
    freq = np.bincount(draws, minlength=3) / draws.size
    np.testing.assert_allclose(freq, pool.probabilities(), atol=0.005)
    with pytest.raises(ValueError):
        tl.OpponentPool().sample(np.random.default_rng(0), 1)


def test_assign_split():
    rng = np.random.default_rng(0)
    empty = tl.OpponentPool().assign(rng, 64)
    assert empty.shape == (64,) and (empty == -1).all()
    pool = _pool([0.0, 2.0, -1.0])
    out = pool.assign(rng, 64)
    assert out.dtype.kind == "i" and (out == -1).sum() == 51 and (out >= 0).sum() == 13  # round(12.8) = 13
    assert set(out[out >= 0].tolist()) <= {0, 1, 2}
    assert ((pool.assign(rng, 10) == -1).sum(), (pool.assign(rng, 10, past_fraction=0.5) >= 0).sum()) == (8, 5)
    many = np.concatenate([pool.assign(rng, 10) for _ in range(5000)])
    freq = np.bincount(many[many >= 0], minlength=3) / (many >= 0).sum()
    np.testing.assert_allclose(freq, pool.probabilities(), atol=0.01)


def test_pool_state_round_trip():
    pool = _pool([0.0, 1.0, -0.5])
    other = tl.OpponentPool(eta=0.5)
    other.load_state_dict(json.loads(json.dumps(pool.state_dict())))
    assert other.keys == pool.keys and other.eta == 0.01
    np.testing.assert_array_equal(other.qualities, pool.qualities)


# ---------------------------------------------------------------- speedup


def test_versions_to_reach_and_speedup():
    versions = list(range(0, 12))
    base = (versions, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 120])
    exp = (versions, [0, 10, 20, 40, 100, 90, 130, 140, 150, 160, 170, 180])
    assert tl.versions_to_reach(*base, 100) == 10.0
    assert tl.versions_to_reach(*exp, 100) == 4.0
    assert tl.speedup(base, exp, 100) == pytest.approx(2.5)
    assert tl.speedup(exp, base, 100) == pytest.approx(0.4)
    assert tl.versions_to_reach(*base, 500) == math.inf
    assert tl.speedup(base, exp, 130) == math.inf  # experiment reaches 130 at 6, baseline never
    assert tl.speedup(exp, base, 130) == 0.0  # baseline reaches it, experiment never
    assert math.isnan(tl.speedup(base, exp, 500))
    assert tl.speedup(base, ([0, 5], [10, 10]), 1) == math.inf  # experiment already there at version 0
    assert math.isnan(tl.speedup(base, exp, -1))  # both at version 0
    with pytest.raises(ValueError):
        tl.versions_to_reach([1, 2], [1.0], 0)


# ---------------------------------------------------------------- persistence


def _state():
    ev = tl.ReferenceEvaluator({"random": trueskill.Rating(0.0, 1.0), "a": trueskill.Rating(9.0, 1.5)})
    ev.update_many("a", [1, 0, 1])
    ev.finish_version(10)
    pool = _pool([0.0, 1.0, -0.5])
    return {"evaluator": ev.state_dict(), "pool": pool.state_dict()}, ev


def test_save_load_round_trip(tmp_path):
    state, ev = _state()
    path = tmp_path / "league.json"
    tl.save_league(path, state)
    loaded = tl.load_league(path)
    assert loaded == state
    again = tl.ReferenceEvaluator({"x": trueskill.Rating(0.0, 1.0)})
    again.load_state_dict(loaded["evaluator"])
    assert again.rating == ev.rating and again.references == ev.references and again.history == ev.history
    assert os.listdir(tmp_path) == ["league.json"]


@pytest.mark.parametrize("target", ["json.dump", "os.replace"])
def test_interrupted_write_keeps_previous_file(tmp_path, monkeypatch, target):
    path = tmp_path / "league.json"
    tl.save_league(path, {"old": 1})

    def broken_dump(obj, f, **kw):
        f.write('{"new": ')  # half a document reaches the temp file
        raise OSError("disk full")

    def broken_replace(src, dst):
        raise OSError("interrupted")

    if target == "json.dump":
        monkeypatch.setattr(tl.json, "dump", broken_dump)
    else:
        monkeypatch.setattr(tl.os, "replace", broken_replace)
    with pytest.raises(OSError):
        tl.save_league(path, {"new": 2})
    monkeypatch.undo()
    assert tl.load_league(path) == {"old": 1}
    assert os.listdir(tmp_path) == ["league.json"]


def test_load_missing_or_corrupt_raises(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(tl.LeagueStateError, match="nope.json"):
        tl.load_league(missing)
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"evaluator": {"ref')
    with pytest.raises(tl.LeagueStateError, match="corrupt.json"):
        tl.load_league(corrupt)
    not_object = tmp_path / "list.json"
    not_object.write_text("[1, 2]")
    with pytest.raises(tl.LeagueStateError, match="list.json"):
        tl.load_league(not_object)
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(tl.LeagueStateError, match="binary.json"):
        tl.load_league(binary)
