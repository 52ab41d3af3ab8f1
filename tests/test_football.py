"""VMAS football wrapper: the conventions cleanfive/envs/football.py relies on, checked against VMAS itself."""

import numpy as np
import pytest
import torch
from needs import VMAS, needs_vmas

from cleanfive.envs.football import FootballTeamEnv, nearest_actions

pytestmark = needs_vmas
if VMAS:
    import vmas

E, N = 4, 5


def random_actions(rng):
    return rng.integers(0, FootballTeamEnv.num_actions, size=(E, 2, N))


def test_shapes_and_masks():
    env = FootballTeamEnv(E, seed=0, num_heroes=N)
    obs, info = env.reset()
    assert obs.shape == (E, 2, N, 89) and obs.dtype == np.float32
    assert (obs[..., -1] == 0).all()  # the clock feature starts at 0
    obs, scores, done, info = env.step(random_actions(np.random.default_rng(0)))
    assert scores.shape == (E, 2, N, len(env.score_names)) == (E, 2, N, 6)
    assert info["action_mask"].shape == (E, 2, N, 9) and info["action_mask"].all() and info["acting"].all()
    assert np.allclose(obs[..., -1], 1 / env.max_steps)


def test_vmas_weights_reproduce_vmas_reward():
    """Score components weighted by VMAS_SCORE_WEIGHTS == the reward VMAS itself returns, same seed and actions."""
    env = FootballTeamEnv(E, seed=3, num_heroes=N, max_steps=10_000)
    obs, _ = env.reset()
    raw = vmas.make_env(
        "football", num_envs=E, device="cpu", continuous_actions=False, seed=3,
        n_blue_agents=N, n_red_agents=N, ai_red_agents=False,
    )  # fmt: skip
    raw_obs = torch.stack(raw.reset(), 1).reshape(E, 2, N, -1).numpy()
    np.testing.assert_array_equal(obs[..., :-1], raw_obs)  # VMAS seeds its global generator at make_env
    weights = np.array([env.VMAS_SCORE_WEIGHTS.get(k, 0.0) for k in env.score_names])
    rng = np.random.default_rng(1)
    for _ in range(30):
        actions = random_actions(rng)
        _, scores, done, _ = env.step(actions)
        _, rewards, raw_done, _ = raw.step(list(torch.as_tensor(actions.reshape(E, 2 * N)).unbind(1)))
        expected = torch.stack(rewards, 1).reshape(E, 2, N).numpy()
        np.testing.assert_allclose(scores @ weights, expected, rtol=1e-5, atol=1e-6)
        assert not done.any() and not raw_done.any()


def behind_ball_distances(scenario) -> np.ndarray:
    """Each player's distance (game 0) to the spot a player's and a ball's radius behind the ball on the line from the
    enemy goal, (2, N), side by side: blue attacks the right goal, red the left."""
    ball, reach = scenario.ball.state.pos[0], scenario.agent_size + scenario.ball_size
    rows = []
    for team, goal in ((scenario.blue_agents, scenario.right_goal_pos), (scenario.red_agents, scenario.left_goal_pos)):
        spot = ball + (ball - goal) / torch.linalg.norm(ball - goal) * reach
        rows.append([float(torch.linalg.norm(player.state.pos[0] - spot)) for player in team])
    return np.array(rows)


def test_per_hero_terms_credit_the_toucher_and_each_approach():
    """dribble: the ball's approach to the enemy goal for the hero touching it only; to_ball: each hero's own
    approach to the ball; behind_ball: its approach to the spot behind the ball; both sides in their own frame."""
    env = FootballTeamEnv(1, seed=0, num_heroes=2, max_steps=10_000)
    env.reset()
    scenario = env.env.scenario
    # blue 0 touches the ball just left of centre (on its spot behind the ball); everyone else is far away
    scenario.ball.set_pos(torch.tensor([[0.0, 0.0]]), batch_index=None)
    scenario.blue_agents[0].set_pos(torch.tensor([[-scenario.agent_size - scenario.ball_size, 0.0]]), batch_index=None)
    scenario.blue_agents[1].set_pos(torch.tensor([[-1.0, 0.5]]), batch_index=None)
    for i, player in enumerate(scenario.red_agents):
        player.set_pos(torch.tensor([[1.0, 0.5 - i]]), batch_index=None)
    env._distances = env._distances_to_ball()
    before, behind_before = env._distances_to_ball(), behind_ball_distances(scenario)
    assert behind_before[0, 0] == pytest.approx(0, abs=1e-6)
    ball_before = scenario.ball.state.pos.clone()
    right = 5  # VMAS's discrete action (x positive, y stay): both sides run "to the right", i.e. red to the left
    _, scores, _, _ = env.step(np.full((1, 2, 2), right))
    after = env._distances_to_ball()
    names = list(env.score_names)
    dribble, to_ball = scores[0, ..., names.index("dribble")], scores[0, ..., names.index("to_ball")]
    np.testing.assert_allclose(to_ball, before[0, ..., 0] - after[0, ..., 0], atol=1e-6)
    assert (to_ball[1] > 0).all()  # red ran towards the ball (in its own frame, "to the right")
    behind = scores[0, ..., names.index("behind_ball")]
    np.testing.assert_allclose(behind, behind_before - behind_ball_distances(scenario), atol=1e-5)
    assert (behind[1] > 0).all()  # red's spot is on the ball's right: it ran towards it
    moved = scenario.ball.state.pos[0, 0] - ball_before[0, 0]
    assert moved > 0  # blue 0 pushed the ball towards red's goal
    touching = after[0, ..., 0] <= scenario.agent_size + scenario.ball_size + 1e-2
    assert touching[0, 0] and not touching[0, 1] and not touching[1].any()
    ball_to_goal = scores[0, 0, 0, names.index("ball_to_goal")] / scenario.pos_shaping_factor_ball_goal
    assert dribble[0, 0] == pytest.approx(ball_to_goal) and dribble[0, 0] > 0
    assert (dribble[0, 1] == 0) and (dribble[1] == 0).all()


def test_goal_ends_game_reports_winner_and_autoresets_same_step():
    env = FootballTeamEnv(E, seed=0, num_heroes=N)
    env.reset()
    env.step(np.zeros((E, 2, N), dtype=np.int64))
    scenario = env.env.scenario
    pos = scenario.ball.state.pos.clone()
    pos[1] = torch.tensor([scenario.pitch_length / 2 + scenario.ball_size, 0.0])  # blue scores in game 1
    pos[2] = torch.tensor([-scenario.pitch_length / 2 - scenario.ball_size, 0.0])  # red scores in game 2
    scenario.ball.set_pos(pos, batch_index=None)
    obs, scores, done, info = env.step(np.zeros((E, 2, N), dtype=np.int64))
    assert done.tolist() == [False, True, True, False]
    assert info["outcome"].tolist() == [[0, 0], [1, -1], [-1, 1], [0, 0]]
    assert (scores[1, 0, :, 0] == 1).all() and (scores[1, 1, :, 0] == -1).all()
    assert (scores[2, 0, :, 0] == -1).all() and (scores[2, 1, :, 0] == 1).all()
    assert (scores[[0, 3], :, :, 0] == 0).all()
    assert info["game_length"].tolist() == [0, 2, 2, 0]
    # the returned observation of a finished game is the first of the next one: clock 0, ball back in play
    assert (obs[[1, 2], ..., -1] == 0).all() and (obs[[0, 3], ..., -1] > 0).all()
    assert (scenario.ball.state.pos[[1, 2], 0].abs() < scenario.pitch_length / 2).all()
    assert info["time"].tolist() == pytest.approx([0.2, 0.2, 0.2, 0.2])  # when this step's scores were earned


def test_time_cap_is_a_draw():
    env = FootballTeamEnv(E, seed=0, num_heroes=N, max_steps=3)
    env.reset()
    for step in range(1, 4):
        _, _, done, info = env.step(np.zeros((E, 2, N), dtype=np.int64))
        assert done.all() == (step == 3)
    assert (info["outcome"] == 0).all() and (info["game_length"] == 3).all()


def test_red_sees_a_mirrored_pitch():
    """Both sides attack "to the right": with the ball on the centre line, each side's ball offset mirrors in x."""
    env = FootballTeamEnv(1, seed=0, num_heroes=2)
    env.reset()
    scenario = env.env.scenario
    scenario.blue_agents[0].set_pos(torch.tensor([[-0.5, 0.2]]), batch_index=None)
    scenario.red_agents[0].set_pos(torch.tensor([[0.5, 0.2]]), batch_index=None)
    scenario.ball.set_pos(torch.tensor([[0.0, 0.0]]), batch_index=None)
    observations = env.env.get_from_scenario(True, False, False, False)[0]
    blue, red = observations[0][0], observations[2][0]
    # features 2:4 are the player's offset to the ball (after its own force, features 0:2)
    torch.testing.assert_close(blue[2:4], red[2:4])


def test_same_seed_same_game():
    runs = []
    for _ in range(2):
        env = FootballTeamEnv(E, seed=7, num_heroes=N)
        obs, _ = env.reset()
        rng = np.random.default_rng(0)
        trace = [obs]
        for _ in range(10):
            obs, scores, _, _ = env.step(random_actions(rng))
            trace += [obs, scores]
        runs.append(trace)
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (VMAS simulating on it)")
def test_a_game_simulated_on_a_gpu_is_the_cpu_game_and_comes_back_as_numpy():
    """device="cuda": VMAS steps the same physics (float32, to rounding) from the same start, the bots run there, and
    the wrapper still returns host NumPy arrays."""
    cpu, gpu = (FootballTeamEnv(E, seed=5, num_heroes=N, device=d) for d in ("cpu", "cuda"))
    cpu.reset()
    gpu.reset()
    movable = lambda env: [*env.env.world.agents, env.env.scenario.ball]  # noqa: E731
    for a, b in zip(movable(cpu), movable(gpu), strict=True):  # the CPU game's start, on the GPU
        b.set_pos(a.state.pos.cuda(), batch_index=None)
        b.set_vel(a.state.vel.cuda(), batch_index=None)
    gpu._distances = gpu._distances_to_ball()
    rng, side = np.random.default_rng(0), np.ones(E, dtype=np.int64)
    for step in range(10):
        actions = random_actions(rng)
        (obs, scores, done, _), (gpu_obs, gpu_scores, gpu_done, gpu_info) = cpu.step(actions), gpu.step(actions)
        assert isinstance(gpu_obs, np.ndarray) and gpu_obs.dtype == np.float32 and isinstance(gpu_scores, np.ndarray)
        np.testing.assert_allclose(gpu_obs, obs, atol=1e-5)
        if step > 0:  # VMAS's team shaping terms of the first step start from its own start, not the copied one
            np.testing.assert_allclose(gpu_scores, scores, atol=1e-5)
        np.testing.assert_array_equal(gpu_done, done)
    bots = gpu.bot_actions("vmas_ai", gpu_obs, gpu_info, side, rng)
    assert bots.shape == (E, N) and ((0 <= bots) & (bots < gpu.num_actions)).all()


def test_render_frame():
    env = FootballTeamEnv(2, seed=0, num_heroes=N)
    env.reset()
    frame = env.render(env_index=1)
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.dtype == np.uint8 and frame.std() > 0


def test_needs_two_players_per_side():
    with pytest.raises(ValueError, match="at least 2"):
        FootballTeamEnv(1, seed=0, num_heroes=1)


def test_nearest_actions_are_vmas_discrete_actions():
    """nearest_actions inverts VMAS's own discrete-to-force mapping and rounds forces in between to the nearest."""
    raw = vmas.make_env(
        "football", num_envs=1, device="cpu", continuous_actions=False, seed=0,
        n_blue_agents=2, n_red_agents=2, ai_red_agents=False,
    )  # fmt: skip
    raw.reset()
    player = raw.scenario.blue_agents[0]
    for action in range(FootballTeamEnv.num_actions):
        raw.step([torch.tensor([[action]]), *[torch.tensor([[0]])] * 3])
        force = (player.action.u / player.action.u_multiplier_tensor).numpy()  # VMAS's force of this action
        assert nearest_actions(force).tolist() == [action]
        assert nearest_actions(0.6 * force).tolist() == [action]  # rounding
    assert nearest_actions(np.array([[0.4, -0.7], [-3.0, 0.2]])).tolist() == [1, 3]


def test_vmas_ai_bots_are_vmas_controllers_at_their_strengths_drawing_from_their_rng():
    """Every entry of VMAS_AI_STRENGTHS is a bot, played by VMAS's own controller (one per side) at those strengths;
    its samples come from the bot's rng (the same rng, the same moves, whichever bot of the table runs in between),
    and torch's global generator is left as it was."""
    env = FootballTeamEnv(E, seed=0, num_heroes=2)
    assert [n for n in env.bot_names if n.startswith("vmas_ai")] == list(env.VMAS_AI_STRENGTHS)  # weakest first
    for name, (speed, decision, precision) in env.VMAS_AI_STRENGTHS.items():
        for ai, team in zip(env._ai[name], ("Blue", "Red"), strict=True):
            assert ai.team_name == team and ai.speed_strength == speed**2  # VMAS squares the speed strength
            assert (ai.decision_strength, ai.precision_strength) == (decision, precision)
    obs, info = env.reset()
    side, state = np.arange(E) % 2, torch.get_rng_state()
    moves = env.bot_actions("vmas_ai25", obs, info, side, np.random.default_rng(1))
    assert torch.equal(torch.get_rng_state(), state)
    twin = FootballTeamEnv(E, seed=0, num_heroes=2)  # the same game, where another controller runs first
    obs, info = twin.reset()
    twin.bot_actions("vmas_ai", obs, info, side, np.random.default_rng(2))
    np.testing.assert_array_equal(twin.bot_actions("vmas_ai25", obs, info, side, np.random.default_rng(1)), moves)


def test_games_with_resets_are_vmas_games_with_the_same_resets():
    """The wrapper's step gives the observations and rewards of VMAS's own step, reset at the same games, over games
    that end and restart."""
    env = FootballTeamEnv(E, seed=5, num_heroes=N, max_steps=7)
    env.reset()
    weights = np.array([env.VMAS_SCORE_WEIGHTS.get(k, 0.0) for k in env.score_names])
    rng = np.random.default_rng(2)
    played = [(actions := random_actions(rng), *env.step(actions)[:3]) for _ in range(20)]
    assert sum(done.sum() for *_, done in played) >= 2 * E  # every game ended (the time cap) and restarted twice
    raw = vmas.make_env(  # after the wrapper's games: VMAS's resets draw from one generator for all its copies
        "football", num_envs=E, device="cpu", continuous_actions=False, seed=5,
        n_blue_agents=N, n_red_agents=N, ai_red_agents=False,
    )  # fmt: skip
    raw.reset()
    for actions, obs, scores, done in played:
        _, rewards, _, _ = raw.step(list(torch.as_tensor(actions.reshape(E, 2 * N)).unbind(1)))
        np.testing.assert_allclose(scores @ weights, torch.stack(rewards, 1).reshape(E, 2, N).numpy(), rtol=1e-5)
        for index in np.flatnonzero(done):
            raw.reset_at(int(index))
        raw_obs = raw.get_from_scenario(get_observations=True, get_rewards=False, get_infos=False, get_dones=False)[0]
        np.testing.assert_array_equal(obs[..., :-1], torch.stack(raw_obs, 1).reshape(E, 2, N, -1).numpy())


def test_games_elsewhere_in_the_process_never_change_a_worlds_resets():
    """VMAS shares one random state among its environments; each wrapper keeps its own, so a world's games (ended
    and restarted at the time cap) are the same whether or not another world is made and played beside it."""

    def play(beside: bool) -> list[np.ndarray]:
        env = FootballTeamEnv(E, seed=5, num_heroes=N, max_steps=7)
        other = FootballTeamEnv(E, seed=9, num_heroes=N, max_steps=3) if beside else None
        env.reset()
        other and other.reset()
        rng, other_rng, seen = np.random.default_rng(2), np.random.default_rng(3), []
        for _ in range(20):
            seen.append(env.step(random_actions(rng))[0])
            other and other.step(random_actions(other_rng))
        return seen

    for alone, beside in zip(play(False), play(True), strict=True):
        np.testing.assert_array_equal(alone, beside)
