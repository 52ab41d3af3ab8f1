"""Rules of the built-in lane game (cleanfive/envs/moba.py), checked on situations built by setting its state."""

import copy
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cleanfive.envs import moba
from cleanfive.envs.moba import (
    ATTACK0,
    BUILDING_POS,
    CREEP_GOLD,
    CREEP_XP,
    DEFAULT_SCORE_WEIGHTS,
    HERO_RANGE,
    MOBA_ENV_IDS,
    NOOP,
    NUM_TOWERS,
    OBS_LAYOUT,
    SCORE_NAMES,
    TOWER_GOLD,
    MobaTeamEnv,
    bot_actions,
    make_moba,
)
from cleanfive.envs.teams import play_bots

S = {name: i for i, name in enumerate(SCORE_NAMES)}
ENEMY_CREEP0, ENEMY_BUILDING0, DENY0 = ATTACK0 + 5, ATTACK0 + 10, ATTACK0 + 13  # first slot of each attack kind
QUIET = (12.0, 20.0)  # a spot in the jungle out of every tower's range


def scenario(num_heroes: int = 1, version: int = 0) -> MobaTeamEnv:
    """A one-env game at step 5: no creeps on the map, and none spawn in the next step (waves come at t % 60 == 1)."""
    env = MobaTeamEnv(1, seed=0, num_heroes=num_heroes, version=version)
    env.reset()
    env.t[:] = 5
    return env


def put(env: MobaTeamEnv, side: int, unit: int, xy: tuple[float, float], hp: float | None = None) -> None:
    """Place unit ``unit`` of ``side`` (alive) at ``xy``, optionally with ``hp``."""
    env.x[0, side, unit], env.y[0, side, unit] = xy
    env.alive[0, side, unit] = True
    if hp is not None:
        env.hp[0, side, unit] = hp


def creep(env: MobaTeamEnv, side: int, xy: tuple[float, float], hp: float, lane_s: float | None = None) -> int:
    """Make the first creep slot of ``side`` a creep at ``xy`` (on lane 0 at ``lane_s`` if given); returns its slot."""
    j = env.creeps.start
    env.max_hp[0, side, j], env.damage[0, side, j] = moba.CREEP_HP, moba.CREEP_DAMAGE
    if lane_s is not None:
        env.creep_s[0, side, 0] = lane_s
        xy = tuple(float(v) for v in moba._lane_point(np.array(0), np.array(lane_s, dtype=np.float32)))
    put(env, side, j, xy, hp)
    return j


def kill(env: MobaTeamEnv, side: int, unit: int) -> None:
    env.alive[0, side, unit], env.hp[0, side, unit] = False, 0.0


def act(env: MobaTeamEnv, a0: int = NOOP, a1: int = NOOP):
    """Refresh the observation after state edits, then step with hero 0's actions of each side (others no-op)."""
    env._observe()
    actions = np.zeros((1, 2, env.num_heroes), dtype=np.int64)
    actions[0, 0, 0], actions[0, 1, 0] = a0, a1
    return env.step(actions)


def test_api_shapes_and_ids():
    for env_id, version in zip(MOBA_ENV_IDS, (0, 1), strict=True):
        for n in (1, 3, 5):
            env = make_moba(env_id, 3, seed=0, num_heroes=n)
            obs, info = env.reset()
            assert env.version == version and env.num_sides == 2 and env.num_heroes == n
            assert obs.shape == (3, 2, n, *env.obs_shape) and obs.dtype == np.float32
            assert info["action_mask"].shape == (3, 2, n, env.num_actions)
            obs, scores, done, info = env.step(np.zeros((3, 2, n), dtype=np.int64))
            assert scores.shape == (3, 2, n, len(env.score_names)) and scores.dtype == np.float32
            assert done.shape == (3,) and info["outcome"].shape == (3, 2) and info["time"].shape == (3,)
            assert info["acting"].all() and np.allclose(info["time"], 0.5)
    assert make_moba("Moba5v5-v1", 1, 0).num_actions == make_moba("Moba5v5-v0", 1, 0).num_actions + 1
    assert set(DEFAULT_SCORE_WEIGHTS) == set(SCORE_NAMES)
    assert OBS_LAYOUT["v1_extra"][1] == make_moba("Moba5v5-v1", 1, 0).obs_shape[0]
    with pytest.raises(ValueError):
        make_moba("Moba9v9-v0", 1, 0)
    with pytest.raises(ValueError):
        MobaTeamEnv(1, 0, num_heroes=4)


def test_last_hit_pays_gold_and_xp():
    for action in (ENEMY_CREEP0, NOOP, 8):  # attack it; the controls: no-op, and a move (SE) never hits
        env = scenario()
        put(env, 0, 0, QUIET)
        j = creep(env, 1, (QUIET[0], QUIET[1] + 2.5), hp=10.0)  # in the hero's range, out of the creep's
        _, scores, _, _ = act(env, action)
        hero = scores[0, 0, 0]
        if action == ENEMY_CREEP0:
            assert not env.alive[0, 1, j]
            assert hero[S["last_hits"]] == 1 and hero[S["gold"]] == CREEP_GOLD and hero[S["xp"]] == CREEP_XP
            assert env.gold[0, 0, 0] == CREEP_GOLD
        else:
            assert env.alive[0, 1, j] and env.hp[0, 1, j] == 10.0
            assert hero[S["last_hits"]] == 0 and hero[S["gold"]] == 0 and hero[S["xp"]] == 0


def test_creep_killed_by_creeps_shares_xp_but_no_gold():
    env = scenario(num_heroes=3)
    put(env, 0, 0, QUIET)
    put(env, 0, 1, (QUIET[0] + 3.0, QUIET[1]))
    j = creep(env, 1, (QUIET[0], QUIET[1] + 4.0), hp=1.0)
    creep(env, 0, (QUIET[0], QUIET[1] + 5.5), hp=100.0)  # its own creep slot kills the enemy creep
    _, scores, _, _ = act(env)
    assert not env.alive[0, 1, j]
    np.testing.assert_allclose(scores[0, 0, :2, S["xp"]], CREEP_XP / 2)  # two heroes near: split
    assert scores[0, 0, 2, S["xp"]] == 0 and (scores[..., S["gold"]] == 0).all()
    assert (scores[..., S["last_hits"]] == 0).all()


def test_deny_pays_nothing_to_the_enemy():
    for deny in (True, False):
        env = scenario()
        put(env, 0, 0, QUIET)
        j = creep(env, 0, (QUIET[0], QUIET[1] + 2.5), hp=10.0)  # below half HP: deniable
        put(env, 1, 0, (QUIET[0], QUIET[1] + 5.0))  # within XP and attack range of the creep
        _, scores, _, _ = act(env, DENY0 if deny else NOOP, NOOP if deny else ENEMY_CREEP0)
        assert not env.alive[0, 0, j]
        if deny:
            assert scores[0, 0, 0, S["denies"]] == 1 and scores[0, 0, 0, S["gold"]] == 0
            assert (scores[0, 1, 0, [S["xp"], S["gold"], S["last_hits"]]] == 0).all()  # nothing for the enemy
        else:  # the control: the enemy last-hits it and is paid
            assert scores[0, 1, 0, S["last_hits"]] == 1 and scores[0, 1, 0, S["xp"]] == CREEP_XP
    env = scenario()
    put(env, 0, 0, QUIET)
    creep(env, 0, (QUIET[0], QUIET[1] + 2.5), hp=100.0)  # above half HP
    env._observe()
    assert not env._mask[0, 0, 0, DENY0]


def test_towers_take_damage_fall_and_pay_the_attacking_team():
    env = scenario(num_heroes=3)
    n = env.num_heroes
    tower = n + 0  # side 1's outer tower of the top lane
    tx, ty = BUILDING_POS[1, 0]
    put(env, 0, 0, (tx, ty - 3.0))
    env.hp[0, 1, tower] = 10.0
    env._observe()
    assert env._slot_unit[0, 0, 0, 10] == env.units + tower  # the nearest enemy building is that tower
    _, scores, _, _ = act(env, ENEMY_BUILDING0)
    assert not env.alive[0, 1, tower]
    np.testing.assert_allclose(scores[0, 0, :, S["tower1"]], 2 / 3 * 10 / 800 + 1 / 3, rtol=1e-5)  # team reward
    assert (scores[0, 1, :, S["tower1"]] == 0).all() and (scores[..., S["tower2"]] == 0).all()
    np.testing.assert_allclose(scores[0, 0, :, S["gold"]], TOWER_GOLD)
    # a plain hit pays 2/3 of the tower's weight in proportion to the HP it takes
    env = scenario()
    put(env, 0, 0, (tx, ty - 3.0))
    _, scores, _, _ = act(env, ENEMY_BUILDING0)
    assert env.hp[0, 1, 1] == 800 - moba.HERO_DAMAGE
    np.testing.assert_allclose(scores[0, 0, 0, S["tower1"]], 2 / 3 * moba.HERO_DAMAGE / 800, rtol=1e-5)


def test_inner_tower_and_ancient_are_protected():
    env = scenario()
    n = env.num_heroes
    inner = n + 1  # side 1's inner tower of the top lane
    put(env, 0, 0, (BUILDING_POS[1, 1, 0], BUILDING_POS[1, 1, 1] - 2.0))
    env._observe()
    slot = int(np.flatnonzero(env._slot_unit[0, 0, 0, 10:13] == env.units + inner)[0])
    assert not env._mask[0, 0, 0, ENEMY_BUILDING0 + slot]  # outer tower stands: invulnerable
    kill(env, 1, n + 0)
    env._observe()
    assert env._mask[0, 0, 0, ENEMY_BUILDING0 + slot]
    # the ancient only once an inner tower fell
    ancient = n + NUM_TOWERS
    put(env, 0, 0, (BUILDING_POS[1, -1, 0] - 3.0, BUILDING_POS[1, -1, 1]))
    env._observe()
    ancient_slot = env._slot_unit[0, 0, 0, 10:13] == env.units + ancient
    assert ancient_slot.any() and not env._mask[0, 0, 0, ENEMY_BUILDING0 : ENEMY_BUILDING0 + 3][ancient_slot].any()
    kill(env, 1, inner)
    env._observe()
    assert env._mask[0, 0, 0, ENEMY_BUILDING0 : ENEMY_BUILDING0 + 3][ancient_slot].all()


def test_creeps_stop_and_fight_at_a_standing_tower():
    env = scenario()
    tower_s = (1 - moba.TOWER_FRACTION[0]) * moba.LANE_LEN[0]  # side 1's outer top tower along the lane
    j = creep(env, 0, (0, 0), hp=100.0, lane_s=tower_s - 1.5)
    act(env)
    assert env.creep_s[0, 0, 0] == pytest.approx(tower_s - 1.5)  # it stood still and hit the tower
    assert env.hp[0, 1, env.num_heroes] == 800 - moba.CREEP_DAMAGE
    assert env.hp[0, 0, j] == 100 - moba.TOWER_DAMAGE
    env = scenario()
    creep(env, 0, (0, 0), hp=100.0, lane_s=10.0)  # nothing in range: it walks on
    act(env)
    assert env.creep_s[0, 0, 0] == pytest.approx(10.0 + moba.CREEP_SPEED)


def test_ancient_ends_the_game_reports_the_winner_and_autoresets():
    env = scenario(num_heroes=3)
    n = env.num_heroes
    for tower in range(NUM_TOWERS):
        kill(env, 1, n + tower)
    ancient = n + NUM_TOWERS
    put(env, 0, 0, (BUILDING_POS[1, -1, 0] - 3.0, BUILDING_POS[1, -1, 1]), hp=None)
    env.hp[0, 1, ancient] = 15.0
    obs, scores, done, info = act(env, ENEMY_BUILDING0)
    assert done[0] and info["game_over"][0] and info["game_length"][0] == 6
    np.testing.assert_array_equal(info["outcome"][0], [1.0, -1.0])
    np.testing.assert_array_equal(scores[0, :, :, S["win"]], [[1.0] * n, [-1.0] * n])
    np.testing.assert_allclose(scores[0, 0, :, S["ancient_hp"]], 15.0 / moba.ANCIENT_HP, rtol=1e-5)
    # same-step autoreset: the returned observation is the first of a new game
    assert env.t[0] == 0 and env.alive[0, 1, ancient] and env.alive[0, 1, n : n + NUM_TOWERS].all()
    assert (obs[0, :, :, slice(*OBS_LAYOUT["enemy_buildings_alive"])] == 1).all()
    assert (obs[0, :, :, OBS_LAYOUT["time"][0]] == 0).all() and info["acting"].all()


def test_time_cap_is_a_draw():
    env = scenario()
    env.t[0] = moba.MAX_STEPS - 1
    _, scores, done, info = act(env)
    assert done[0] and (info["outcome"] == 0).all() and (scores[..., S["win"]] == 0).all()


def test_masks_match_what_is_legal():
    env = make_moba("Moba5v5-v1", 4, seed=3)
    _, info = env.reset()
    rng = np.random.default_rng(0)
    n, u, checked = env.num_heroes, env.units, 0
    for t in range(300):
        actions = np.stack([bot_actions("push", env, 0, rng), bot_actions("random", env, 1, rng)], 1)
        obs, _, _, info = env.step(actions)
        if t % 10:
            continue
        mask, alive = info["action_mask"], env.alive
        hero_alive = alive[:, :, :n]
        assert (mask[..., NOOP]).all()
        assert (mask[..., 1:9] == hero_alive[..., None]).all()
        assert not (mask[..., 1:] & ~hero_alive[..., None]).any()  # the dead may only no-op
        heal_ok = hero_alive & (env.heal_cooldown == 0) & (env.hp[:, :, :n] < env.max_hp[:, :, :n])
        assert (mask[..., moba.HEAL] == heal_ok).all()
        for e, s, h in zip(*np.nonzero(hero_alive), strict=True):
            for k in range(moba.NUM_ATTACKS):
                target = env._slot_unit[e, s, h, k]
                ts, j = divmod(int(target), u)
                d2 = (env.x[e, ts, j] - env.x[e, s, h]) ** 2 + (env.y[e, ts, j] - env.y[e, s, h]) ** 2
                present = env._slot_d2[e, s, h, k] < np.inf
                legal = present and alive[e, ts, j] and d2 <= HERO_RANGE**2
                if k < 13:  # enemies: visible, and buildings unprotected
                    seen = alive[e, s] & (
                        (env.x[e, s] - env.x[e, ts, j]) ** 2 + (env.y[e, s] - env.y[e, ts, j]) ** 2 <= env.vision2
                    )
                    assert not present or (ts != s and seen.any())
                    towers = alive[e, ts, n : n + NUM_TOWERS].reshape(3, 2)
                    if j in (n + 1, n + 3, n + 5):
                        legal = legal and not towers[(j - n) // 2, 0]
                    if j == n + NUM_TOWERS:
                        legal = legal and not towers[:, 1].all()
                else:  # deny: an allied creep below half HP
                    legal = legal and ts == s and env.hp[e, ts, j] < moba.DENY_FRACTION * env.max_hp[e, ts, j]
                assert mask[e, s, h, ATTACK0 + k] == legal
                checked += 1
        # the obs' "attackable" slot feature is the mask of the slot's attack action
        attackable = np.concatenate(
            [obs[..., slice(*OBS_LAYOUT[kind])][..., 5::6] for kind, _ in moba.ATTACK_SLOTS], -1
        )
        assert (attackable == mask[..., ATTACK0 : ATTACK0 + moba.NUM_ATTACKS]).all()
    assert checked > 1000


def test_an_illegal_action_is_a_no_op():
    env = make_moba("Moba5v5-v0", 2, seed=5)
    _, info = env.reset()
    rng = np.random.default_rng(1)
    for _ in range(40):
        env.step(np.stack([bot_actions("push", env, s, rng) for s in range(2)], 1))
    mask = env._mask
    e, s, h = (int(i[0]) for i in np.nonzero(env.alive[:, :, : env.num_heroes]))
    illegal = [a for a in range(env.num_actions) if not mask[e, s, h, a]] + [-1, env.num_actions, 999]
    assert len(illegal) > 3
    base = np.stack([bot_actions("random", env, side, rng) for side in range(2)], 1)
    for bad in illegal:
        outcomes = []
        for a in (bad, NOOP):
            clone, actions = copy.deepcopy(env), base.copy()
            actions[e, s, h] = a
            outcomes.append((clone.step(actions), clone.x.copy(), clone.hp.copy()))
        (o1, s1, d1, i1), x1, hp1 = outcomes[0]
        (o2, s2, d2, i2), x2, hp2 = outcomes[1]
        np.testing.assert_array_equal(o1, o2)
        np.testing.assert_array_equal(s1, s2)
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(hp1, hp2)


def run_random(env_id: str, seed: int, steps: int, num_heroes: int = 5) -> list[np.ndarray]:
    """obs, then (obs, scores, done) per step, of push against random legal v0 actions (the same draws in v0 and v1)."""
    env = make_moba(env_id, 2, seed=seed, num_heroes=num_heroes)
    obs, info = env.reset()
    rng, out = np.random.default_rng(seed), [obs]
    for _ in range(steps):
        v0_mask = info["action_mask"][:, 1, :, : moba.NUM_ACTIONS[0]]
        random_side = np.where(v0_mask, rng.random(v0_mask.shape), -1).argmax(-1)
        obs, scores, done, info = env.step(np.stack([bot_actions("push", env, 0, rng), random_side], 1))
        out += [obs, scores, done]
    return out


def test_same_seed_same_game_and_different_seed_different_game():
    a, b, c = run_random("Moba5v5-v0", 1, 150), run_random("Moba5v5-v0", 1, 150), run_random("Moba5v5-v0", 2, 150)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert any(not np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_state_dict_resumes_the_same_game():
    """A world restored from a state_dict, in a fresh object, continues exactly as the original does."""
    rng = np.random.default_rng(0)
    env = make_moba("Moba5v5-v1", 6, seed=3, num_heroes=3)
    env.reset()
    actions = rng.integers(0, env.num_actions, size=(400, 6, 2, 3))
    for a in actions[:150]:
        env.step(a)
    saved = env.state_dict()
    copy_env = make_moba("Moba5v5-v1", 6, seed=99, num_heroes=3)
    copy_env.load_state_dict(saved)
    for a in actions[150:]:  # long enough for games to end and autoreset with the restored generator
        for x, y in zip(env.step(a), copy_env.step(a), strict=True):
            if isinstance(x, dict):
                for k in x:
                    np.testing.assert_array_equal(x[k], y[k])
            else:
                np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="shape"):
        make_moba("Moba5v5-v1", 5, seed=3, num_heroes=3).load_state_dict(saved)


def test_v0_observation_is_a_prefix_of_v1():
    v0, v1 = run_random("Moba5v5-v0", 4, 150, num_heroes=3), run_random("Moba5v5-v1", 4, 150, num_heroes=3)
    d0 = v0[0].shape[-1]
    assert v1[0].shape[-1] == d0 + len(moba.V1_FEATURES)
    for i, (x, y) in enumerate(zip(v0, v1, strict=True)):
        np.testing.assert_array_equal(x, y[..., :d0] if i % 3 == 1 or i == 0 else y)
    assert moba.action_names(1)[:-1] == moba.action_names(0) and moba.action_names(1)[-1] == "heal"


def test_v1_heal_restores_hp_and_cools_down():
    env = scenario(version=1)
    put(env, 0, 0, QUIET, hp=100.0)
    act(env, moba.HEAL)
    assert env.hp[0, 0, 0] == pytest.approx(100.0 + moba.HEAL_FRACTION * moba.HERO_HP + moba.HERO_REGEN * moba.HERO_HP)
    assert env.heal_cooldown[0, 0, 0] == moba.HEAL_COOLDOWN and not env._mask[0, 0, 0, moba.HEAL]


def load_script(name):
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[1] / "cleanfive" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIVE = [load_script(name) for name in ("ppo_lstm_selfplay", "five_surgery")]
SHAPING = SimpleNamespace(time_decay=0.6, time_decay_seconds=100.0)


def test_score_components_over_whole_games():
    env = make_moba("Moba5v5-v0", 8, seed=2)
    env.reset()
    rng = np.random.default_rng(2)
    totals, ended = np.zeros((8, 2, 5, len(SCORE_NAMES))), np.zeros(8, dtype=bool)
    weights = np.array([DEFAULT_SCORE_WEIGHTS[k] for k in SCORE_NAMES], dtype=np.float32)
    unequal = np.zeros(8, dtype=bool)
    while not ended.all():
        actions = np.stack([bot_actions("lasthit", env, 0, rng), bot_actions("push", env, 1, rng)], 1)
        _, scores, done, info = env.step(actions)
        win = scores[..., S["win"]]
        assert (win[~done] == 0).all()
        np.testing.assert_array_equal(win[done], np.repeat(info["outcome"][done][:, :, None], 5, 2))
        assert (info["outcome"].sum(1) == 0).all()
        assert set(np.unique(scores[..., [S["deaths"], S["kills"], S["last_hits"], S["denies"]]])) <= {0.0, 1.0}
        assert (scores[..., S["gold"]] >= 0).all() and (scores[..., S["xp"]] >= 0).all()
        assert (np.abs(scores[..., S["health"]]) <= 1).all()
        # the world's scores through both Five scripts' reward shaping (zero-sum, team spirit 0.3, time decay): the
        # two teams' rewards cancel in every game, and the weighted scores alone do not
        is_win = np.array([name == "win" for name in SCORE_NAMES])
        for script in FIVE:
            shaped = script.shape_rewards(scores, weights, is_win, info["time"], 0.3, SHAPING)
            np.testing.assert_allclose(shaped.sum((1, 2)), 0, atol=1e-3)
        unequal |= np.abs((scores * weights).sum((1, 2, 3))) > 1e-2
        totals[~ended] += scores[~ended]
        ended |= done
    assert unequal.all(), "the raw rewards cancel by themselves: the zero-sum check above would say nothing"
    # every kill is somebody's death; each side's kills never exceed the other side's deaths
    assert (totals[:, :, :, S["kills"]].sum(2) <= totals[:, ::-1, :, S["deaths"]].sum(2)).all()
    assert totals[..., S["last_hits"]].sum() > 0 and totals[..., S["kills"]].sum() > 0
    assert (totals[..., S["tower1"]].sum(2) <= 3 * 5 + 1e-3).all()  # at most three outer towers per team


def test_bots_are_graded():
    push = play_bots("Moba5v5-v0", "push", "random", 8, seed=1)
    lasthit = play_bots("Moba5v5-v0", "lasthit", "push", 10, seed=1)
    assert push.mean() >= 0.75, push
    assert lasthit.mean() >= 0.65, lasthit


def test_render():
    env = make_moba("Moba5v5-v0", 2, seed=0)
    env.reset()
    for _ in range(30):
        env.step(np.zeros((2, 2, 5), dtype=np.int64))
    frame = env.render(1)
    assert frame.shape == (256, 256, 3) and frame.dtype == np.uint8 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 5


@pytest.mark.parametrize("env_id", MOBA_ENV_IDS)
def test_fuzz_random_and_illegal_actions(env_id):
    env = make_moba(env_id, 8, seed=9, num_heroes=3)
    obs, info = env.reset()
    rng = np.random.default_rng(9)
    n, games = env.num_heroes, 0
    for _ in range(1000):  # random games reach the 800-step time cap
        legal = bot_actions("random", env, 0, rng), bot_actions("random", env, 1, rng)
        wild = rng.integers(-2, env.num_actions + 2, size=(8, 2, n))
        actions = np.where(rng.random((8, 2, n)) < 0.5, np.stack(legal, 1), wild)
        obs, scores, done, info = env.step(actions)
        games += done.sum()
        assert np.isfinite(obs).all() and np.isfinite(scores).all()
        mask, acting = info["action_mask"], info["acting"]
        assert mask[..., NOOP].all() and not (mask[..., 1:] & ~acting[..., None]).any()
        assert (acting == env.alive[:, :, :n]).all()
        assert (env.hp >= 0).all() and (env.hp <= env.max_hp + 1e-3).all()
        assert (env.hp[env.alive] > 0).all()
        assert ((env.x >= 0) & (env.x <= moba.MAP_SIZE) & (env.y >= 0) & (env.y <= moba.MAP_SIZE)).all()
    assert games >= 8  # random games reach the time cap


def test_docs_weight_table_matches_the_code():
    """docs/moba.md's score table: every component, with Table 6's weight and the default here as in the code."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "moba.md").read_text()
    number = lambda cell: float(cell.strip("* ").replace("−", "-"))  # noqa: E731
    rows = {}
    for line in doc.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].strip("`") in SCORE_NAMES:
            rows[cells[0].strip("`")] = (number(cells[3]), number(cells[4]), cells[4].startswith("**"))
    assert set(rows) == set(SCORE_NAMES)
    for name, (table6, here, bold) in rows.items():
        assert here == DEFAULT_SCORE_WEIGHTS[name], name
        assert bold == (here != table6), f"{name}: a departure from Table 6 is bold, and only one"


def test_wrong_lane_seconds():
    env = scenario()
    env.lane[0, 0, 0] = 0  # top lane: (4, 4) -> (4, 28) -> (28, 28)
    for xy, off in (((4.5, 15.0), False), ((16.0, 27.0), False), ((16.0, 16.0), True), ((9.0, 9.0), True)):
        put(env, 0, 0, xy)
        _, scores, _, _ = act(env)
        assert scores[0, 0, 0, S["wrong_lane"]] == (moba.STEP_SECONDS if off else 0.0), xy


def test_bots_take_one_side_per_game():
    env = make_moba("Moba5v5-v0", 6, seed=4)
    obs, info = env.reset()
    rng = np.random.default_rng(4)
    for _ in range(60):
        env.step(np.stack([bot_actions("push", env, s, rng) for s in range(2)], 1))
    side = np.arange(6) % 2
    for name in ("push", "lasthit"):
        mixed = env.bot_actions(name, obs, info, side, rng)
        per_side = [bot_actions(name, env, s, rng) for s in range(2)]
        np.testing.assert_array_equal(mixed, np.where(side[:, None] == 0, per_side[0], per_side[1]))
