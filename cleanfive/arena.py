# docs: docs/arena.md (play a saved model in the browser; --league rates saved models on one TrueSkill ladder)
import base64
import contextlib
import copy
import datetime
import errno
import hashlib
import json
import os
import re
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import torch
import tyro

from cleanfive.envs import moba
from cleanfive.envs.board import _game
from cleanfive.envs.teams import make_team_env
from cleanfive.ppo_lstm_selfplay import Agent
from cleanfive.trueskill_league import fit_reference_ratings

SCRIPT = "ppo_lstm_selfplay.py"  # the script whose models the arena loads (and whose `Agent` it imports)
PAGE = Path(__file__).with_name("arena.html")
MODELS = Path(__file__).with_name("models")  # the models that ship with cleanfive, each with its card (README.md there)
DEFAULT_MODEL = MODELS / "connect4.cleanfive_model"  # served when no model is given
# earlier checkpoints of the default model's run, its levels when no model is given (cleanfive/models/connect4_levels)
LEVEL_FILES = MODELS.glob("connect4_levels/connect4@*.cleanfive_model")  # connect4@<step>, weakest (earliest) first
DEFAULT_LEVELS = tuple(str(p) for p in sorted(LEVEL_FILES, key=lambda path: int(path.stem.split("@")[1])))


@dataclass
class Args:
    # a model saved by ppo_lstm_selfplay.py --save-model, or its --save-every checkpoint.pt: served on a web page
    # (default: the bundled Connect Four model, cleanfive/models/connect4.cleanfive_model)
    model: tyro.conf.Positional[str | None] = None
    host: str = "127.0.0.1"  # the address the page is served on (the default: this machine only; ::1 for IPv6)
    port: int = 0  # the port (0: a free one, printed)
    player: str = "person"  # your name in the games record and on the ladder
    # more models of the model's world (a run's earlier checkpoints) to play as opponents (default: with no model
    # given, the bundled model's earlier checkpoints, DEFAULT_LEVELS)
    levels: tuple[str, ...] | None = None
    record: str = "runs/arena/games.jsonl"  # every finished game is appended here, one JSON line each
    league: tuple[str, ...] = ()  # rate these saved models, the world's references and the record's people; exit
    games: int = 20  # games per pair of parties in --league, and per reference for the page's ladder
    out: str = "runs/arena/league"  # --league writes {out}.md and {out}.json
    seed: int = 0  # seed of the worlds, the bots and the agent's sampling


def usage_error(message: str) -> None:
    """One clear line and exit code 2 for a user error: no traceback."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


@dataclass
class Model:
    label: str  # its name in the record and on the ladder: the run's folder, and the step of a checkpoint
    env_id: str
    num_heroes: int
    agent: Agent


def load_model(path: str) -> Model:
    """A model of ppo_lstm_selfplay.py (--save-model file or checkpoint), or one line and exit code 2."""
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)  # a file is data, never code
        script = saved.get("script") if isinstance(saved, dict) else type(saved).__name__
        if script != SCRIPT:
            raise ValueError(f"it was written by {script}, not {SCRIPT}")
        env = make_team_env(saved["args"]["env_id"], 1, 0, saved["args"]["num_heroes"])
        if saved["args"].get("lstm_skip"):  # (a residual around the LSTM, out of the script after eebd269)
            raise ValueError("it was trained with --lstm-skip; play it with the script at eebd269")
        square_head = saved["args"].get("square_head", False)  # (older files: none)
        move_squares = env.move_squares if square_head else None  # the head reads each move at the square it fills
        agent = Agent(env.obs_shape, env.num_actions, env.num_heroes, saved["args"]["hidden_size"], move_squares)
        agent.load_state_dict(saved["model"])
    except Exception as exc:
        if "GLOBAL" in str(exc):  # weights_only refused a pickled class or function: an old file, or code
            usage_error(
                f"{path} holds objects other than tensors and plain values, so it is not read; if it is a file of "
                f"yours from before 2026-11-27, convert it: uv run python cleanfive/convert_saved.py {path}"
            )
        reason = " ".join(f"{type(exc).__name__}: {exc}".split())[:200]
        usage_error(f"cannot load {path} ({reason}); pass a model of {SCRIPT} --save-model (or its checkpoint.pt)")
    step = f"@{saved['global_step']}" if "global_step" in saved else ""  # a checkpoint: the step it was taken at
    bundled = MODELS.resolve() in Path(path).resolve().parents  # a bundled model (or level) is named by its file
    label = Path(path).stem if bundled else Path(path).resolve().parent.name  # a run's model by its run
    return Model(f"{label}{step}", env.env_id, env.num_heroes, agent.eval())


class Policy:
    """A model driving the N heroes of one side in B games, with its LSTM state (one game each: no resets)."""

    def __init__(self, model: Model, games: int):
        self.agent, self.shape = model.agent, (games, model.num_heroes)
        self.state = tuple(torch.zeros(1, games * model.num_heroes, model.agent.lstm.hidden_size) for _ in range(2))

    @torch.inference_mode()
    def act(self, obs, info, side, greedy=False):
        """Actions (B, N) of side ``side[b]``, their probabilities (B, N, A) and value estimates (B, N); only the
        games in which the side acts advance the state (a board game's waiting side does not decide)."""
        rows = np.arange(self.shape[0])
        x = torch.as_tensor(obs[rows, side]).flatten(0, 1)
        mask = torch.as_tensor(info["action_mask"][rows, side]).flatten(0, 1)
        active = torch.as_tensor(np.repeat(info["acting"][rows, side].any(-1), self.shape[1]))
        hidden, self.state, squares = self.agent.get_states(x, self.state, torch.zeros(len(x)), active)
        probs = torch.softmax(self.agent.get_logits(hidden, squares).masked_fill(~mask, -1e8), -1)
        action = probs.argmax(-1) if greedy else torch.multinomial(probs, 1)[:, 0]
        value = self.agent.critic(hidden)
        return action.reshape(self.shape).numpy(), probs.reshape(*self.shape, -1).numpy(), value.reshape(self.shape)


def name(party) -> str:
    return party.label if isinstance(party, Model) else party


def play_match(env_id: str, num_heroes: int, a, b, games: int, seed: int, values: dict | None = None) -> np.ndarray:
    """``games`` games of ``a`` against ``b`` (each a Model or a bot's name), ``a`` on side ``g % 2`` of game g.
    Returns a's score per game: 1 win, 0.5 draw, 0 loss. ``values``: each model's value estimates at its decisions
    are added there under its name, each with its score in that game (``fit_expected`` reads them)."""
    env, rng = make_team_env(env_id, games, seed, num_heroes), np.random.default_rng(seed)
    rows, side_a = np.arange(games), np.arange(games) % 2
    players = [(Policy(p, games) if isinstance(p, Model) else p, s) for p, s in ((a, side_a), (b, 1 - side_a))]
    obs, info = env.reset()
    scores, seen = np.full(games, np.nan), ([], [])  # seen: (game, value) of each model's decisions
    while np.isnan(scores).any():
        actions = np.zeros((games, 2, num_heroes), dtype=np.int64)
        for (player, side), decisions in zip(players, seen, strict=True):
            if isinstance(player, str):
                actions[rows, side] = env.bot_actions(player, obs, info, side, rng)
                continue
            actions[rows, side], _, value = player.act(obs, info, side)
            deciding = np.flatnonzero(info["acting"][rows, side].any(-1) & np.isnan(scores))
            decisions += [(int(g), float(value[g, 0])) for g in deciding]
        obs, _, _, info = env.step(actions)
        ended = info["game_over"] & np.isnan(scores)  # the first game of each world counts
        scores[ended] = (info["outcome"][ended, side_a[ended]] + 1) / 2
    for party, decisions, score in zip((a, b), seen, (scores, 1 - scores), strict=True):
        if values is not None and isinstance(party, Model):
            values.setdefault(party.label, []).extend((v, float(score[g])) for g, v in decisions)
    return scores


def fit_expected(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """(a, b) of a logistic fit of a game's final score (1 win, 0.5 draw, 0 loss) on the value estimates made during
    it: the agent's value v reads as the expected result 2 sigmoid(a v + b) - 1, from -1 (a loss) to +1 (a win). A
    small ridge keeps the fit finite when the values separate the wins from the losses."""
    v, s = np.asarray(pairs, dtype=np.float64).T
    x, w = np.stack([v, np.ones_like(v)], 1), np.zeros(2)
    for _ in range(50):  # Newton's steps
        p = 1 / (1 + np.exp(-x @ w))
        w += np.linalg.solve(x.T @ (x * (p * (1 - p))[:, None]) + 1e-3 * np.eye(2), x.T @ (s - p) - 1e-3 * w)
    return float(w[0]), float(w[1])


def expected_result(value: float, fit: tuple[float, float] | None) -> float | None:
    """The value estimate ``value`` as an expected result from -1 (a loss) to +1 (a win); None before the fit."""
    return None if fit is None else round(2 / (1 + float(np.exp(-(fit[0] * value + fit[1])))) - 1, 3)


def winning_cells(board: np.ndarray, k: int) -> list[list[int]]:
    """The cells [row, column] of every line of ``k`` stones of one side on ``board`` (int (H, W), -1 empty)."""
    h, w = board.shape
    cells = set()
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r, c in np.argwhere(board >= 0):
            line = [(r + i * dr, c + i * dc) for i in range(k)]
            if all(0 <= y < h and 0 <= x < w and board[y, x] == board[r, c] for y, x in line):
                cells.update(line)
    return sorted([int(r), int(c)] for r, c in cells)


def read_record(path: str) -> list[dict]:
    """The games of the record; a line cut short by a crash while it was written is skipped."""
    games = []
    for line in Path(path).read_text().splitlines() if os.path.exists(path) else []:
        try:
            games.append(json.loads(line))
        except ValueError:
            continue
    return games


def append_record(path: str, game: dict) -> None:
    """Append one game as a JSON line, on disk before this returns; the record is never rewritten."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "a+b") as f:
        cut = f.seek(0, os.SEEK_END) > 0 and f.seek(-1, os.SEEK_END) >= 0 and f.read(1) != b"\n"  # a cut line
        f.write(b"\n" * cut + json.dumps(game).encode() + b"\n")
        f.flush()
        os.fsync(f.fileno())


def record_results(games: list[dict], env_id: str, known: set[str]) -> list[tuple[str, str, float]]:
    """(a, b, a's score) of the record's games in ``env_id`` whose parties are ``known`` or people."""
    results = []
    for g in games:
        if g.get("env_id") == env_id and all(p in known or p in g.get("people", []) for p in g["players"]):
            results.append((g["players"][0], g["players"][1], (g["outcome"][0] + 1) / 2))
    return results


def ladder_results(parties: list, env_id: str, num_heroes: int, games: int, seed: int, values=None) -> list:
    """Results of ``games`` games between every pair of parties (models and bots); ``values`` as play_match's."""
    results = []
    for i, a in enumerate(parties):
        for j, b in enumerate(parties[i + 1 :], i + 1):
            scores = play_match(env_id, num_heroes, a, b, games, seed + 1000 * i + j, values)
            results += [(name(a), name(b), float(s)) for s in scores]
    return results


def fit_ladder(results: list, references: tuple[str, ...]) -> dict:
    """One TrueSkill ladder over all results, anchored at `random` = 0 (OpenAI Five, Appendix J)."""
    return fit_reference_ratings(results, anchor="random" if "random" in references else references[0])


class Refused(ValueError):
    """A request the arena does not act on, with its HTTP status: answered, the game and the record unchanged."""

    def __init__(self, message: str, code: int = 400):
        super().__init__(message)
        self.code = code


def is_index(value, stop: int) -> bool:
    """A real int in [0, stop): JSON's 0.0 and true equal 0 and 1 but break numpy's indexing, 1.5 would play 1."""
    return type(value) is int and 0 <= value < stop


def describe_world(env) -> dict:
    """What the page needs to draw ``env`` and turn clicks into actions, read from the world: a step's game time and
    the most steps a game lasts (on a board, one per cell); a board's rows, columns and kind of move (an action per
    column drops a stone in it, as in Connect Four; one per cell takes it, row by row, as in TicTacToe), or the lane
    world's map size, unit kinds, the ancient's slot and the fountains' radius."""
    world = dict(seconds_per_step=env.seconds_per_step)
    if hasattr(env, "board_shape"):
        rows, columns = env.board_shape
        moves = {columns: "column", rows * columns: "cell"}
        if env.num_actions not in moves:
            raise ValueError(f"{env.env_id}: {env.num_actions} actions, not one per column or cell of its board")
        return world | dict(rows=rows, columns=columns, move=moves[env.num_actions], max_steps=rows * columns)
    kinds = dict(hero=moba.HERO, creep=moba.CREEP, building=moba.BUILDING)
    world |= dict(map_size=moba.MAP_SIZE, max_steps=moba.MAX_STEPS, kinds=kinds)
    return world | dict(ancient=env.num_heroes + moba.NUM_TOWERS, fountain_radius=moba.FOUNTAIN_RADIUS2**0.5)


SHARE = "123456789abcdefghijklmnopqrstuvwxyz"  # a shared board game: one character a move, action a as SHARE[a]


class Session:
    """One game in the browser, advanced one request at a time: a board game (the person against the agent, a bot
    or a level) or the lane world (the person with the agent's heroes, or the agent watched, against any of them).
    Each game has its own world, so a request that fails can put the game back whole."""

    def __init__(self, model: Model, args: Args, levels: tuple[Model, ...] = ()):
        self.model, self.args, self.lock = model, args, threading.Lock()
        self.env = make_team_env(model.env_id, 1, args.seed, model.num_heroes)  # the world's description
        self.board = hasattr(self.env, "board_shape")
        self.world = describe_world(self.env)
        self.in_a_row = _game(model.env_id)[3] if self.board else None
        self.references = tuple(self.env.bot_names)
        # the opponents a person picks from: the model, the world's bots, the --levels models; each by its record name
        parties = {"agent": model, **{bot: bot for bot in self.references}, **{m.label: m for m in levels}}
        self.opponents = {k: (p, name(p)) for k, p in parties.items()}
        self.rng = np.random.default_rng(args.seed)
        self.base, self.rating, self.ladder, self.fit = None, None, None, None  # the ladder's games and ratings
        self.game = None

    def rate_in_background(self) -> None:
        """Play the model, the levels and the references against each other once, then rate the person from the
        record; the model's value estimates in those games fit its expected result (fit_expected)."""

        def work():
            m, parties, values = self.model, [p for p, _ in self.opponents.values() if p is not self.model], {}
            base = ladder_results([*parties, m], m.env_id, m.num_heroes, self.args.games, self.args.seed, values)
            with self.lock:
                self.base, self.fit = base, fit_expected(values[m.label])
                self.rerate()

        threading.Thread(target=work, daemon=True).start()

    def rerate(self) -> None:
        if self.base is not None:
            known = {label for _, label in self.opponents.values()}
            people = record_results(read_record(self.args.record), self.model.env_id, known)
            ratings = fit_ladder(self.base + people, self.references)
            mine = ratings.get(self.args.player)
            self.rating = {"mu": float(mine.mu), "sigma": float(mine.sigma)} if mine else None
            self.ladder = {k: round(float(r.mu), 1) for k, r in ratings.items() if k in known}

    @contextlib.contextmanager
    def undo_on_failure(self):
        """Puts the game back as it was if the request fails past its checks (a bug, a record that cannot be
        written): its dict, the players' LSTM states, the bots' and the agents' random generators, and its world
        (the lane world copied, a board replayed from its moves)."""
        g = self.game
        saved = g and {**g, "moves": list(g["moves"]), "env": g["env"] if self.board else copy.deepcopy(g["env"])}
        states = [(p, p.state) for p in (g or {}).values() if isinstance(p, Policy)]
        rng, sampling = self.rng.bit_generator.state, torch.get_rng_state()
        try:
            yield
        except Exception:
            if saved and self.board:
                saved |= self.replayed(saved)
            self.game, self.rng.bit_generator.state = saved, rng
            torch.set_rng_state(sampling)
            for policy, state in states:
                policy.state = state
            raise

    def replayed(self, g: dict) -> dict:
        """A fresh world of the board game ``g`` at its position: its moves played again from the empty board."""
        env = make_team_env(self.model.env_id, 1, int(self.rng.integers(2**31)), 1)
        obs, info = env.reset()
        first = int(info["first_side"][0])
        for i, action in enumerate(g["moves"]):
            actions = np.zeros((1, 2, 1), dtype=np.int64)
            actions[0, first ^ (i % 2), 0] = action
            obs, _, _, info = env.step(actions)
        return dict(env=env, first=first, side=first ^ g["first"] ^ g["side"], obs=obs, info=info)

    def new(self, mode: str = "play", side: int = 0, opponent: str = "agent", greedy: bool = False) -> dict:
        """Start a game. Board games: ``side`` 0 moves first, 1 second. Lane world: ``side`` 0 or 1 of the map."""
        modes = ("play",) if self.board else ("play", "watch")  # a board game is played, never watched
        known = mode in modes and type(opponent) is str and opponent in self.opponents and type(greedy) is bool
        if not known or not is_index(side, 2):  # checked before anything changes: a refused game leaves the last one
            raise Refused(
                f"bad game: mode {mode!r} (one of {list(modes)}), side {side!r} (0 or 1), opponent {opponent!r} "
                f"(one of {list(self.opponents)}), greedy {greedy!r} (true or false)"
            )
        env = make_team_env(self.model.env_id, 1, int(self.rng.integers(2**31)), self.model.num_heroes)
        obs, info = env.reset()
        first = int(info["first_side"][0]) if self.board else 0
        person = first ^ side if self.board else side  # board: the side that moves first, or not
        party, label = self.opponents[opponent]
        team = None if self.board else Policy(self.model, 1)  # the lane world: the agent's heroes of the person's side
        enemy = Policy(party, 1) if isinstance(party, Model) else party
        self.game = dict(env=env, first=first, mode=mode, side=person, opponent=opponent, label=label, team=team)
        self.game |= dict(enemy=enemy, greedy=greedy, obs=obs, info=info, moves=[], result=None, note="", t=0)
        if self.board and first != person:
            self.reply()
        return self.state()

    def reply(self) -> None:
        """The opponent's move in a board game: the agent's or a level's (with its probabilities and value), or a
        bot's."""
        g = self.game
        side = np.array([1 - g["side"]])
        if isinstance(g["enemy"], Policy):
            action, probs, value = g["enemy"].act(g["obs"], g["info"], side, g["greedy"])
            g["probs"], g["value"] = [round(float(p), 3) for p in probs[0, 0]], float(value[0, 0])
        else:
            action = g["env"].bot_actions(g["enemy"], g["obs"], g["info"], side, self.rng)
            g["probs"], g["value"] = None, None
        g["agent_action"] = int(action[0, 0])
        self.advance(1 - g["side"], int(action[0, 0]))

    def advance(self, side: int, action: int) -> None:
        """One step of the board game: ``side`` plays ``action``."""
        g = self.game
        actions = np.zeros((1, 2, 1), dtype=np.int64)
        actions[0, side, 0] = action
        g["obs"], _, _, g["info"] = g["env"].step(actions)
        g["moves"].append(action)
        if g["info"]["game_over"][0]:
            self.finish(g["info"]["outcome"][0])

    def move(self, action: int) -> dict:
        """The person's move in a board game, then the opponent's answer; an illegal one is ignored with a note."""
        g = self.game
        if g is None or g["result"] or not self.board:
            raise Refused("no board game in progress: start one", 409)
        if not is_index(action, self.env.num_actions):
            raise Refused(f"action {action!r} is not one of 0..{self.env.num_actions - 1}")
        legal = g["info"]["action_mask"][0, g["side"], 0]
        if not g["info"]["acting"][0, g["side"], 0] or not legal[action]:
            g["note"] = f"move {action} is not legal here: ignored"
            return self.state()
        g["note"] = ""
        self.advance(g["side"], action)
        if not g["result"]:
            self.reply()
        return self.state()

    def tick(self, action: int = 0) -> dict:
        """One step of the lane world; in "play" the person's hero (hero 0 of its side) takes ``action``."""
        g = self.game
        if g is None or g["result"] or self.board:
            raise Refused("no lane game in progress: start one", 409)
        if not is_index(action, self.env.num_actions):  # before the agents act: their LSTM state is part of the game
            raise Refused(f"action {action!r} is not one of 0..{self.env.num_actions - 1}")
        side, obs, info = np.array([g["side"]]), g["obs"], g["info"]
        actions = np.zeros((1, 2, self.model.num_heroes), dtype=np.int64)
        team, probs, value = g["team"].act(obs, info, side, g["greedy"])  # the agent's heroes of the person's side
        actions[0, g["side"]] = team[0]
        if g["mode"] == "play":
            actions[0, g["side"], 0] = action
            g["moves"].append(int(action))
        if isinstance(g["enemy"], str):  # a scripted bot
            actions[0, 1 - g["side"]] = g["env"].bot_actions(g["enemy"], obs, info, 1 - side, self.rng)[0]
        else:
            actions[0, 1 - g["side"]] = g["enemy"].act(obs, info, 1 - side, g["greedy"])[0][0]
        g["probs"], g["value"] = [round(float(p), 3) for p in probs[0, 0]], float(value[0, 0])  # the first hero's
        g["state"] = self.lane_state()  # the frame this step was decided on (a finished game restarts at once)
        g["obs"], _, _, g["info"] = g["env"].step(actions)
        g["t"] += 1
        if g["info"]["game_over"][0]:
            self.finish(g["info"]["outcome"][0])
        return self.state()

    def finish(self, outcome: np.ndarray) -> None:
        """Append the finished game to the record and rate the person again."""
        g, person = self.game, self.args.player
        sides = [g["side"], 1 - g["side"]]
        players = [person if g["mode"] == "play" else self.model.label, g["label"]]
        game = dict(time=datetime.datetime.now().isoformat(timespec="seconds"), env_id=self.model.env_id)
        game |= dict(players=players, people=[person] if g["mode"] == "play" else [], sides=sides)
        game |= dict(outcome=[float(outcome[s]) for s in sides], moves=g["moves"], model=self.model.label)
        game |= dict(mode=g["mode"], greedy=g["greedy"], length=len(g["moves"]) if self.board else g["t"])
        if self.board:
            game["first"] = int(g["first"] != g["side"])  # which of the players moved first
        append_record(self.args.record, game)
        o = game["outcome"][0]
        g["outcome"] = o
        g["result"] = f"{players[0]} {'won' if o > 0 else 'lost' if o < 0 else 'drew'} against {players[1]}"
        self.rerate()

    def replay(self, moves: str) -> dict:
        """The board game of ``moves`` (one SHARE character a move) from the empty board: after each move the board,
        and the agent's move probabilities and value at the position it was played from, for whichever side moved
        (the agent's LSTM, one per side, sees the game as it would have playing that side)."""
        if not self.board:
            raise Refused("replays are of board games", 409)
        if type(moves) is not str or not 0 < len(moves) <= self.world["max_steps"]:
            raise Refused(f"moves {str(moves)[:50]!r}: a string of 1 to {self.world['max_steps']} moves")
        env = make_team_env(self.model.env_id, 1, self.args.seed, 1)
        obs, info = env.reset()
        first, played, frames = int(info["first_side"][0]), [], []
        agents = [Policy(self.model, 1) for _ in range(2)]  # the agent playing the first mover, the second
        for i, char in enumerate(moves):
            side = first ^ (i % 2)
            action = SHARE.find(char)
            mask = info["action_mask"][0, side, 0]
            if info["game_over"][0] or not 0 <= action < len(mask) or not mask[action]:
                raise Refused(f"move {i + 1} ({char!r}) of {moves[:50]!r} is not a legal move of {self.model.env_id}")
            _, probs, value = agents[i % 2].act(obs, info, np.array([side]))
            actions = np.zeros((1, 2, 1), dtype=np.int64)
            actions[0, side, 0] = action
            obs, _, _, info = env.step(actions)
            played.append(action)
            board = np.where(info["board"][0] < 0, -1, info["board"][0] ^ first)  # the first mover's stones 0
            frame = dict(move=action, board=board.tolist(), probs=[round(float(p), 3) for p in probs[0, 0]])
            v = float(value[0, 0])
            frames.append(frame | dict(value=v, expected=expected_result(v, self.fit)))
        over = bool(info["game_over"][0])
        outcome = float(info["outcome"][0, first]) if over else None  # the first mover's
        cells = winning_cells(np.array(frames[-1]["board"]), self.in_a_row)
        return dict(moves=played, share=moves, frames=frames, over=over, outcome=outcome, cells=cells)

    def games(self) -> list[dict]:
        """The record's games of this world, newest first (the last 100)."""
        return [g for g in read_record(self.args.record) if g.get("env_id") == self.model.env_id][::-1][:100]

    def lane_state(self) -> dict:
        """The units of the one lane game in the frame of the person's side (its base bottom-left, as its actions
        move), with what that side sees (fog of war; buildings are always shown, as in render())."""
        g = self.game
        e, me = g["env"], g["side"]
        x, y = (e.x[0], e.y[0]) if me == 0 else (moba.MAP_SIZE - e.y[0], moba.MAP_SIZE - e.x[0])
        alive = e.alive[0]
        d2 = (x[me][alive[me]][:, None] - x[1 - me][None]) ** 2 + (y[me][alive[me]][:, None] - y[1 - me][None]) ** 2
        seen = (d2 <= e.vision2[alive[me]][:, None]).any(0)
        units = []
        for s in (0, 1):
            for j in np.flatnonzero(alive[s] | (e.kind == moba.BUILDING)):
                shown = s == me or seen[j] or e.kind[j] == moba.BUILDING or g["mode"] == "watch"
                hp = round(float(e.hp[0, s, j] / e.max_hp[0, s, j]), 3) * bool(alive[s, j])
                if shown:  # [side, kind, x, y, HP fraction, slot]
                    units.append([s, int(e.kind[j]), round(float(x[s, j]), 2), round(float(y[s, j]), 2), hp, int(j)])
        vision = [[float(x[me, j]), float(y[me, j]), float(np.sqrt(e.vision2[j]))] for j in np.flatnonzero(alive[me])]
        hero = dict(level=int(e.level[0, me, 0]), gold=round(float(e.gold[0, me, 0])))
        hero |= dict(hp=round(float(e.hp[0, me, 0])), max_hp=round(float(e.max_hp[0, me, 0])))
        hero |= dict(respawn=int(e.respawn[0, me, 0]))
        lanes = moba.LANES if me == 0 else moba.MAP_SIZE - moba.LANES[..., ::-1]
        fountains = moba.FOUNTAIN if me == 0 else moba.MAP_SIZE - moba.FOUNTAIN[:, ::-1]
        mask = g["info"]["action_mask"][0, me, 0].tolist()
        return dict(
            units=units, vision=vision, hero=hero, lanes=lanes.tolist(), fountains=fountains.tolist(), mask=mask
        )

    def state(self) -> dict:
        """What the page draws."""
        g = self.game
        out = dict(env_id=self.model.env_id, model=self.model.label, player=self.args.player, rating=self.rating)
        out |= dict(board_game=self.board, ladder=self.ladder, world=self.world)
        out |= dict(opponents=[[k, label] for k, (_, label) in self.opponents.items()])  # [choice, record name]
        if not self.board:
            out["action_names"] = moba.action_names(self.env.version)
        if g is None:
            return out
        keys = ("mode", "side", "opponent", "label", "greedy", "moves", "result", "outcome", "note", "probs")
        out |= {k: g.get(k) for k in (*keys, "value", "agent_action")}
        out["expected"] = None if g.get("value") is None else expected_result(g["value"], self.fit)
        if self.board:
            info = g["info"]
            board = info["board"][0]
            out |= dict(board=board.tolist(), to_move=int(info["acting"][0, :, 0].argmax()), first=g["first"])
            out |= dict(legal=info["action_mask"][0, g["side"], 0].tolist(), over=bool(g["result"]))
            out["cells"] = winning_cells(board, self.in_a_row) if g["result"] else []
        else:
            out |= dict(lane=g["state"] if g["result"] else self.lane_state(), t=g["t"], over=bool(g["result"]))
        return out


MAX_BODY = 4096  # bytes: the page's requests are a few dozen; a longer body is refused unread
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")  # the names by which a browser on this machine reaches the page
# the API: path -> (the Session method it calls, the keys its JSON body must hold, the keys it may also hold)
CALLS = {
    "/api/new": ("new", (), ("mode", "side", "opponent", "greedy")),
    "/api/move": ("move", ("action",), ()),
    "/api/tick": ("tick", (), ("action",)),
    "/api/replay": ("replay", ("moves",), ()),
}
# every answer: no other site may frame the page, sniff a type, cache a game, read a referrer or embed an answer
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
}


def page_policy(page: str) -> str:
    """The page's Content-Security-Policy: its own inline script and style only (by their SHA-256), requests to this
    server only, no frame around it, no form, no plugin."""

    def digest(tag: str) -> str:
        inline = re.search(rf"<{tag}>(.*?)</{tag}>", page, re.S)[1]
        return "'sha256-" + base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode() + "'"

    rules = f"default-src 'none'; script-src {digest('script')}; style-src {digest('style')}; connect-src 'self'"
    return rules + "; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


API_POLICY = "default-src 'none'; frame-ancestors 'none'"  # a JSON answer loads nothing and is framed nowhere
AUTHORITY = re.compile(r"(?:\[(?P<v6>[0-9a-f:.]+)\]|(?P<name>[^:\[\]]+|[0-9a-f:]+))(?::[0-9]{1,5})?", re.I)  # Host


class Handler(BaseHTTPRequestHandler):
    """The page and its API, for the page only. Any web page in the same browser can send requests here: a foreign
    Host (a DNS-rebinding page reaches this address by its own name), a POST from another origin, and a POST a form
    or a no-cors fetch can send without a CORS preflight (not application/json) are refused before the game sees them.
    """

    session: Session  # set on a subclass per server
    hosts: frozenset[str]  # the names it answers to: LOCAL_HOSTS and --host
    timeout = 10  # seconds a client may stall mid-request before its connection is dropped
    default_request_version = "HTTP/1.0"  # a garbage request line too is answered with a status line

    def version_string(self) -> str:  # the Server header: no Python version
        return "cleanfive-arena"

    def log_message(self, *args) -> None:  # quiet: one line per request would drown the address line
        pass

    def send(self, code: int, body: bytes, kind: str = "application/json") -> None:
        try:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for key, value in HEADERS.items():
                self.send_header(key, value)
            self.send_header(
                "Content-Security-Policy", page_policy(body.decode()) if kind.startswith("text/html") else API_POLICY
            )
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the tab was closed or the connection dropped: the server and the record go on
            pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own refusals (another method, a malformed request line or header) in JSON too."""
        self.close_connection = True
        self.send(code, json.dumps({"error": message or self.responses.get(code, ("error",))[0]}).encode())

    def do_GET(self) -> None:
        self.answer()

    def do_POST(self) -> None:
        self.answer()

    def answer(self) -> None:
        """The page, the state or a game's step; anything else a JSON error, the game and the record as they were."""
        try:
            self.check_sender()
            if self.command == "GET" and self.path == "/":
                return self.send(200, PAGE.read_bytes(), "text/html; charset=utf-8")
            if self.command == "GET" and self.path in ("/api/state", "/api/games"):
                with self.session.lock:
                    reply = self.session.state() if self.path == "/api/state" else self.session.games()
                return self.send(200, json.dumps(reply).encode())
            if self.command != "POST" or self.path not in CALLS:
                raise Refused("not found", 404)
            body = self.read_body()
            with self.session.lock:
                reply = self.call(*CALLS[self.path], body)
            self.send(200, reply)
        except Exception as exc:  # a bad request (4xx) or a bug (500): answered, the server goes on
            self.close_connection = True  # a body left unread is never read as the next request
            refused = isinstance(exc, Refused)
            message = str(exc) if refused else f"{type(exc).__name__}: {exc}"
            self.send(exc.code if refused else 500, json.dumps({"error": message}).encode())

    def check_sender(self) -> None:
        """403 unless the Host header names this server, and, on a POST, the Origin (which browsers send on every
        POST) is absent (a local client: curl, a test) or this server's own page."""
        hosts = self.headers.get_all("Host") or []
        match = AUTHORITY.fullmatch(hosts[0]) if len(hosts) == 1 else None
        if not match or (match["v6"] or match["name"]).lower() not in self.hosts:
            raise Refused(f"Host {hosts}: this server answers only to {sorted(self.hosts)}", 403)
        port = self.server.server_port
        ports = (f":{port}", "") if port == 80 else (f":{port}",)  # a browser leaves the default port out
        pages = {f"http://{f'[{h}]' if ':' in h else h}{p}" for h in self.hosts for p in ports}
        origin = self.headers.get("Origin")
        if self.command == "POST" and origin is not None and origin.lower() not in pages:
            raise Refused(f"Origin {origin!r}: only this server's own page may post", 403)

    def read_body(self) -> dict:
        """A POST's JSON object: application/json (a type that no cross-site form or no-cors fetch may send) with a
        Content-Length of at most MAX_BODY bytes, read only then."""
        if self.headers.get_content_type() != "application/json":  # parameters (charset) aside; none: text/plain
            raise Refused(f"Content-Type {self.headers.get('Content-Type')!r}: send application/json", 415)
        lengths = self.headers.get_all("Content-Length") or []
        if not lengths or "Transfer-Encoding" in self.headers:  # a chunked body is not read
            raise Refused("send the body with a Content-Length", 411)
        size = lengths[0].strip() if len(lengths) == 1 else ""
        if not (size.isascii() and size.isdigit()):
            raise Refused(f"Content-Length {lengths}: not one byte count")
        if len(size) > 9 or int(size) > MAX_BODY:
            raise Refused(f"Content-Length {size[:20]}: the body is over {MAX_BODY} bytes, not read", 413)
        try:
            raw = self.rfile.read(int(size))
        except OSError:  # stalled past `timeout`
            raw = b""
        if len(raw) < int(size):
            raise Refused(f"the body ended after {len(raw)} of its {size} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # not JSON, not UTF-8, or nested too deep
            raise Refused(f"the body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise Refused(f"the body is a JSON {type(body).__name__}, not an object")
        return body

    def call(self, name: str, needed: tuple, optional: tuple, body: dict) -> bytes:
        """Session.<name>(**body)'s answer as JSON, where `body` holds every key of `needed` and no key beyond
        `optional`. The arguments are checked before anything changes; a failure past them (a bug, a record that
        cannot be written) puts the game back whole (Session.undo_on_failure), so the next request finds it as it
        was."""
        if not set(needed) <= body.keys() <= {*needed, *optional}:
            raise Refused(f"{name} takes {sorted({*needed, *optional})} ({sorted(needed)} needed), not {sorted(body)}")
        with self.session.undo_on_failure():
            return json.dumps(getattr(self.session, name)(**body)).encode()


def serve(session: Session, host: str, port: int) -> ThreadingHTTPServer:
    """The page's server on (host, port) (0: a free port; an IPv6 address such as ::1 too), or one line and exit code
    2 if the port is taken. It answers to the names LOCAL_HOSTS and ``host``."""
    host = host.strip("[]")
    hosts = frozenset({*LOCAL_HOSTS, host.lower()})
    handler = type("ArenaHandler", (Handler,), {"session": session, "hosts": hosts})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        server = type("ArenaServer", (ThreadingHTTPServer,), {"address_family": family})((host, port), handler)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            usage_error(f"port {port} on {host} is in use; pass another --port (0: a free one)")
        usage_error(f"cannot serve on {host}:{port} ({exc}); check --host and --port")
    server.daemon_threads = True
    return server


def open_session(args: Args) -> Session:
    """The Arena's game of the model and the --levels models, or one line and exit code 2."""
    model = load_model(args.model or str(DEFAULT_MODEL))
    default = DEFAULT_LEVELS if args.model is None else ()
    levels = tuple(load_model(path) for path in (default if args.levels is None else args.levels))
    for level in levels:
        if (level.env_id, level.num_heroes) != (model.env_id, model.num_heroes):
            usage_error(f"--levels: {level.label} is a model of {level.env_id}, not of {model.env_id}; pass its models")
    session = Session(model, args, levels)
    labels = [label for _, label in session.opponents.values()]
    if len(set(labels)) < len(labels) or "agent" in labels[1:]:
        usage_error(f"--levels: two opponents have one name {labels}; pass models of different runs or steps")
    return session


def league(args: Args) -> dict:
    """Every model against every other and against the world's references, and the record's people: one ladder."""
    models = [load_model(path) for path in args.league]
    worlds = {(m.env_id, m.num_heroes) for m in models}
    if len(worlds) > 1:
        usage_error(f"--league: the models are of different worlds {sorted(worlds)}; rate one world at a time")
    labels = [m.label for m in models]
    if len(set(labels)) < len(labels):
        usage_error(f"--league: two models have the same name {labels}; pass each run's model once")
    env_id, num_heroes = models[0].env_id, models[0].num_heroes
    references = tuple(make_team_env(env_id, 1, 0, num_heroes).bot_names)
    results = ladder_results([*references, *models], env_id, num_heroes, args.games, args.seed)
    results += record_results(read_record(args.record), env_id, {*references, *labels})
    ratings = fit_ladder(results, references)
    played = {k: sum(k in (a, b) for a, b, _ in results) for k in ratings}
    kind = {k: "reference" if k in references else "model" if k in labels else "person" for k in ratings}
    ranked = sorted(ratings.items(), key=lambda item: -item[1].mu)
    rows = [dict(name=k, kind=kind[k], mu=round(r.mu, 2), sigma=round(r.sigma, 2), games=played[k]) for k, r in ranked]
    table = ["| rank | name | kind | TrueSkill mu | sigma | games |", "|---:|---|---|---:|---:|---:|"]
    row = "| {} | {name} | {kind} | {mu:.1f} | {sigma:.1f} | {games} |"
    table += [row.format(i, **r) for i, r in enumerate(rows, 1)]
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    Path(f"{args.out}.md").write_text("\n".join(table) + "\n")
    league = dict(env_id=env_id, num_heroes=num_heroes, games_per_pair=args.games, seed=args.seed, ratings=rows)
    Path(f"{args.out}.json").write_text(json.dumps(league, indent=1) + "\n")
    print("\n".join(table))
    print(f"saved {args.out}.md and {args.out}.json")
    return league


if __name__ == "__main__":
    args = tyro.cli(Args)
    torch.set_num_threads(1)  # small networks, one game at a time: one thread answers fastest and shares the machine
    torch.manual_seed(args.seed)
    if args.games < 1:
        usage_error(f"--games {args.games} must be >= 1")
    if args.league:
        league(args)
        sys.exit(0)
    session = open_session(args)
    server = serve(session, args.host, args.port)
    session.rate_in_background()
    host = f"[{args.host.strip('[]')}]" if ":" in args.host else args.host
    address = f"http://{host}:{server.server_port}/"
    print(f"arena: {session.model.label} ({session.model.env_id}) on {address}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
