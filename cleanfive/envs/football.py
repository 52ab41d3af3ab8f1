"""VMAS football (5v5, all ten players controllable) as a "2 sides x N heroes" team environment.

VMAS (``vmas`` on PyPI, the ``vmas`` extra) simulates the pitch with PyTorch tensors for all copies at once. This
wrapper gives it the interface of the built-in lane world (:mod:`cleanfive.envs.moba`), so that
``ppo_lstm_selfplay.py`` runs unchanged on a world nobody here wrote.

What VMAS 1.5 does (checked by ``tests/test_football.py``):

* ``vmas.make_env("football", ..., continuous_actions=False, ai_red_agents=False)`` lists the blue agents, then the red
  ones. Each observes 88 features and takes one of 9 discrete actions (no-op and 8 directions).
* A red player's observation and action are mirrored in x, so both teams see the pitch as "attacking to the right"
  and one policy can play either side.
* The reward of each player is the team's scoring reward (+-100 when a goal is scored) plus two dense shaping terms
  (ball towards the enemy goal, the team's closest player towards the ball); ``info`` reports the three separately.
* A copy is done when a goal is scored; VMAS never resets finished copies by itself and has no time limit unless asked.
* VMAS keeps one random state (torch's, NumPy's, Python's) for all its environments in a process and swaps it in
  around each of its calls: the resets of one environment move those of every other.

Conventions of this wrapper:

* Side 0 is blue, side 1 red; ``num_heroes`` players per side. A game ends with a goal (the scorer wins) or at
  ``max_steps`` (a draw). Observations get one extra feature: the fraction of the game time elapsed.
* "Same-step" autoreset: on the step a game ends, ``done[e]`` is True, ``scores`` and ``info["outcome"]`` describe the
  final step, and the returned observation is already the first of the next game.
* ``scores`` are per-hero score-component changes for this step, shaped as the lane world's are after OpenAI Five's
  reward table (team terms beside each hero's own; the training script applies the weights, zero-sum, team spirit
  and time decay): ``win`` is +-1 for the scoring / conceding side; ``ball_to_goal`` and ``agent_to_ball`` are
  VMAS's two team shaping terms (the ball's approach to the enemy goal, the team's closest player's approach to the
  ball, each times VMAS's factor); and per hero, ``dribble`` is the ball's approach to the enemy goal on a step that
  ends with this hero touching the ball (VMAS's touching distance), ``to_ball`` this hero's own approach to the
  ball and ``behind_ball`` its approach to the spot behind the ball from which a push sends it at the enemy goal
  (the ball's centre plus a player's and a ball's radius, on the line from the enemy goal; all in pitch units).
  ``VMAS_SCORE_WEIGHTS`` reproduce VMAS's own reward; ``DEFAULT_SCORE_WEIGHTS`` add the per-hero terms, ``dribble``
  and ``to_ball`` at VMAS's factors for the team terms (10 for the ball, 0.1 for a player's approach), and
  ``behind_ball`` at 1 (running at the ball from the wrong side pushes it towards one's own goal; no run without
  this term scored against ``random``).
* Scripted bots (``bot_actions``), weakest first as the games among them rate them (``reference_ratings.json``):
  ``random``; ``vmas_ai25`` and ``vmas_ai50``; ``chase`` (every player runs straight at the ball), which beats
  random in more games than it loses but draws most (the time cap comes first); ``vmas_ai75``; and ``vmas_ai``.
  The ``vmas_ai`` bots are VMAS's own scripted team (``vmas.scenarios.football.AgentPolicy``, what
  ``ai_red_agents=True`` plays: possession, dribbling to goal, off-the-ball positioning), run here for either side
  with each axis of its continuous force rounded to the nearest of -1, 0, +1, i.e. to one of the 9 actions the
  policy has. ``vmas_ai`` is at full strength; ``vmas_aiNN`` at decision and precision strength 0.NN (VMAS's
  ``ai_decision_strength``, ``ai_precision_strength``: noise in who goes for the ball, where the others stand and
  where each aims) and full speed (``VMAS_AI_STRENGTHS``). The controller samples from torch; here from a generator
  seeded from the bot's ``rng``. ``chase`` is not on the controller's scale: it wins more games than it loses against
  ``vmas_ai25`` and ``vmas_ai50`` and fewer against ``vmas_ai75``, while ``vmas_ai50`` beats ``random`` far more
  often than ``chase`` does.
* All actions are always legal: ``info["action_mask"]`` is all True and every hero acts on every step.
* Each copy of this wrapper keeps its own VMAS random state, so games elsewhere in the process (evaluation, the
  references' rating) never change its resets.
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

FOOTBALL_ENV_IDS: tuple[str, ...] = ("VmasFootball-v0",)
TEAMS = ("Blue", "Red")  # VMAS's names of side 0 and side 1


def nearest_actions(force: np.ndarray) -> np.ndarray:
    """The discrete actions int (...) nearest to forces float (..., 2) given in units of the force range: each axis
    rounded to -1, 0 or +1 (VMAS's 9 actions are 3 x 3: (x, y) each 0 stay, 1 negative, 2 positive)."""
    rounded = np.rint(np.clip(force, -1.0, 1.0)).astype(np.int64)
    index = np.where(rounded < 0, 1, 2 * rounded)
    return 3 * index[..., 0] + index[..., 1]


class FootballUnavailable(RuntimeError):
    """The optional ``vmas`` extra is not installed."""


class FootballTeamEnv:
    """VMAS football as ``(num_envs, 2 sides, num_heroes)``; see the module docstring for the conventions.

    * ``reset() -> (obs, info)``; ``step(actions int (E, 2, N)) -> (obs, scores, done, info)``
    * ``obs`` float32 (E, 2, N, 89); ``scores`` float32 (E, 2, N, 5); ``done`` bool (E,)
    * ``info``: ``action_mask`` bool (E, 2, N, 9), ``acting`` bool (E, 2, N), ``game_over`` bool (E,),
      ``outcome`` int (E, 2) (+1 win, 0 draw, -1 loss; 0 where no game ended), ``game_length`` int (E,) (steps of the
      game that ended), ``time`` float (E,) (game seconds when this step's scores were earned)
    * ``device``: where VMAS simulates ("cpu" or a GPU); what goes in and out is NumPy on the host either way
    """

    num_sides = 2
    num_actions = 9
    seconds_per_step = 0.1  # VMAS football's dt
    score_names: tuple[str, ...] = ("win", "ball_to_goal", "agent_to_ball", "dribble", "to_ball", "behind_ball")
    VMAS_SCORE_WEIGHTS: dict[str, float] = {"win": 100.0, "ball_to_goal": 1.0, "agent_to_ball": 1.0}
    DEFAULT_SCORE_WEIGHTS: dict[str, float] = VMAS_SCORE_WEIGHTS | {"dribble": 10.0, "to_ball": 0.1, "behind_ball": 1.0}
    # VMAS's scripted team (``AgentPolicy``) at (speed, decision, precision) strengths, each in [0, 1] (the scenario's
    # ``ai_strength``, ``ai_decision_strength``, ``ai_precision_strength``); the weaker ones at full speed, since with
    # forces rounded to -1, 0, +1 a slower team mostly stands still (all three at 0.25: 64 draws in 64 games with
    # `random`; at 0.5 and 0.75 it loses to the full-speed team at the same decision and precision)
    VMAS_AI_STRENGTHS: dict[str, tuple[float, float, float]] = {
        "vmas_ai25": (1.0, 0.25, 0.25),
        "vmas_ai50": (1.0, 0.5, 0.5),
        "vmas_ai75": (1.0, 0.75, 0.75),
        "vmas_ai": (1.0, 1.0, 1.0),
    }
    # weakest first, as the games among them rate them (reference_ratings.json): `chase` between vmas_ai50 and 75
    bot_names: tuple[str, ...] = ("random", "vmas_ai25", "vmas_ai50", "chase", "vmas_ai75", "vmas_ai")

    def __init__(self, num_envs: int, seed: int, num_heroes: int = 5, max_steps: int = 500, device: str = "cpu"):
        try:
            import vmas
        except ImportError as error:
            raise FootballUnavailable(
                "VMAS football needs the vmas extra: run `uv sync --extra vmas` (or `pip install vmas`)"
            ) from error
        if num_heroes < 2:
            raise ValueError(f"VMAS football needs at least 2 players per side, got {num_heroes}")
        self.num_envs, self.num_heroes, self.max_steps = num_envs, num_heroes, max_steps
        self.device = torch.device(device)
        self.env = vmas.make_env(
            "football",
            num_envs=num_envs,
            device=self.device,
            continuous_actions=False,
            seed=seed,
            n_blue_agents=num_heroes,
            n_red_agents=num_heroes,
            ai_red_agents=False,
        )
        # VMAS keeps one random state for all its environments in a process (a class attribute that its methods swap
        # in and out): each copy of this wrapper keeps its own, so that games elsewhere (evaluation, rating the
        # references) never change this one's resets
        self._vmas_state = list(type(self.env).vmas_random_state)
        self.obs_shape = (self.env.observation_space[0].shape[0] + 1,)
        self.steps = np.zeros(num_envs, dtype=np.int64)
        self._distances = np.zeros((num_envs, 2, num_heroes, 2), dtype=np.float32)  # see `_distances_to_ball`
        # VMAS's scripted team, one controller per strength and side, run on demand by `bot_actions("vmas_ai...", ...)`
        from vmas.scenarios.football import AgentPolicy

        world, scenario = self.env.world, self.env.scenario
        self._players = (scenario.blue_agents, scenario.red_agents)
        # its trajectory-plotting hook, which VMAS fills only for the teams it drives itself
        world.traj_points = {team: {a: [] for a in players} for team, players in zip(TEAMS, self._players, strict=True)}
        self._ai: dict[str, tuple] = {}  # bot name -> (blue's controller, red's)
        for name, (speed, decision, precision) in self.VMAS_AI_STRENGTHS.items():
            strengths = dict(speed_strength=speed, decision_strength=decision, precision_strength=precision)
            self._ai[name] = tuple(AgentPolicy(team, **strengths) for team in TEAMS)
            for ai in self._ai[name]:
                ai.init(world)

    @contextlib.contextmanager
    def _own_random_state(self):
        """VMAS's calls inside draw from this environment's random state, not from the one VMAS shares."""
        shared = type(self.env).vmas_random_state
        others, shared[:] = list(shared), self._vmas_state
        try:
            yield
        finally:
            self._vmas_state, shared[:] = list(shared), others

    def _observe(self, observations: list[torch.Tensor]) -> np.ndarray:
        obs = torch.stack(observations, dim=1).reshape(self.num_envs, 2, self.num_heroes, -1).cpu().numpy()
        clock = np.broadcast_to((self.steps / self.max_steps)[:, None, None, None], (*obs.shape[:3], 1))
        return np.concatenate([obs, clock], axis=-1).astype(np.float32)

    def _info(self, game_over, outcome, game_length, time) -> dict[str, np.ndarray]:
        shape = (self.num_envs, 2, self.num_heroes)
        return {
            "action_mask": np.ones((*shape, self.num_actions), dtype=bool),
            "acting": np.ones(shape, dtype=bool),
            "game_over": game_over,
            "outcome": outcome,
            "game_length": game_length,
            "time": time,
        }

    def reset(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        self.steps[:] = 0
        with self._own_random_state():
            observations = self.env.reset()
        for controllers in self._ai.values():
            for ai in controllers:
                ai.reset()
        self._distances = self._distances_to_ball()
        none = np.zeros(self.num_envs, dtype=bool)
        zeros = np.zeros(self.num_envs)
        return self._observe(observations), self._info(none, np.zeros((self.num_envs, 2), np.int64), zeros, zeros)

    def _distances_to_ball(self) -> np.ndarray:
        """Each player's distances to the ball and to the spot behind it (on the line from the enemy goal, a player's
        and a ball's radius from the ball's centre), float32 (E, 2, N, 2)."""
        scenario = self.env.scenario
        ball = scenario.ball.state.pos[:, None]  # (E, 1, 2)
        players = torch.stack([p.state.pos for team in self._players for p in team], 1)  # (E, 2N, 2)
        away = ball - torch.stack([scenario.right_goal_pos, scenario.left_goal_pos])[None]  # blue attacks the right
        spot = ball + away / away.norm(dim=-1, keepdim=True) * (scenario.agent_size + scenario.ball_size)  # (E, 2, 2)
        spot = spot.repeat_interleave(self.num_heroes, 1)
        distances = torch.stack([(players - ball).norm(dim=-1), (players - spot).norm(dim=-1)], -1)
        return distances.reshape(self.num_envs, 2, self.num_heroes, 2).cpu().numpy()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        actions = torch.as_tensor(np.asarray(actions).reshape(self.num_envs, 2 * self.num_heroes), device=self.device)
        with self._own_random_state():
            _, _, goal, infos = self.env.step(list(actions.unbind(1)))
        scenario = self.env.scenario
        # the three reward terms VMAS adds up (the goal as +-1 for the scoring / conceding team), the same for a team
        team_terms = torch.stack(
            [
                torch.stack(
                    [i["sparse_reward"] / scenario.scoring_reward, i["ball_goal_pos_rew"], i["all_agent_ball_pos_rew"]],
                    -1,
                )
                for i in infos
            ],
            dim=1,
        )
        team_terms = team_terms.reshape(self.num_envs, 2, self.num_heroes, 3).float().cpu().numpy()
        # each hero's own terms: the ball's approach to the enemy goal while it touches the ball, its approach to the
        # ball and to the spot behind it
        distances = self._distances_to_ball()
        touching = distances[..., 0] <= scenario.agent_size + scenario.ball_size + 1e-2  # VMAS's `touching_ball`
        dribble = touching * team_terms[..., 1] / scenario.pos_shaping_factor_ball_goal
        scores = np.concatenate([team_terms, dribble[..., None], self._distances - distances], -1)
        self.steps += 1
        goal = goal.cpu().numpy().astype(bool)
        game_over = goal | (self.steps >= self.max_steps)
        outcome = np.zeros((self.num_envs, 2), dtype=np.int64)
        outcome[:, 0] = np.sign(scores[:, 0, 0, 0]).astype(np.int64) * goal  # the win term is +1 for the scorers
        outcome[:, 1] = -outcome[:, 0]
        game_length = np.where(game_over, self.steps, 0)
        time = self.steps * self.seconds_per_step
        with self._own_random_state():
            for index in np.flatnonzero(game_over):  # VMAS resets one copy at a time; only finished copies are touched
                self.env.reset_at(int(index), return_observations=False)
                for controllers in self._ai.values():
                    for ai in controllers:
                        ai.reset(int(index))
            observations = self.env.get_from_scenario(
                get_observations=True, get_rewards=False, get_infos=False, get_dones=False
            )[0]
        self.steps[game_over] = 0
        self._distances = self._distances_to_ball()  # the new games' starting distances
        return self._observe(observations), scores, game_over, self._info(game_over, outcome, game_length, time)

    def bot_actions(
        self,
        name: str,
        obs: np.ndarray,
        info: dict[str, np.ndarray],
        side: np.ndarray,
        rng: np.random.Generator,
        games: np.ndarray | None = None,
    ) -> np.ndarray:
        """Actions int (E, N) of bot ``name`` for the players of side ``side[e]`` in ``games`` (bool (E,); None: every
        game), 0 (no force) elsewhere. Each bot acts on every game at once (VMAS's controller plans for every copy
        anyway) and draws the same random numbers whatever ``games`` is."""
        act = self._bot_actions(name, obs, side, rng)
        return act if games is None else np.where(games[:, None], act, 0)

    def _bot_actions(self, name: str, obs: np.ndarray, side: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if name == "random":
            return rng.integers(0, self.num_actions, size=(self.num_envs, self.num_heroes))
        if name in self.VMAS_AI_STRENGTHS:
            actions = np.zeros((self.num_envs, self.num_heroes), dtype=np.int64)
            # the controller samples from torch's generators (the CPU's and the world's GPU's): here ones seeded from
            # `rng`, the global ones untouched. Not torch.manual_seed: for every backend not yet initialized it also
            # queues a seed call with a formatted stack trace, a cost paid at every move of the bot
            gpu = [self.device] if self.device.type == "cuda" else []
            with torch.random.fork_rng(devices=gpu):
                seed = int(rng.integers(2**63))
                torch.default_generator.manual_seed(seed)
                if gpu:
                    with torch.cuda.device(self.device):
                        torch.cuda.manual_seed(seed)
                for s in np.unique(side):  # it plans for every copy; the copies where it plays `s` are kept
                    actions[side == s] = nearest_actions(self._vmas_ai_force(name, s))[side == s]
            return actions
        to_ball = -obs[np.arange(self.num_envs), side, :, 2:4]  # features 2:4: player minus ball, own frame
        return nearest_actions(np.sign(to_ball) * (np.abs(to_ball) >= 0.01))  # full force on each axis, or none

    def _vmas_ai_force(self, name: str, side: int) -> np.ndarray:
        """The force float (E, N, 2) that VMAS's scripted team ``name`` (a key of ``VMAS_AI_STRENGTHS``) would apply
        to the players of ``side``, in units of the force range and in that side's own frame (red's x mirrored, as for
        its actions)."""
        from vmas.scenarios.football import Splines

        # VMAS 1.5 caches its spline matrices in the class, on the device of the first world that used them: a world
        # on another device (CPU evaluation beside GPU training) would mix devices, so that cache is emptied
        if any(matrix.device != self.device for matrix in Splines.U_matmul_A.values()):
            Splines.U_matmul_A.clear()
        forces = []
        for player in self._players[side]:  # in order: the controller updates possession at its player 0
            self._ai[name][side].run(player, self.env.world)
            forces.append(player.action.u / player.action.u_multiplier_tensor)
        force = torch.stack(forces, 1).cpu().numpy()
        return force * np.array([-1.0, 1.0]) if side == 1 else force

    def render(self, env_index: int = 0) -> np.ndarray:
        """A top-down RGB frame (H, W, 3) uint8 of game ``env_index``."""
        return np.asarray(self.env.render(mode="rgb_array", env_index=env_index), dtype=np.uint8)
