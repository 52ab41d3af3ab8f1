"""A miniature 5v5 lane game ("MOBA"), pure NumPy and vectorised over environments, for the OpenAI Five recipe.

Two sides of N heroes (N in {1, 3, 5}) on a 32 x 32 continuous map. Three lanes (top, mid, bottom) join the two
ancients; each side has two towers per lane and an ancient; creep waves spawn on a timer and walk their lane; heroes
have hit points, attack range, damage, levels from experience, gold (bought into damage by a fixed script, as OpenAI
Five scripted its item purchases), death and a respawn timer. Each side sees only what its units see (fog of war).
The rules, the observation layout and the score components are documented in ``docs/moba.md``.

Interface (E = num_envs, N = num_heroes, A = num_actions, D = obs_shape[0], C = len(score_names)):

* ``reset() -> (obs, info)``; ``step(actions int (E, 2, N)) -> (obs, scores, done, info)``.
* ``obs`` float32 (E, 2, N, D): one vector per hero, in its own side's frame (every side sees the map as if its base
  were bottom-left), so one network plays both sides.
* ``scores`` float32 (E, 2, N, C): per-hero *changes* of the score components of ``score_names`` during this step.
  Weights (``DEFAULT_SCORE_WEIGHTS``), zero-sum, team spirit and time decay are applied by the training script.
* ``done`` bool (E,): a game ended in this step (ancient destroyed or time cap).
* ``info["action_mask"]`` bool (E, 2, N, A): legal actions of the returned obs; a dead hero may only no-op.
  ``info["acting"]`` bool (E, 2, N): alive heroes, whose actions the next ``step`` applies.
  ``info["game_over"]`` bool (E,) (equal to ``done``); ``info["outcome"]`` float32 (E, 2): +1 win / 0 draw / -1 loss
  per side where ``game_over``, else 0; ``info["game_length"]`` int64 (E,): steps of a game that ended in this step,
  else 0; ``info["time"]`` float32 (E,): game time in seconds when this step's scores were earned (a finished game's
  final time where ``done``), for the training script's time decay.

Autoreset is **same-step**: when a game ends, ``done[e]`` is True, ``scores`` and ``outcome`` belong to the final
step of the finished game, and the returned ``obs`` and ``action_mask`` are already the first of a new game.

An illegal action (outside ``[0, A)`` or masked) is a no-op, never an error. Each environment instance owns its
``np.random.Generator``, so a seed fixes every game. Versions: ``Moba5v5-v1`` appends three observation features at
the end of the per-hero vector and one action (a self-heal) at the end of the action list, so a v0 observation is a
prefix of the v1 one and v0 actions keep their indices.
"""

from __future__ import annotations

import numpy as np

MOBA_ENV_IDS: tuple[str, ...] = ("Moba5v5-v0", "Moba5v5-v1")
BOT_NAMES: tuple[str, ...] = ("random", "push", "lasthit")

# ---- time ----
STEP_SECONDS = 0.5  # game time per step
MAX_STEPS = 800  # time cap (400 s of game time): the game is a draw
WAVE_STEPS = 60  # a creep wave spawns on every lane every 30 s, the first one on step 1

# ---- map: 32 x 32; side 0's base bottom-left, side 1's top-right ----
MAP_SIZE = 32.0
FOUNTAIN = np.array([[2.0, 2.0], [30.0, 30.0]], dtype=np.float32)  # respawn point, heals friends, burns enemies
FOUNTAIN_RADIUS2 = 4.0**2
FAR = 1.0e4  # where dead units are parked for distance tests
# each lane is a polyline from side 0's ancient through a corner to side 1's ancient
LANES = np.array(
    [
        [[4.0, 4.0], [4.0, 28.0], [28.0, 28.0]],  # top
        [[4.0, 4.0], [16.0, 16.0], [28.0, 28.0]],  # mid
        [[4.0, 4.0], [28.0, 4.0], [28.0, 28.0]],  # bottom
    ],
    dtype=np.float32,
)
NUM_LANES = 3
SEG_LEN = np.linalg.norm(LANES[:, 1:] - LANES[:, :-1], axis=-1).astype(np.float32)  # (3 lanes, 2 segments)
LANE_LEN = SEG_LEN.sum(-1)  # (3,)
LANE_WIDTH = 4.0  # a hero farther than this from its assigned lane is "in the wrong lane"
LANE_GRID = 128  # ... measured at the centre of its cell of a 128 x 128 grid (0.25 units)
TOWER_FRACTION = (0.36, 0.18)  # outer (T1) and inner (T2) tower, as a fraction of the lane from the own ancient

# ---- units: HP, damage per step, attack range, vision radius ----
HERO_HP, HERO_HP_PER_LEVEL = 400.0, 40.0
HERO_DAMAGE, HERO_DAMAGE_PER_LEVEL, GOLD_PER_DAMAGE = 25.0, 3.0, 20.0  # scripted items: +1 damage per 20 gold
HERO_RANGE, HERO_SPEED, HERO_VISION = 3.5, 1.0, 8.0
HERO_REGEN = 0.0025  # fraction of max HP per step
MAX_LEVEL, XP_PER_LEVEL = 10, 100.0  # level L needs 100 * L * (L - 1) / 2 XP
RESPAWN_STEPS, RESPAWN_STEPS_PER_LEVEL = 40, 10
FOUNTAIN_HEAL, FOUNTAIN_DAMAGE = 0.10, 150.0  # fraction of max HP per step to friends; HP per step to enemies
CREEP_HP, CREEP_DAMAGE, CREEP_RANGE, CREEP_SPEED, CREEP_VISION = 160.0, 8.0, 1.8, 0.6, 6.0
CREEPS_PER_WAVE, CREEP_SLOTS_PER_LANE = 3, 6
MEGA_FACTOR = 2.0  # creeps of a side whose enemy has lost every tower spawn with twice the HP and damage
TOWER_HP, TOWER_DAMAGE, TOWER_RANGE, TOWER_VISION = (800.0, 1000.0), 30.0, 5.5, 8.0
ANCIENT_HP = 1500.0
DENY_FRACTION = 0.5  # an allied creep can be denied below half HP

# ---- bounties ----
CREEP_GOLD, CREEP_XP = 40.0, 40.0
HERO_GOLD, HERO_GOLD_PER_LEVEL, HERO_XP, HERO_XP_PER_LEVEL = 150.0, 10.0, 100.0, 20.0
TOWER_GOLD = 100.0  # to every hero of the side that destroys a tower
XP_RADIUS2 = 8.0**2  # enemy deaths within this radius share their XP among the alive heroes there

# ---- unit slots per side: heroes [0, N), buildings [N, N + 7) = towers lane * 2 + tier then the ancient, creeps ----
NUM_TOWERS = 2 * NUM_LANES
NUM_BUILDINGS = NUM_TOWERS + 1
NUM_CREEPS = NUM_LANES * CREEP_SLOTS_PER_LANE
HERO, CREEP, BUILDING = 0, 1, 2

# ---- observation: own block, then k nearest units per kind, F features each ----
MAX_HEROES = 5  # size of the hero-id one-hot
OWN_FEATURES = (
    "alive",
    "hp_fraction",
    "max_hp/1000",
    "level/10",
    "xp_progress_to_next_level",
    "gold/1000",
    "x/32",
    "y/32",
    "respawn_steps/60",
    "damage/100",
    "distance_to_own_fountain/32",
)
SLOT_FEATURES = ("present", "dx/10", "dy/10", "hp_fraction", "hp/1000", "attackable")
# (name, k, which side, unit kind): nearest first; "attackable" is the action mask of the slot's attack action
SLOT_KINDS = (
    ("allied_heroes", 4, "own", HERO),
    ("enemy_heroes", 5, "enemy", HERO),
    ("allied_creeps", 5, "own", CREEP),
    ("enemy_creeps", 5, "enemy", CREEP),
    ("allied_buildings", 2, "own", BUILDING),
    ("enemy_buildings", 3, "enemy", BUILDING),
)
V1_FEATURES = ("heal_ready", "heal_cooldown_fraction", "steps_to_next_wave_fraction")


def _obs_layout() -> dict[str, tuple[int, int]]:
    """Index ranges ``[start, stop)`` of each block of the v1 per-hero observation (v0 stops before ``v1_extra``)."""
    sizes = [
        ("own", len(OWN_FEATURES)),
        ("hero_id", MAX_HEROES),
        ("lane", NUM_LANES),
        ("time", 1),
        ("own_buildings_hp", NUM_BUILDINGS),
        ("enemy_buildings_alive", NUM_BUILDINGS),
    ]
    sizes += [(name, k * len(SLOT_FEATURES)) for name, k, _, _ in SLOT_KINDS]
    sizes.append(("v1_extra", len(V1_FEATURES)))
    layout, start = {}, 0
    for name, size in sizes:
        layout[name] = (start, start + size)
        start += size
    return layout


OBS_LAYOUT = _obs_layout()
OBS_DIM = {0: OBS_LAYOUT["v1_extra"][0], 1: OBS_LAYOUT["v1_extra"][1]}

# ---- actions ----
NOOP = 0
MOVE_DIRECTIONS = ("E", "NE", "N", "NW", "W", "SW", "S", "SE")  # actions 1..8, in the hero's own frame
MOVE0 = 1
ATTACK0 = MOVE0 + len(MOVE_DIRECTIONS)  # 9: then one attack action per target slot below
ATTACK_SLOTS = (("enemy_heroes", 5), ("enemy_creeps", 5), ("enemy_buildings", 3), ("allied_creeps", 5))  # last: deny
NUM_ATTACKS = sum(k for _, k in ATTACK_SLOTS)
_ATTACK_RANGES = tuple(  # slices of the attack actions (minus ATTACK0) of each kind in ATTACK_SLOTS
    slice(sum(k for _, k in ATTACK_SLOTS[:i]), sum(k for _, k in ATTACK_SLOTS[: i + 1]))
    for i in range(len(ATTACK_SLOTS))
)
HEAL = ATTACK0 + NUM_ATTACKS  # 27, v1 only: restore HEAL_FRACTION of max HP, then wait HEAL_COOLDOWN steps
HEAL_FRACTION, HEAL_COOLDOWN = 0.3, 80
NUM_ACTIONS = {0: HEAL, 1: HEAL + 1}
# the observation's slots in order (all kinds together), and which slot each attack action refers to
_SLOT_KIND = np.concatenate([np.full(k, i) for i, (_, k, _, _) in enumerate(SLOT_KINDS)])
_SLOT_START = np.cumsum([0] + [k for _, k, _, _ in SLOT_KINDS])
_SLOT_OF = {name: np.arange(_SLOT_START[i], _SLOT_START[i + 1]) for i, (name, _, _, _) in enumerate(SLOT_KINDS)}
_ATTACK_SLOT = np.concatenate([_SLOT_OF[name] for name, _ in ATTACK_SLOTS])  # (NUM_ATTACKS,)
_ENEMY_SLOT = np.array([SLOT_KINDS[i][2] == "enemy" for i in _SLOT_KIND])
_DENY_SLOT = np.isin(np.arange(len(_SLOT_KIND)), _SLOT_OF["allied_creeps"])


def action_names(version: int) -> tuple[str, ...]:
    """Name of every action of ``version``, by index."""
    names = ["noop", *(f"move_{d}" for d in MOVE_DIRECTIONS)]
    names += [
        f"attack_{kind}_{i}" if kind != "allied_creeps" else f"deny_{i}" for kind, k in ATTACK_SLOTS for i in range(k)
    ]
    return tuple(names + ["heal"] * (version >= 1))


# ---- scores: per-hero component deltas; weights from the paper's Table 6, scaled to the miniature (docs/moba.md) ----
SCORE_NAMES: tuple[str, ...] = (
    "xp",  # XP gained
    "gold",  # gold gained (spending loses nothing)
    "health",  # change of (x + 1 - (1 - x)^4) / 2, x = HP fraction, 0 while dead; respawning is not a gain
    "last_hits",
    "denies",
    "kills",
    "deaths",
    "tower1",  # enemy outer towers: 2/3 paid linearly with HP lost, 1/3 when it falls (team)
    "tower2",  # enemy inner towers, same (team)
    "ancient_hp",  # fraction of the enemy ancient's HP lost (team)
    "megas",  # 1 when the enemy's last tower falls: own creeps become mega creeps (team)
    "wrong_lane",  # seconds alive outside the assigned lane
    "win",  # +1 win / -1 loss at the end of the game, 0 on a draw (team)
)
DEFAULT_SCORE_WEIGHTS: dict[str, float] = {
    "xp": 0.002,
    "gold": 0.006,
    "health": 2.0,
    "last_hits": -0.16,
    "denies": 0.15,
    "kills": -0.6,
    "deaths": -1.0,
    "tower1": 9.0,  # the objectives: Table 6 x 4 (the miniature has a sixth of Dota's buildings)
    "tower2": 12.0,
    "ancient_hp": 20.0,
    "megas": 16.0,
    "wrong_lane": 0.0,  # Table 6: -0.15; off, it taught passive play (docs/moba.md)
    "win": 20.0,
}
_S = {name: i for i, name in enumerate(SCORE_NAMES)}


def _lane_point(lane: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World (x, y) at distance ``s`` along ``lane`` from side 0's ancient (arrays broadcast together)."""
    first = s < SEG_LEN[lane, 0]
    seg = np.where(first, 0, 1)
    u = np.where(first, s, s - SEG_LEN[lane, 0]) / SEG_LEN[lane, seg]
    a, b = LANES[lane, seg], LANES[lane, seg + 1]
    return a[..., 0] + (b[..., 0] - a[..., 0]) * u, a[..., 1] + (b[..., 1] - a[..., 1]) * u


def _to_own_frame(dx: np.ndarray, dy: np.ndarray, side1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World displacement to the side's own frame: side 1 reflects (dx, dy) -> (-dy, -dx), swapping the bases."""
    return np.where(side1, -dy, dx), np.where(side1, -dx, dy)


def _quartic_health(x: np.ndarray) -> np.ndarray:
    """Table 6's health value of HP fraction x: (x + 1 - (1 - x)^4) / 2 (0 at 0, 1 at full health)."""
    return (x + 1.0 - (1.0 - x) ** 4) / 2.0


def _building_positions() -> np.ndarray:
    """World positions (2 sides, 7 buildings, 2) of the towers (lane * 2 + tier) and the ancient."""
    pos = np.zeros((2, NUM_BUILDINGS, 2), dtype=np.float32)
    for lane in range(NUM_LANES):
        for tier, frac in enumerate(TOWER_FRACTION):
            for side, s in ((0, frac * LANE_LEN[lane]), (1, (1 - frac) * LANE_LEN[lane])):
                pos[side, lane * 2 + tier] = _lane_point(np.array(lane), np.array(s, dtype=np.float32))
    pos[:, -1] = LANES[0, [0, -1]]
    return pos


BUILDING_POS = _building_positions()


def _off_lane_table() -> np.ndarray:
    """bool (3 lanes, G, G): whether the centre of grid cell (i, j) is farther than LANE_WIDTH from the lane."""
    centres = (np.arange(LANE_GRID) + 0.5) * MAP_SIZE / LANE_GRID
    p = np.stack(np.meshgrid(centres, centres, indexing="ij"), -1)[:, :, None, None, :]  # (G, G, 1, 1, 2)
    a, b = LANES[:, :-1], LANES[:, 1:]  # (3 lanes, 2 segments, 2)
    u = np.clip(((p - a) * (b - a)).sum(-1) / ((b - a) ** 2).sum(-1), 0, 1)
    dist2 = ((a + u[..., None] * (b - a) - p) ** 2).sum(-1).min(-1)  # (G, G, 3)
    return np.moveaxis(dist2 > LANE_WIDTH**2, -1, 0)


OFF_LANE = _off_lane_table()


class MobaTeamEnv:
    """The lane game as a vectorised 2-sides x N-heroes team environment; see the module docstring for shapes."""

    num_sides: int = 2
    seconds_per_step: float = STEP_SECONDS
    score_names: tuple[str, ...] = SCORE_NAMES
    DEFAULT_SCORE_WEIGHTS: dict[str, float] = DEFAULT_SCORE_WEIGHTS
    bot_names: tuple[str, ...] = BOT_NAMES

    def __init__(self, num_envs: int, seed: int, num_heroes: int = 5, version: int = 0):
        if num_heroes not in (1, 3, 5):
            raise ValueError(f"num_heroes must be 1, 3 or 5, got {num_heroes}")
        if version not in (0, 1):
            raise ValueError(f"version must be 0 or 1, got {version}")
        self.num_envs, self.num_heroes, self.version = num_envs, num_heroes, version
        self.env_id = MOBA_ENV_IDS[version]
        self.num_actions = NUM_ACTIONS[version]
        self.obs_shape = (OBS_DIM[version],)
        self.rng = np.random.default_rng(seed)
        e, n = num_envs, num_heroes
        self.units = u = n + NUM_BUILDINGS + NUM_CREEPS  # unit slots per side
        self.creeps = slice(n + NUM_BUILDINGS, u)

        # static per-slot properties (U,)
        kind = np.full(u, CREEP)
        kind[:n], kind[n : n + NUM_BUILDINGS] = HERO, BUILDING
        self.kind = kind
        attack_range = np.where(kind == HERO, HERO_RANGE, np.where(kind == CREEP, CREEP_RANGE, TOWER_RANGE))
        self.range2 = (attack_range**2).astype(np.float32)
        vision = np.where(kind == HERO, HERO_VISION, np.where(kind == CREEP, CREEP_VISION, TOWER_VISION))
        self.vision2 = (vision**2).astype(np.float32)
        # creeps and buildings prefer creeps: a hero counts as 1000 units farther when they pick their target
        self.preference = np.where(kind == HERO, 1000.0, 0.0).astype(np.float32)
        self.creep_lane = np.repeat(np.arange(NUM_LANES), CREEP_SLOTS_PER_LANE)
        self.building_hp = np.array([TOWER_HP[t] for _ in range(NUM_LANES) for t in range(2)] + [ANCIENT_HP], "f4")
        # move actions -> world displacement per side (actions are in the hero's own frame)
        angle = np.arange(8) * np.pi / 4
        own = np.zeros((self.num_actions, 2), dtype=np.float32)
        own[MOVE0 : MOVE0 + 8] = np.stack([np.cos(angle), np.sin(angle)], -1) * HERO_SPEED
        self.move = np.stack([own, -own[:, ::-1]])  # (2, A, 2)
        self.hero_id = np.eye(MAX_HEROES, dtype=np.float32)[:n]

        # dynamic state
        self.x = np.zeros((e, 2, u), dtype=np.float32)
        self.y = np.zeros((e, 2, u), dtype=np.float32)
        self.hp = np.zeros((e, 2, u), dtype=np.float32)
        self.max_hp = np.ones((e, 2, u), dtype=np.float32)
        self.damage = np.zeros((e, 2, u), dtype=np.float32)
        self.alive = np.zeros((e, 2, u), dtype=bool)
        self.creep_s = np.zeros((e, 2, NUM_CREEPS), dtype=np.float32)  # distance along the lane from side 0's ancient
        self.xp = np.zeros((e, 2, n), dtype=np.float32)
        self.gold = np.zeros((e, 2, n), dtype=np.float32)
        self.level = np.ones((e, 2, n), dtype=np.float32)
        self.respawn = np.zeros((e, 2, n), dtype=np.int64)  # steps until a dead hero respawns
        self.heal_cooldown = np.zeros((e, 2, n), dtype=np.int64)
        self.lane = np.zeros((e, 2, n), dtype=np.int64)
        self.megas = np.zeros((e, 2), dtype=bool)  # side's creeps are mega creeps
        self.t = np.zeros(e, dtype=np.int64)
        self._needs_reset = True

    # ------------------------------------------------------------------ public API
    def reset(self) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Start a new game in every env. Returns ``obs`` float32 (E, 2, N, D) and ``info``."""
        self._reset_games(np.ones(self.num_envs, dtype=bool))
        self._needs_reset = False
        zeros = np.zeros(self.num_envs)
        return self._observe(), self._info(zeros.astype(bool), np.zeros((self.num_envs, 2)), zeros, zeros)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """Advance every game by one step (0.5 s). ``actions`` int (E, 2, N); illegal ones are no-ops.

        Returns ``obs`` float32 (E, 2, N, D), ``scores`` float32 (E, 2, N, C), ``done`` bool (E,), ``info``.
        """
        if self._needs_reset:
            raise RuntimeError("call reset() before step()")
        e, n, u = self.num_envs, self.num_heroes, self.units
        act = np.asarray(actions).astype(np.int64).reshape(e, 2, n)
        act = np.where((act >= 0) & (act < self.num_actions), act, NOOP)
        act = np.where(np.take_along_axis(self._mask, act[..., None], -1)[..., 0], act, NOOP)
        scores = np.zeros((e, 2, n, len(SCORE_NAMES)), dtype=np.float32)
        health_before = self._health_value()

        # -- attacks, all simultaneous, with the positions of the last observation --
        # heroes hit the unit of their chosen slot (flat index side * U + j within the env, -1: no attack)
        slot = act - ATTACK0
        hits = (slot >= 0) & (slot < NUM_ATTACKS)
        hero_target = np.where(
            hits, np.take_along_axis(self._slot_unit, np.clip(slot, 0, NUM_ATTACKS - 1)[..., None], -1)[..., 0], -1
        )
        # creeps and buildings hit the target they picked at the last observation; creeps that hit stand still
        unit_target, unit_hits = self._unit_target, self._unit_hits
        env_base = (np.arange(e) * 2 * u)[:, None, None]
        other_side = (np.array([1, 0]) * u)[None, :, None]
        flat_targets = [
            (env_base + np.where(hits, hero_target, 0)).ravel(),
            (env_base + other_side + unit_target).ravel(),
        ]
        weights = [(self.damage[:, :, :n] * hits).ravel(), (self.damage[:, :, n:] * unit_hits).ravel()]
        # the fountain burns enemy heroes near it
        fx, fy = FOUNTAIN[::-1, 0][None, :, None], FOUNTAIN[::-1, 1][None, :, None]
        burnt = ((self.x[:, :, :n] - fx) ** 2 + (self.y[:, :, :n] - fy) ** 2 <= FOUNTAIN_RADIUS2) & self.alive[:, :, :n]
        flat_targets.append((env_base + (np.array([0, 1]) * u)[None, :, None] + np.arange(n)).ravel())
        weights.append((burnt * FOUNTAIN_DAMAGE).ravel())
        damage = np.bincount(np.concatenate(flat_targets), np.concatenate(weights), minlength=e * 2 * u)
        hp_after = self.hp - damage.reshape(e, 2, u).astype(np.float32)
        if self.version >= 1:  # the v1 heal lands in the same step as the damage
            healing = act == HEAL
            hp_after[:, :, :n] += healing * HEAL_FRACTION * self.max_hp[:, :, :n]
            self.heal_cooldown = np.where(healing, HEAL_COOLDOWN, np.maximum(self.heal_cooldown - 1, 0))
        died = self.alive & (hp_after <= 0)
        building_lost = self.hp[:, :, n : n + NUM_BUILDINGS] - np.maximum(hp_after[:, :, n : n + NUM_BUILDINGS], 0)
        building_lost /= self.building_hp

        # -- credit: a unit that dies is last-hit by a hero that hit it this step (a random one if several) --
        hero_target = hero_target.reshape(e, 2 * n)
        died_flat = died.reshape(e, 2 * u)
        killed = hits.reshape(e, 2 * n) & np.take_along_axis(died_flat, np.maximum(hero_target, 0), -1)
        priority = self.rng.random((e, 2 * n))
        rival = (hero_target[:, :, None] == hero_target[:, None, :]) & killed[:, None, :]
        credited = killed & ~(rival & (priority[:, None, :] > priority[:, :, None])).any(-1)
        target_side, target_unit = hero_target // u, hero_target % u
        enemy = target_side != np.repeat([0, 1], n)[None]
        last_hit = credited & enemy & (self.kind[target_unit] == CREEP)
        deny = credited & ~enemy
        kill = credited & enemy & (self.kind[target_unit] == HERO)
        victim = np.clip(target_side * n + np.minimum(target_unit, n - 1), 0, 2 * n - 1)
        victim_level = np.take_along_axis(self.level.reshape(e, 2 * n), victim, -1)
        gold = last_hit * CREEP_GOLD + kill * (HERO_GOLD + HERO_GOLD_PER_LEVEL * victim_level)
        denied = np.zeros(e * 2 * u, dtype=bool)
        denied[(np.arange(e)[:, None] * 2 * u + np.maximum(hero_target, 0))[deny]] = True

        # -- XP: every enemy death that was not denied is shared among the alive heroes within XP_RADIUS --
        hero_alive = self.alive[:, :, :n] & ~died[:, :, :n]
        bounty = np.zeros((e, 2, u), dtype=np.float32)
        bounty[:, :, :n] = HERO_XP + HERO_XP_PER_LEVEL * self.level
        bounty[:, :, self.creeps] = CREEP_XP
        bounty *= died & ~denied.reshape(e, 2, u)
        near = (self._hero_d2 <= XP_RADIUS2) & hero_alive[..., None]
        share = bounty[:, ::-1] / np.maximum(near.sum(2), 1)
        xp = (near * share[:, :, None, :]).sum(-1)

        # -- buildings: score for the side that damages them, team gold and megas when they fall --
        tower_fell = died[:, :, n : n + NUM_TOWERS]
        towers_were_up = self.alive[:, :, n : n + NUM_TOWERS].any(-1)
        gold = gold.reshape(e, 2, n) + TOWER_GOLD * tower_fell[:, ::-1].sum(-1, keepdims=True)
        paid = 2 / 3 * building_lost[:, ::-1] + 1 / 3 * died[:, ::-1, n : n + NUM_BUILDINGS]  # per enemy building
        scores[..., _S["tower1"]] = paid[:, :, 0:NUM_TOWERS:2].sum(-1)[..., None]
        scores[..., _S["tower2"]] = paid[:, :, 1:NUM_TOWERS:2].sum(-1)[..., None]
        scores[..., _S["ancient_hp"]] = building_lost[:, ::-1, -1][..., None]
        megas = towers_were_up[:, ::-1] & ~(self.alive[:, :, n : n + NUM_TOWERS] & ~tower_fell).any(-1)[:, ::-1]
        self.megas |= megas
        scores[..., _S["megas"]] = megas[..., None]

        # -- apply damage and deaths --
        self.hp = np.maximum(hp_after, 0)
        self.alive &= ~died
        hero_died = died[:, :, :n]
        respawn_steps = (RESPAWN_STEPS + RESPAWN_STEPS_PER_LEVEL * self.level).astype(np.int64)
        self.respawn = np.where(hero_died, respawn_steps, self.respawn)
        ancient_down = ~self.alive[:, :, n + NUM_TOWERS]
        self.t += 1
        over = ancient_down.any(-1) | (self.t >= MAX_STEPS)
        outcome = (ancient_down[:, ::-1].astype(np.float32) - ancient_down) * over[:, None]
        scores[..., _S["win"]] = outcome[..., None]

        # -- movement: heroes that chose a move; creeps that did not attack walk their lane --
        moving = self.move[np.arange(2)[None, :, None], act] * hero_alive[..., None]
        self.x[:, :, :n] = np.clip(self.x[:, :, :n] + moving[..., 0], 0.5, MAP_SIZE - 0.5)
        self.y[:, :, :n] = np.clip(self.y[:, :, :n] + moving[..., 1], 0.5, MAP_SIZE - 0.5)
        creep_walks = self.alive[:, :, self.creeps] & ~unit_hits[:, :, NUM_BUILDINGS:]
        step = np.array([CREEP_SPEED, -CREEP_SPEED], dtype=np.float32)[None, :, None]
        self.creep_s = np.clip(self.creep_s + creep_walks * step, 0, LANE_LEN[self.creep_lane])
        self.x[:, :, self.creeps], self.y[:, :, self.creeps] = _lane_point(self.creep_lane, self.creep_s)

        # -- respawn at the fountain, regeneration, fountain healing --
        self.respawn = np.maximum(self.respawn - 1, 0)
        respawned = ~self.alive[:, :, :n] & (self.respawn == 0) & ~hero_died
        self._place_heroes(respawned)
        at_fountain = (self.x[:, :, :n] - FOUNTAIN[None, :, 0, None]) ** 2 + (
            self.y[:, :, :n] - FOUNTAIN[None, :, 1, None]
        ) ** 2 <= FOUNTAIN_RADIUS2
        regen = (HERO_REGEN + FOUNTAIN_HEAL * at_fountain) * self.max_hp[:, :, :n] * self.alive[:, :, :n]
        self.hp[:, :, :n] = np.minimum(self.hp[:, :, :n] + regen, self.max_hp[:, :, :n])

        # -- experience -> level -> max HP; gold -> damage (scripted items) --
        self.xp += xp
        self.gold += gold
        self._level_up()

        # -- creep waves --
        self._spawn_creeps(self.t % WAVE_STEPS == 1)

        # -- per-hero scores --
        scores[..., _S["xp"]] = xp
        scores[..., _S["gold"]] = gold
        scores[..., _S["health"]] = np.where(respawned, 0.0, self._health_value() - health_before)
        scores[..., _S["last_hits"]] = last_hit.reshape(e, 2, n)
        scores[..., _S["denies"]] = deny.reshape(e, 2, n)
        scores[..., _S["kills"]] = kill.reshape(e, 2, n)
        scores[..., _S["deaths"]] = hero_died
        cell_x = np.clip(self.x[:, :, :n] * LANE_GRID / MAP_SIZE, 0, LANE_GRID - 1).astype(np.int64)
        cell_y = np.clip(self.y[:, :, :n] * LANE_GRID / MAP_SIZE, 0, LANE_GRID - 1).astype(np.int64)
        off_lane = OFF_LANE[self.lane, cell_x, cell_y] & self.alive[:, :, :n]
        scores[..., _S["wrong_lane"]] = off_lane * STEP_SECONDS

        game_length = np.where(over, self.t, 0)
        time = (self.t * STEP_SECONDS).astype(np.float32)
        if over.any():
            self._reset_games(over)
        return self._observe(), scores, over.copy(), self._info(over, outcome, game_length, time)

    def bot_actions(
        self,
        name: str,
        obs: np.ndarray,
        info: dict[str, np.ndarray],
        side: np.ndarray,
        rng: np.random.Generator,
        games: np.ndarray | None = None,
    ) -> np.ndarray:
        """Actions int64 (E, N) of bot ``name`` for the heroes of side ``side[e]`` in ``games`` (bool (E,); None: every
        game), 0 (no-op) elsewhere.

        The interface of ``cleanfive.envs.teams``; the bots read the env's last observation from the env itself, so
        ``obs`` and ``info`` go unused. Their rules are vectorised over every game (as cheap as over a few) and draw
        the same random numbers whatever ``games`` is.
        """
        act = bot_actions(name, self, side, rng)
        return act if games is None else np.where(games[:, None], act, NOOP)

    def close(self) -> None:
        """Nothing to release (the game is plain NumPy); present for the same interface as ``BoardTeamEnv``."""

    def state_dict(self) -> dict:
        """Everything that decides the next steps (arrays and the generator), so that a run can resume bit for bit."""
        arrays = {k: v.copy() for k, v in vars(self).items() if isinstance(v, np.ndarray)}
        return {"arrays": arrays, "rng": self.rng.bit_generator.state, "needs_reset": self._needs_reset}

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` taken from a world with the same number of envs, heroes and version."""
        for k, v in state["arrays"].items():  # some arrays (caches of the last step) exist only after a step
            mine = getattr(self, k, None)
            if mine is not None and mine.shape != v.shape:
                raise ValueError(f"world state {k!r} has shape {v.shape}, this world {mine.shape}")
            setattr(self, k, v.copy())
        self.rng.bit_generator.state = state["rng"]
        self._needs_reset = state["needs_reset"]

    def render(self, env_index: int = 0) -> np.ndarray:
        """Top-down frame (256, 256, 3) uint8 of one env, from side 0 (blue, bottom-left) against side 1 (red).

        Lanes are sand, towers squares, ancients big squares, creeps small dots, heroes discs with an HP bar; the
        area outside side 0's vision is darkened (fog of war), grey marks destroyed buildings.
        """
        scale = 8
        size = int(MAP_SIZE) * scale
        py, px = np.mgrid[0:size, 0:size]
        wx, wy = (px + 0.5) / scale, MAP_SIZE - (py + 0.5) / scale  # world coordinates of pixel centres, y up

        def disc(cx: float, cy: float, radius: float) -> np.ndarray:
            return (wx - cx) ** 2 + (wy - cy) ** 2 <= radius**2

        img = np.empty((size, size, 3), dtype=np.float32)
        img[:] = (34, 85, 34)  # grass
        for lane in range(NUM_LANES):
            lx, ly = _lane_point(np.array(lane), np.linspace(0, LANE_LEN[lane], 600, dtype=np.float32))
            rows, cols = ((MAP_SIZE - ly) * scale).astype(int), (lx * scale).astype(int)
            for d in (-1, 0, 1):  # three pixels wide
                img[np.clip(rows + d, 0, size - 1), np.clip(cols, 0, size - 1)] = (194, 178, 128)
        colours = np.array([[60, 110, 230], [220, 60, 50]], dtype=np.float32)
        dead_building = np.array([110, 110, 110], dtype=np.float32)
        x, y, alive, hp, max_hp = (a[env_index] for a in (self.x, self.y, self.alive, self.hp, self.max_hp))
        ancient = self.num_heroes + NUM_TOWERS
        for side in range(2):
            fountain = disc(*FOUNTAIN[side], np.sqrt(FOUNTAIN_RADIUS2))
            img[fountain] = 0.6 * img[fountain] + 0.4 * colours[side]
            for j in range(self.units):
                if self.kind[j] == BUILDING:
                    half = 1.2 if j == ancient else 0.7
                    square = (np.abs(wx - x[side, j]) <= half) & (np.abs(wy - y[side, j]) <= half)
                    img[square] = colours[side] if alive[side, j] else dead_building
                elif not alive[side, j]:
                    continue
                elif self.kind[j] == CREEP:
                    img[disc(x[side, j], y[side, j], 0.3)] = 0.8 * colours[side]
                else:
                    img[disc(x[side, j], y[side, j], 0.6)] = colours[side]
                    bar = (np.abs(wy - y[side, j] - 1.0) <= 0.12) & (np.abs(wx - x[side, j]) <= 0.8)
                    filled = bar & (wx - x[side, j] + 0.8 <= 1.6 * hp[side, j] / max_hp[side, j])
                    img[bar], img[filled] = (40, 40, 40), (80, 230, 80)
        seen = np.zeros((size, size), dtype=bool)
        for j in np.flatnonzero(alive[0]):
            seen |= disc(x[0, j], y[0, j], np.sqrt(self.vision2[j]))
        img[~seen] *= 0.55  # fog of war of side 0
        return img.clip(0, 255).astype(np.uint8)

    # ------------------------------------------------------------------ internals
    def _info(
        self, over: np.ndarray, outcome: np.ndarray, game_length: np.ndarray, time: np.ndarray
    ) -> dict[str, np.ndarray]:
        return {
            "action_mask": self._mask.copy(),
            "acting": self.alive[:, :, : self.num_heroes].copy(),
            "game_over": over.copy(),
            "outcome": outcome.astype(np.float32),
            "game_length": game_length.astype(np.int64),
            "time": time.astype(np.float32),
        }

    def _reset_games(self, games: np.ndarray) -> None:
        """Put the envs where ``games`` (bool (E,)) is True at the start of a new game."""
        n, g = self.num_heroes, games[:, None, None]
        building_hp = np.concatenate([np.full(n, HERO_HP), self.building_hp, np.full(NUM_CREEPS, CREEP_HP)])
        self.max_hp = np.where(g, building_hp.astype(np.float32), self.max_hp)
        self.hp = np.where(g, self.max_hp, self.hp)
        self.damage = np.where(
            g,
            np.where(self.kind == HERO, HERO_DAMAGE, np.where(self.kind == CREEP, CREEP_DAMAGE, TOWER_DAMAGE)).astype(
                np.float32
            ),
            self.damage,
        )
        self.alive = np.where(g, self.kind != CREEP, self.alive)
        bx = np.concatenate([np.zeros((2, n)), BUILDING_POS[..., 0], np.zeros((2, NUM_CREEPS))], -1)
        by = np.concatenate([np.zeros((2, n)), BUILDING_POS[..., 1], np.zeros((2, NUM_CREEPS))], -1)
        self.x = np.where(g, bx.astype(np.float32), self.x)
        self.y = np.where(g, by.astype(np.float32), self.y)
        for name in ("xp", "gold", "respawn", "heal_cooldown"):
            setattr(self, name, np.where(g, 0, getattr(self, name)).astype(getattr(self, name).dtype))
        self.level = np.where(g, 1.0, self.level).astype(np.float32)
        # lane assignment (a randomisation of OpenAI Five): heroes spread over the lanes from a random first lane
        first = self.rng.integers(0, NUM_LANES, size=(self.num_envs, 2, 1))
        self.lane = np.where(g, (np.arange(n) + first) % NUM_LANES, self.lane)
        self.megas[games] = False
        self.t[games] = 0
        self._place_heroes(np.broadcast_to(g, (self.num_envs, 2, n)))

    def _place_heroes(self, which: np.ndarray) -> None:
        """(Re)spawn the heroes where ``which`` (bool (E, 2, N)) at their fountain, alive with full HP."""
        jitter = self.rng.uniform(-1.0, 1.0, size=(*which.shape, 2)).astype(np.float32)
        n = self.num_heroes
        self.x[:, :, :n] = np.where(which, FOUNTAIN[None, :, 0, None] + jitter[..., 0], self.x[:, :, :n])
        self.y[:, :, :n] = np.where(which, FOUNTAIN[None, :, 1, None] + jitter[..., 1], self.y[:, :, :n])
        self.alive[:, :, :n] |= which
        self.hp[:, :, :n] = np.where(which, self.max_hp[:, :, :n], self.hp[:, :, :n])

    def _level_up(self) -> None:
        """Level from XP (level L needs 100 L (L - 1) / 2); max HP from level (HP fraction kept); damage from both."""
        n = self.num_heroes
        level = np.floor((1 + np.sqrt(1 + 8 * self.xp / XP_PER_LEVEL)) / 2)
        self.level = np.minimum(level, MAX_LEVEL).astype(np.float32)
        max_hp = HERO_HP + HERO_HP_PER_LEVEL * (self.level - 1)
        self.hp[:, :, :n] = np.where(self.alive[:, :, :n], self.hp[:, :, :n] + max_hp - self.max_hp[:, :, :n], 0)
        self.max_hp[:, :, :n] = max_hp
        self.damage[:, :, :n] = HERO_DAMAGE + HERO_DAMAGE_PER_LEVEL * (self.level - 1) + self.gold / GOLD_PER_DAMAGE

    def _spawn_creeps(self, due: np.ndarray) -> None:
        """Spawn a wave of CREEPS_PER_WAVE creeps per lane and side in the envs where ``due`` (bool (E,))."""
        if not due.any():
            return
        e = self.num_envs
        free = ~self.alive[:, :, self.creeps].reshape(e, 2, NUM_LANES, CREEP_SLOTS_PER_LANE)
        rank = np.cumsum(free, -1)  # 1 for the first free slot of the lane, 2 for the second...
        new = (free & (rank <= CREEPS_PER_WAVE) & due[:, None, None, None]).reshape(e, 2, NUM_CREEPS)
        behind = (0.5 * (CREEPS_PER_WAVE - rank)).reshape(e, 2, NUM_CREEPS)  # the wave walks in a file
        lane_len = LANE_LEN[self.creep_lane]
        start = np.where(np.array([True, False])[None, :, None], behind, lane_len - behind).astype(np.float32)
        self.creep_s = np.where(new, start, self.creep_s)
        strength = np.where(self.megas, MEGA_FACTOR, 1.0)[:, :, None]
        cx, cy = _lane_point(self.creep_lane, self.creep_s)
        c = self.creeps
        self.x[:, :, c], self.y[:, :, c] = np.where(new, cx, self.x[:, :, c]), np.where(new, cy, self.y[:, :, c])
        self.max_hp[:, :, c] = np.where(new, CREEP_HP * strength, self.max_hp[:, :, c])
        self.hp[:, :, c] = np.where(new, self.max_hp[:, :, c], self.hp[:, :, c])
        self.damage[:, :, c] = np.where(new, CREEP_DAMAGE * strength, self.damage[:, :, c])
        self.alive[:, :, c] |= new

    def _health_value(self) -> np.ndarray:
        """Quartic health value (E, 2, N) of each hero, 0 while dead."""
        n = self.num_heroes
        return _quartic_health(self.hp[:, :, :n] / self.max_hp[:, :, :n]) * self.alive[:, :, :n]

    def _pick_targets(self, d2: np.ndarray, targetable: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Target of each creep and building: the nearest targetable enemy in range, heroes last.

        d2: float32 (E, U - N, U) attacker -> enemy unit; targetable: bool (E, U) enemy units.
        Returns the target's index int (E, U - N) and whether there is one, bool (E, U - N).
        """
        key = np.where(d2 <= self.range2[self.num_heroes :, None], d2, np.inf)
        key += np.where(targetable, self.preference, np.inf).astype(np.float32)[:, None, :]
        target = key.argmin(-1)
        return target, np.take_along_axis(key, target[..., None], -1)[..., 0] < np.inf

    def _observe(self) -> np.ndarray:
        """Build obs (E, 2, N, D), the action mask and the slot -> unit map from the current state.

        Also caches what the next ``step`` resolves attacks with: the targets that creeps and buildings picked and
        the squared distances hero -> enemy unit (``_hero_d2``, huge where either is dead; for sharing XP).
        """
        e, n, u = self.num_envs, self.num_heroes, self.units
        alive = self.alive
        # buildings "block": an inner tower is invulnerable while the outer tower of its lane stands, the ancient
        # while every inner tower stands
        towers = alive[:, :, n : n + NUM_TOWERS].reshape(e, 2, NUM_LANES, 2)
        targetable = alive.copy()
        targetable[:, :, n + 1 : n + NUM_TOWERS : 2] &= ~towers[..., 0]
        targetable[:, :, n + NUM_TOWERS] &= ~towers[..., 1].all(-1)

        # squared distances between side 0's unit i and side 1's unit j, (E, U, U); dead units are parked far off
        # the map (side 0's and side 1's at opposite corners), so no range or vision test ever includes them
        far = np.array([FAR, -FAR], dtype=np.float32)[None, :, None]
        x, y = np.where(alive, self.x, far), np.where(alive, self.y, far)
        dist = x[:, 1, None, :] - x[:, 0, :, None]
        dy = y[:, 1, None, :] - y[:, 0, :, None]
        dist *= dist
        dy *= dy
        dist += dy
        # fog of war: enemy unit j is visible to side s when within the vision radius of a unit of side s
        visible = np.stack([(dist <= self.vision2[:, None]).any(1), (dist <= self.vision2).any(2)], 1)  # (E, 2, U)
        self._hero_d2 = np.stack([dist[:, :n, :], dist[:, :, :n].transpose(0, 2, 1)], 1)  # (E, 2, N, U)
        enemy_d2 = np.where(visible[:, :, None, :], self._hero_d2, np.inf)  # hero -> visible enemy unit
        # creeps and buildings pick the nearest enemy in range, creeps and buildings before heroes
        picks = [
            self._pick_targets(dist[:, n:, :], targetable[:, 1]),
            self._pick_targets(dist[:, :, n:].transpose(0, 2, 1), targetable[:, 0]),
        ]
        self._unit_target = np.stack([p[0] for p in picks], 1)  # (E, 2, U - N) index among the enemy's units
        self._unit_hits = np.stack([p[1] for p in picks], 1)  # (E, 2, U - N) has a target in range
        hx, hy = self.x[:, :, :n, None], self.y[:, :, :n, None]
        own_d2 = np.where(
            alive[:, :, None, :], (self.x[:, :, None, :] - hx) ** 2 + (self.y[:, :, None, :] - hy) ** 2, np.inf
        )
        own_d2[:, :, np.arange(n), np.arange(n)] = np.inf  # a hero is not its own ally slot

        hero_alive = alive[:, :, :n]
        hp_frac = self.hp / self.max_hp
        obs = np.zeros((e, 2, n, self.obs_shape[0]), dtype=np.float32)
        # positions in each viewing side's own frame: (E, viewer, unit's side, U); side 1 sees (32 - y, 32 - x)
        frame_x = np.stack([self.x, MAP_SIZE - self.y], 1)
        frame_y = np.stack([self.y, MAP_SIZE - self.x], 1)
        own_x, own_y = frame_x[:, [0, 1], [0, 1], :n], frame_y[:, [0, 1], [0, 1], :n]  # (E, 2, N)

        # k nearest visible units of each kind; flat indices address the flattened (E, 2, U) / (E, 2, 2, U) arrays
        hero_row = np.arange(e * 2 * n).reshape(e, 2, n, 1)
        ranges = {HERO: (0, n), BUILDING: (n, n + NUM_BUILDINGS), CREEP: (n + NUM_BUILDINGS, u)}
        units, dists = [], []
        for _, k, whose, kind in SLOT_KINDS:
            lo, hi = ranges[kind]
            sub = (enemy_d2 if whose == "enemy" else own_d2)[..., lo:hi]
            if hi - lo < k:
                sub = np.concatenate([sub, np.full((*sub.shape[:-1], k - hi + lo), np.inf, np.float32)], -1)
            order = np.argsort(sub, -1)[..., :k]
            dists.append(np.take(sub, hero_row * sub.shape[-1] + order))
            units.append(lo + np.minimum(order, hi - lo - 1))  # index within its side
        dist2, unit = np.concatenate(dists, -1), np.concatenate(units, -1)  # (E, 2, N, slots)
        side = np.arange(2)[None, :, None, None]
        unit_side = side ^ _ENEMY_SLOT  # (1, 2, 1, slots): the side the slot's unit belongs to
        present = dist2 < np.inf
        flat = (np.arange(e)[:, None, None, None] * 2 + unit_side) * u + unit
        in_frame = (np.arange(e)[:, None, None, None] * 4 + side * 2 + unit_side) * u + unit
        frac, hp = np.take(hp_frac, flat), np.take(self.hp, flat)
        # attackable: enemies in range that are not protected; allied creeps in range below half HP (deny)
        kind_ok = np.where(_ENEMY_SLOT, np.take(targetable, flat), _DENY_SLOT & (frac < DENY_FRACTION))
        ok = present & (dist2 <= HERO_RANGE**2) & hero_alive[..., None] & kind_ok
        start, stop = OBS_LAYOUT[SLOT_KINDS[0][0]][0], OBS_LAYOUT[SLOT_KINDS[-1][0]][1]
        feats = obs[..., start:stop].reshape(*present.shape, len(SLOT_FEATURES))  # a view into obs
        feats[..., 0] = present
        feats[..., 1] = (np.take(frame_x, in_frame) - own_x[..., None]) / 10 * present
        feats[..., 2] = (np.take(frame_y, in_frame) - own_y[..., None]) / 10 * present
        feats[..., 3] = frac * present
        feats[..., 4] = hp / 1000 * present
        feats[..., 5] = ok

        self._slot_unit = (unit_side * u + unit)[..., _ATTACK_SLOT]  # side * U + index, per attack action
        self._slot_d2 = dist2[..., _ATTACK_SLOT]  # for the scripted bots
        self._slot_hp = hp[..., _ATTACK_SLOT]
        mask = np.zeros((e, 2, n, self.num_actions), dtype=bool)
        mask[..., NOOP] = True
        mask[..., MOVE0 : MOVE0 + 8] = hero_alive[..., None]
        mask[..., ATTACK0 : ATTACK0 + NUM_ATTACKS] = ok[..., _ATTACK_SLOT]
        if self.version >= 1:
            mask[..., HEAL] = hero_alive & (self.heal_cooldown == 0) & (self.hp[:, :, :n] < self.max_hp[:, :, :n])
        self._mask = mask

        level_xp = XP_PER_LEVEL * self.level * (self.level - 1) / 2
        own = (
            hero_alive,
            hp_frac[:, :, :n],
            self.max_hp[:, :, :n] / 1000,
            self.level / 10,
            np.where(self.level < MAX_LEVEL, (self.xp - level_xp) / (XP_PER_LEVEL * self.level), 1.0),
            self.gold / 1000,
            own_x / MAP_SIZE,
            own_y / MAP_SIZE,
            self.respawn / 60,
            self.damage[:, :, :n] / 100,
            np.sqrt((own_x - FOUNTAIN[0, 0]) ** 2 + (own_y - FOUNTAIN[0, 1]) ** 2) / MAP_SIZE,
        )
        for i, value in enumerate(own):
            obs[..., i] = value
        buildings = slice(n, n + NUM_BUILDINGS)
        obs[..., slice(*OBS_LAYOUT["hero_id"])] = self.hero_id
        obs[..., slice(*OBS_LAYOUT["lane"])] = np.eye(NUM_LANES, dtype=np.float32)[self.lane]
        obs[..., OBS_LAYOUT["time"][0]] = (self.t / MAX_STEPS)[:, None, None]
        obs[..., slice(*OBS_LAYOUT["own_buildings_hp"])] = hp_frac[:, :, None, buildings]
        obs[..., slice(*OBS_LAYOUT["enemy_buildings_alive"])] = alive[:, ::-1, None, buildings]
        if self.version >= 1:
            v1 = OBS_LAYOUT["v1_extra"][0]
            obs[..., v1] = hero_alive & (self.heal_cooldown == 0)
            obs[..., v1 + 1] = self.heal_cooldown / HEAL_COOLDOWN
            obs[..., v1 + 2] = (((-self.t) % WAVE_STEPS + 1) / WAVE_STEPS)[:, None, None]  # waves: t % 60 == 1
        return obs


def make_moba(env_id: str, num_envs: int, seed: int, num_heroes: int = 5) -> MobaTeamEnv:
    """``MobaTeamEnv`` for ``env_id`` in ``MOBA_ENV_IDS`` (``Moba5v5-v0`` or ``-v1``)."""
    if env_id not in MOBA_ENV_IDS:
        raise ValueError(f"unknown moba env_id {env_id!r}; expected one of {MOBA_ENV_IDS}")
    return MobaTeamEnv(num_envs, seed, num_heroes=num_heroes, version=MOBA_ENV_IDS.index(env_id))


# ---------------------------------------------------------------------- scripted bots
def _sample(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform choice among the True entries of the last axis of bool ``mask``."""
    return np.where(mask, rng.random(mask.shape), -1.0).argmax(-1)


def _move_towards(env: MobaTeamEnv, side: np.ndarray, tx: np.ndarray, ty: np.ndarray) -> np.ndarray:
    """Move action (E, N) of each hero of side ``side[e]`` closest in angle to the world point (tx, ty)."""
    rows, n = np.arange(env.num_envs), env.num_heroes
    dx, dy = tx - env.x[rows, side, :n], ty - env.y[rows, side, :n]
    ox, oy = _to_own_frame(dx, dy, (side == 1)[:, None])
    return MOVE0 + np.round(np.arctan2(oy, ox) / (np.pi / 4)).astype(np.int64) % 8


def _walk_lane(env: MobaTeamEnv, side: np.ndarray) -> np.ndarray:
    """Move (E, N) down each hero's assigned lane towards the enemy ancient: the lane's corner first."""
    rows, n = np.arange(env.num_envs), env.num_heroes
    corner = LANES[env.lane[rows, side], 1]  # (E, N, 2)
    end = LANES[0, np.where(side == 0, -1, 0)][:, None, :]  # (E, 1, 2) the enemy ancient
    hx, hy = env.x[rows, side, :n], env.y[rows, side, :n]
    past_corner = (hx - end[..., 0]) ** 2 + (hy - end[..., 1]) ** 2 < ((corner - end) ** 2).sum(-1)
    target = np.where(past_corner[..., None], end, corner)
    return _move_towards(env, side, target[..., 0], target[..., 1])


def bot_actions(name: str, env: MobaTeamEnv, side: int | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Actions int64 (E, N) of a scripted bot for the heroes of ``side`` (int, or int (E,) per env).

    The bots read the env's last observation (its masks and target slots), so call this between ``step`` calls.

    * ``random``: a uniformly random legal action.
    * ``push``: attack the nearest attackable enemy (hero, creep or building); otherwise walk down the assigned lane.
    * ``lasthit``: below 25 % HP walk to the fountain, and stay there until 60 %; otherwise focus the weakest
      attackable enemy hero; else last-hit the weakest enemy creep that one hit kills; else hit an attackable enemy
      building; else play like ``push``.
    """
    if name not in BOT_NAMES:
        raise ValueError(f"unknown bot {name!r}; expected one of {BOT_NAMES}")
    rows, n = np.arange(env.num_envs), env.num_heroes
    side = np.broadcast_to(np.asarray(side, dtype=np.int64), (env.num_envs,))
    mask = env._mask[rows, side]  # (E, N, A)
    if name == "random":
        return _sample(mask, rng)
    heroes, creeps, buildings, deny = _ATTACK_RANGES
    attack_ok = mask[..., ATTACK0 : ATTACK0 + NUM_ATTACKS]
    enemy_d2 = np.where(attack_ok, env._slot_d2[rows, side], np.inf)[..., : deny.start]
    act = np.where(np.isfinite(enemy_d2).any(-1), ATTACK0 + enemy_d2.argmin(-1), _walk_lane(env, side))
    if name == "push":
        return act
    # lasthit: later rules take precedence
    hp = np.where(attack_ok, env._slot_hp[rows, side], np.inf)
    building_d2 = enemy_d2[..., buildings]
    act = np.where(np.isfinite(building_d2).any(-1), ATTACK0 + buildings.start + building_d2.argmin(-1), act)
    one_hit = np.where(hp[..., creeps] <= env.damage[rows, side, :n, None], hp[..., creeps], np.inf)
    act = np.where(np.isfinite(one_hit).any(-1), ATTACK0 + creeps.start + one_hit.argmin(-1), act)
    act = np.where(attack_ok[..., heroes].any(-1), ATTACK0 + hp[..., heroes].argmin(-1), act)
    frac = env.hp[rows, side, :n] / env.max_hp[rows, side, :n]
    fx, fy = FOUNTAIN[side, 0][:, None], FOUNTAIN[side, 1][:, None]
    home = (env.x[rows, side, :n] - fx) ** 2 + (env.y[rows, side, :n] - fy) ** 2
    retreat = (frac < 0.25) | ((home <= FOUNTAIN_RADIUS2) & (frac < 0.6))
    go_home = np.where(home <= 1.0, NOOP, _move_towards(env, side, fx, fy))
    return np.where(env.alive[rows, side, :n], np.where(retreat, go_home, act), NOOP)
