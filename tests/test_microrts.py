"""cleanfive/envs/microrts.py against the real gym-microrts 0.6.0 (Java).

The JVM can start only once per process, so every check that needs the game runs in ONE subprocess
(``CHECKS`` below) that prints one ``ok <name>`` line per passed check; the tests read those lines."""

import subprocess
import sys
import textwrap

import pytest
from needs import needs_microrts

pytestmark = needs_microrts

CHECKS = textwrap.dedent(
    """
    import numpy as np
    from cleanfive.envs.microrts import MicrortsGridEnv, play_bot_games

    def ok(name):
        print("ok", name, flush=True)

    def act(E, HW, cell=None, vec=None):
        a = np.zeros((E, HW, 7), dtype=np.int64)
        if cell is not None:
            a[0, cell] = vec
        return a

    # 4x4 basesWorkers: own worker at (1,1) = cell 5, own base at (2,1) = cell 6, resource at (0,0) = cell 0
    env = MicrortsGridEnv("maps/4x4/basesWorkers4x4.xml", 2, ["passiveAI"], max_steps=60,
                          reward_weight=(0, 1, 0, 0, 0, 0))
    obs, info = env.reset()
    mask = info["action_mask"]
    if obs.shape == (3, 4, 4, 27) and mask.shape == (3, 16, 78) and mask.dtype == bool:
        ok("shapes")
    cells = obs.reshape(3, 16, 27)
    own0 = np.flatnonzero(cells[0, :, 11] & ~cells[0, :, 14].astype(bool))
    own1 = np.flatnonzero(cells[1, :, 11] & ~cells[1, :, 14].astype(bool))
    if list(own0) == [5, 6] and list(own1) == [9, 10] and list(np.flatnonzero(cells[1, :, 12])) == [5, 6]:
        ok("owner_planes_are_relative_to_the_seat")
    if list(np.flatnonzero(mask[0].any(-1))) == [5, 6] and list(np.flatnonzero(mask[2].any(-1))) == [5, 6]:
        ok("mask_marks_available_own_units_only")
    if mask[0, 5, 0] and mask[0, 5, 1] and not mask[0, 5, 2]:
        ok("noop_and_move_legal_harvest_not")

    # an illegal harvest (the resource is diagonal): no error, nothing moves, the worker is locked for 20 frames
    obs, reward, term, trunc, info = env.step(act(3, 16, 5, [2, 0, 0, 0, 0, 0, 0]))
    locked = 1
    while not info["action_mask"][0, 5].any():
        obs, reward, term, trunc, info = env.step(act(3, 16))
        locked += 1
    worker_still = obs.reshape(3, 16, 27)[0, 5, 17] == 1
    if locked == 20 and worker_still:
        ok("illegal_action_locks_the_unit_for_its_duration")

    # legal: move north to (1,0) (10 frames), then harvest west: +1 on the frame the harvest is issued
    env.step(act(3, 16, 5, [1, 0, 0, 0, 0, 0, 0]))
    for _ in range(10):
        obs, reward, term, trunc, info = env.step(act(3, 16))
    if info["action_mask"][0, 1, 2] and info["action_mask"][0, 1, 10 + 3]:
        ok("moved_and_can_harvest_west")
    obs, reward, term, trunc, info = env.step(act(3, 16, 1, [2, 0, 3, 0, 0, 0, 0]))
    if reward[0] == 1 and info["raw_rewards"][0, 1] == 1:
        ok("harvest_pays_when_issued")

    # same-step autoreset at max_steps: done comes with the new game's first observation
    t = 32  # frames played so far: 20 locked + 1 move + 10 + 1 harvest
    while True:
        obs, reward, term, trunc, info = env.step(act(3, 16))
        t += 1
        if trunc.any() or term.any():
            break
    first = obs.reshape(3, 16, 27)[0]
    if t == 60 and trunc.all() and not term.any() and first[5, 17] == 1 and first[1, 13] == 1:
        ok("same_step_autoreset")
    if info["_episode"].all() and (info["episode"]["l"] == 60).all() and info["episode"]["r"][0] == 1:
        if info["episode"]["raw"][0, 1] == 1 and info["action_mask"][0, 5].any():
            ok("episode_statistics")
    env.close()

    # a second environment and bot-vs-bot games in the same process (same JVM)
    env = MicrortsGridEnv("maps/10x10/basesWorkers10x10.xml", 0, ["coacAI", "passiveAI"], max_steps=30)
    obs, info = env.reset()
    if obs.shape == (2, 10, 10, 27):
        ok("second_env_same_jvm")
    scores = play_bot_games([("workerRushAI", "passiveAI"), ("passiveAI", "workerRushAI"), ("passiveAI", "passiveAI")],
                            "maps/10x10/basesWorkers10x10.xml", max_steps=600)
    if list(scores) == [1.0, 0.0, 0.5]:
        ok("bot_games_scores")
    for bad in [dict(map_path="maps/nowhere.xml"), dict(bots=["nobody"]), dict(num_selfplay_envs=1),
                dict(reward_weight=(1, 2))]:
        kwargs = dict(map_path="maps/4x4/basesWorkers4x4.xml", num_selfplay_envs=0, bots=["passiveAI"])
        kwargs.update(bad)
        try:
            MicrortsGridEnv(**kwargs)
        except ValueError:
            ok("value_error_" + next(iter(bad)))
    """
)

EXPECTED = [
    "shapes",
    "owner_planes_are_relative_to_the_seat",
    "mask_marks_available_own_units_only",
    "noop_and_move_legal_harvest_not",
    "illegal_action_locks_the_unit_for_its_duration",
    "moved_and_can_harvest_west",
    "harvest_pays_when_issued",
    "same_step_autoreset",
    "episode_statistics",
    "second_env_same_jvm",
    "bot_games_scores",
    "value_error_map_path",
    "value_error_bots",
    "value_error_num_selfplay_envs",
    "value_error_reward_weight",
]


@pytest.fixture(scope="module")
def passed():
    result = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return {line.split()[1] for line in result.stdout.splitlines() if line.startswith("ok ")}


@pytest.mark.parametrize("name", EXPECTED)
def test_wrapper_fact(passed, name):
    assert name in passed


def test_missing_java_raises_with_hint(monkeypatch):
    from cleanfive.envs import microrts

    monkeypatch.setattr(microrts.shutil, "which", lambda _: None)
    with pytest.raises(microrts.MicrortsUnavailable, match="Java"):
        microrts.MicrortsGridEnv("maps/4x4/basesWorkers4x4.xml")


def test_missing_package_raises_with_uv_hint(monkeypatch):
    from cleanfive.envs import microrts

    monkeypatch.setitem(sys.modules, "gym_microrts", None)  # makes `import gym_microrts` raise ImportError
    with pytest.raises(microrts.MicrortsUnavailable, match="uv sync --extra microrts"):
        microrts.microrts_dir()
