"""TrueSkill league of OpenAI Five: reference pool, rating evaluation, past-opponent sampling, speedup.

Follows OpenAI Five (Berner et al. 2019): Appendix J (TrueSkill with sigma = 25/3, beta = sigma / 2, tau = 0,
draw probability 0.02; fixed reference agents shifted so random play has mu = 0; the evaluated agent plays only
references within 10 points and only its own rating moves), Appendix N (past-opponent pool with qualities q,
p_i proportional to exp(q_i), q_i -= eta / (N p_i) when the current agent wins, 80 % latest / 20 % past games)
and Equation 2 of Appendix M (speedup). Free-for-all ranked outcomes (Neural MMO tournaments) are rated too.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Iterable, Sequence

import numpy as np
import trueskill

MU0 = 25.0  # internal prior mean; only differences matter, reported ratings are shifted (anchor at 0)
SIGMA0 = 25 / 3
BETA = SIGMA0 / 2
TAU = 0.0
DRAW_PROBABILITY = 0.02
ETA = 0.01
WINDOW = 10.0


class LeagueStateError(Exception):
    """A league state file is missing, unreadable or not a JSON object."""


def make_trueskill() -> trueskill.TrueSkill:
    """Return a fresh TrueSkill environment with the Appendix J parameters (the global one is left alone)."""
    return trueskill.TrueSkill(mu=MU0, sigma=SIGMA0, beta=BETA, tau=TAU, draw_probability=DRAW_PROBABILITY)


_ENV = make_trueskill()


def rate_ranked(ratings: list[trueskill.Rating], ranks: list[int]) -> list[trueskill.Rating]:
    """Rate one free-for-all game with one player per team; lower rank is better, equal ranks are draws."""
    if len(ratings) != len(ranks) or len(ratings) < 2:
        raise ValueError(f"need >= 2 ratings and as many ranks, got {len(ratings)} ratings and {len(ranks)} ranks")
    return [group[0] for group in _ENV.rate([(r,) for r in ratings], ranks=list(ranks))]


def _ranks_from_score(score: float) -> list[int]:
    """Ranks [player, opponent] for the player's score 1 (win), 0.5 (draw) or 0 (loss)."""
    ranks = {1.0: [0, 1], 0.5: [0, 0], 0.0: [1, 0]}.get(float(score))
    if ranks is None:
        raise ValueError(f"score must be 1, 0.5 or 0, got {score!r}")
    return ranks


def shift_ratings(
    ratings: dict[str, trueskill.Rating], anchor: str = "random", value: float = 0.0
) -> dict[str, trueskill.Rating]:
    """Shift every mu by the same amount so that ``anchor`` sits at ``value``; sigmas are unchanged."""
    if anchor not in ratings:
        raise ValueError(f"anchor {anchor!r} is not among the rated agents {sorted(ratings)}")
    offset = value - ratings[anchor].mu
    return {k: trueskill.Rating(mu=r.mu + offset, sigma=r.sigma) for k, r in ratings.items()}


def fit_reference_ratings(
    results: list[tuple[str, str, float]], anchor: str = "random", passes: int = 10, seed: int = 0
) -> dict[str, trueskill.Rating]:
    """Rate the reference agents from games among them, then shift so the anchor has mu = 0.

    ``results`` holds ``(a, b, score_of_a)`` with score 1 (win), 0.5 (draw) or 0 (loss). With tau = 0 sequential
    TrueSkill depends on the order of the games, so each of ``passes`` passes rates every game once, starting from
    the prior, in an order shuffled by ``np.random.default_rng(seed)`` (the first pass keeps the given order); the
    returned mu and sigma are the averages over the passes. Deterministic for a fixed seed.
    """
    if passes < 1 or not results:
        raise ValueError("need passes >= 1 and at least one result")
    names = sorted({a for a, _, _ in results} | {b for _, b, _ in results})
    rng = np.random.default_rng(seed)
    mus, sigmas = np.zeros(len(names)), np.zeros(len(names))
    for p in range(passes):
        ratings = {k: _ENV.create_rating() for k in names}
        order = np.arange(len(results)) if p == 0 else rng.permutation(len(results))
        for i in order:
            a, b, score = results[i]
            ratings[a], ratings[b] = rate_ranked([ratings[a], ratings[b]], _ranks_from_score(score))
        mus += [ratings[k].mu for k in names]
        sigmas += [ratings[k].sigma for k in names]
    fitted = {k: trueskill.Rating(mu=m / passes, sigma=s / passes) for k, m, s in zip(names, mus, sigmas, strict=True)}
    return shift_ratings(fitted, anchor)


def rating_to_dict(rating: trueskill.Rating) -> dict[str, float]:
    """JSON-friendly form of a rating."""
    return {"mu": float(rating.mu), "sigma": float(rating.sigma)}


def rating_from_dict(d: dict[str, float]) -> trueskill.Rating:
    """Inverse of :func:`rating_to_dict`."""
    return trueskill.Rating(mu=float(d["mu"]), sigma=float(d["sigma"]))


class ReferenceEvaluator:
    """Rates one evaluated policy against fixed references (shifted scale); only the policy's rating moves."""

    def __init__(
        self, references: dict[str, trueskill.Rating], window: float = WINDOW, start: trueskill.Rating | None = None
    ):
        if not references:
            raise ValueError("need at least one reference")
        self.references = dict(references)
        self.window = float(window)
        self.rating = start if start is not None else trueskill.Rating(mu=0.0, sigma=SIGMA0)
        self.history: list[dict[str, float]] = []  # {"version", "mu", "sigma"} per finished version

    def choose(self) -> list[str]:
        """References whose mu is within ``window`` of the policy's mu; if there are none, the nearest one."""
        gaps = {k: abs(r.mu - self.rating.mu) for k, r in self.references.items()}
        near = [k for k, g in gaps.items() if g <= self.window]
        return near if near else [min(gaps, key=gaps.__getitem__)]

    def update(self, reference: str, score: float) -> trueskill.Rating:
        """Record one game against ``reference`` (policy's score 1 / 0.5 / 0); the reference stays fixed."""
        self.rating = rate_ranked([self.rating, self.references[reference]], _ranks_from_score(score))[0]
        return self.rating

    def update_many(self, reference: str, scores: Iterable[float]) -> trueskill.Rating:
        """Record several games against the same reference, in order."""
        for s in scores:
            self.update(reference, s)
        return self.rating

    def finish_version(self, version: int, reset_sigma: bool = True) -> trueskill.Rating:
        """Log the current rating for ``version``; the next version starts at the same mu (Appendix J).

        With tau = 0 sigma only shrinks, so by default the next version restarts from sigma = SIGMA0.
        """
        logged = self.rating
        self.history.append({"version": int(version), "mu": float(logged.mu), "sigma": float(logged.sigma)})
        if reset_sigma:
            self.rating = trueskill.Rating(mu=logged.mu, sigma=SIGMA0)
        return logged

    def state_dict(self) -> dict:
        """JSON-serialisable state: references, window, current rating, history."""
        return {
            "references": {k: rating_to_dict(r) for k, r in self.references.items()},
            "window": self.window,
            "rating": rating_to_dict(self.rating),
            "history": [dict(h) for h in self.history],
        }

    def load_state_dict(self, d: dict) -> None:
        """Restore a state produced by :meth:`state_dict`."""
        self.references = {k: rating_from_dict(r) for k, r in d["references"].items()}
        self.window = float(d["window"])
        self.rating = rating_from_dict(d["rating"])
        self.history = [dict(h) for h in d["history"]]


class OpponentPool:
    """Past-opponent pool of Appendix N: softmax sampling over qualities, quality drops when beaten."""

    def __init__(self, eta: float = ETA):
        self.eta = float(eta)
        self.keys: list[str] = []
        self.qualities = np.zeros(0, dtype=np.float64)

    def add(self, key: str) -> None:
        """Add a snapshot with quality max(existing qualities) (0 for the first); keys must be unique."""
        if key in self.keys:
            raise ValueError(f"key {key!r} is already in the pool")
        q = float(self.qualities.max()) if len(self.keys) else 0.0
        self.keys.append(key)
        self.qualities = np.append(self.qualities, q)

    def probabilities(self) -> np.ndarray:
        """p_i = exp(q_i) / sum_j exp(q_j), computed stably (max subtracted)."""
        if not self.keys:
            return np.zeros(0, dtype=np.float64)
        e = np.exp(self.qualities - self.qualities.max())
        return e / e.sum()

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draw ``size`` member indices with probabilities :meth:`probabilities`."""
        if not self.keys:
            raise ValueError("cannot sample from an empty opponent pool")
        return rng.choice(len(self.keys), size=size, p=self.probabilities())

    def record_win(self, index: int) -> None:
        """The current policy beat member ``index``: q_i -= eta / (N p_i), with p taken before the update."""
        p = self.probabilities()[index]
        self.qualities[index] -= self.eta / (len(self.keys) * p)

    def record_game(self, index: int, score: float) -> None:
        """Report a finished game against member ``index`` (current policy's score 1 / 0.5 / 0); only wins update."""
        if _ranks_from_score(score) == [0, 1]:
            self.record_win(index)

    def assign(self, rng: np.random.Generator, num_games: int, past_fraction: float = 0.2) -> np.ndarray:
        """Opponent per game: -1 for the latest policy, else a pool index.

        Exactly ``round(past_fraction * num_games)`` games (Python rounding) at random positions go to sampled
        past members when the pool is non-empty; all games use the latest policy when it is empty.
        """
        if not 0.0 <= past_fraction <= 1.0:
            raise ValueError(f"past_fraction must be in [0, 1], got {past_fraction}")
        out = np.full(num_games, -1, dtype=np.int64)
        n_past = round(past_fraction * num_games) if self.keys else 0
        if n_past:
            out[rng.choice(num_games, size=n_past, replace=False)] = self.sample(rng, n_past)
        return out

    def state_dict(self) -> dict:
        """JSON-serialisable state: eta, keys, qualities."""
        return {"eta": self.eta, "keys": list(self.keys), "qualities": [float(q) for q in self.qualities]}

    def load_state_dict(self, d: dict) -> None:
        """Restore a state produced by :meth:`state_dict`."""
        if len(d["keys"]) != len(d["qualities"]):
            raise ValueError("pool state has different numbers of keys and qualities")
        self.eta = float(d["eta"])
        self.keys = [str(k) for k in d["keys"]]
        self.qualities = np.asarray(d["qualities"], dtype=np.float64).reshape(-1)


def versions_to_reach(versions: Sequence[int], ratings: Sequence[float], threshold: float) -> float:
    """First version (in the given order) whose rating is >= ``threshold``; ``math.inf`` if none is."""
    if len(versions) != len(ratings):
        raise ValueError(f"{len(versions)} versions but {len(ratings)} ratings")
    return next((float(v) for v, r in zip(versions, ratings, strict=True) if r >= threshold), math.inf)


def speedup(
    baseline: tuple[Sequence[int], Sequence[float]],
    experiment: tuple[Sequence[int], Sequence[float]],
    threshold: float,
) -> float:
    """Equation 2: versions for the baseline to first reach ``threshold`` / versions for the experiment.

    Each curve is ``(versions, ratings)``. Only the baseline never reaching it gives ``inf``; only the experiment
    never reaching it gives ``0.0``; neither reaching it gives ``nan``. An experiment reaching it at version 0
    gives ``inf`` (``nan`` if the baseline also does).
    """
    b = versions_to_reach(*baseline, threshold)
    e = versions_to_reach(*experiment, threshold)
    if e == 0:  # inf / inf is already nan
        return math.nan if b == 0 else math.inf
    return b / e


def save_league(path: str | os.PathLike, state: dict) -> None:
    """Write ``state`` as JSON atomically: temp file in the same directory, fsync, ``os.replace``.

    If anything fails the previous file is left untouched and the temp file is removed.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(state, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    with contextlib.suppress(OSError):  # make the rename itself durable where the platform allows it
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def load_league(path: str | os.PathLike) -> dict:
    """Read a state written by :func:`save_league`; raise :class:`LeagueStateError` naming the path on failure."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
    except FileNotFoundError as exc:
        raise LeagueStateError(f"league state file {path!r} does not exist") from exc
    except (OSError, ValueError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise LeagueStateError(f"league state file {path!r} is unreadable or corrupt: {exc}") from exc
    if not isinstance(state, dict):
        raise LeagueStateError(f"league state file {path!r} holds {type(state).__name__}, not a JSON object")
    return state
