"""TrueSkill league of OpenAI Five (Berner et al. 2019): rated reference pool, rating evaluation (Appendix J: TrueSkill
with sigma = 25/3, beta = sigma / 2, tau = 0, draw probability 0.02; fixed references shifted so that random play has
mu = 0; the evaluated agent plays only references within 10 points and only its own rating moves) and past-opponent
sampling (Appendix N: qualities q, p_i proportional to exp(q_i), q_i -= eta / (N p_i) when the current agent wins; or
AlphaStar's prioritized fictitious self-play, Vinyals et al. 2019: p_i proportional to (1 - x_i)^2, x_i the current
agent's recent win rate against member i)."""

import json
import os
from collections.abc import Callable, Iterable

import numpy as np
import trueskill

MU0, SIGMA0 = 25.0, 25 / 3  # internal prior; only differences matter, reported ratings are shifted (anchor at 0)
BETA, TAU, DRAW_PROBABILITY = SIGMA0 / 2, 0.0, 0.02
ETA, WINDOW = 0.01, 10.0  # Appendix N's quality step; Appendix J: the references played are within WINDOW of mu
PFSP_DECAY = 0.99  # PFSP's win rates: each member's game counts decay by this factor per game against it (AlphaStar)

# the TrueSkill environment of Appendix J, its own instance: the global one (trueskill.rate, ...) is left alone
TRUESKILL = trueskill.TrueSkill(mu=MU0, sigma=SIGMA0, beta=BETA, tau=TAU, draw_probability=DRAW_PROBABILITY)


def rate_ranked(ratings: list[trueskill.Rating], ranks: list[int]) -> list[trueskill.Rating]:
    """New ratings after a game of two or more parties (Neural MMO); lower rank is better, equal ranks draw."""
    if len(ratings) != len(ranks) or len(ratings) < 2:
        raise ValueError(f"need >= 2 ratings and as many ranks, got {len(ratings)} ratings and {len(ranks)} ranks")
    return [group[0] for group in TRUESKILL.rate([(r,) for r in ratings], ranks=list(ranks))]


def rate_game(a: trueskill.Rating, b: trueskill.Rating, score: float) -> tuple[trueskill.Rating, trueskill.Rating]:
    """New ratings of ``a`` and ``b`` after one game in which ``a`` scored 1 (win), 0.5 (draw) or 0 (loss)."""
    if (ranks := {1.0: [0, 1], 0.5: [0, 0], 0.0: [1, 0]}.get(float(score))) is None:
        raise ValueError(f"score must be 1, 0.5 or 0, got {score!r}")
    return tuple(rate_ranked([a, b], ranks))


def fit_reference_ratings(
    results: list[tuple[str, str, float]], anchor: str = "random", passes: int = 10, seed: int = 0
) -> dict[str, trueskill.Rating]:
    """Ratings of the references from games ``(a, b, score_of_a)`` among them (score 1, 0.5 or 0), shifted so that
    ``anchor`` has mu = 0. With tau = 0 sequential TrueSkill depends on the order of the games, so each of ``passes``
    passes rates every game once from the prior, in an order shuffled by ``np.random.default_rng(seed)`` (the first
    pass keeps the given order); mu and sigma are the averages over the passes. Deterministic for a fixed seed."""
    if passes < 1 or not results:
        raise ValueError("need passes >= 1 and at least one result")
    names = sorted({a for a, _, _ in results} | {b for _, b, _ in results})
    if anchor not in names:
        raise ValueError(f"anchor {anchor!r} is not among the rated agents {names}")
    rng, sums = np.random.default_rng(seed), np.zeros((2, len(names)))  # sums of mu and sigma over the passes
    for p in range(passes):
        ratings = {k: TRUESKILL.create_rating() for k in names}
        order = np.arange(len(results)) if p == 0 else rng.permutation(len(results))
        for a, b, score in [results[i] for i in order]:
            ratings[a], ratings[b] = rate_game(ratings[a], ratings[b], score)
        sums += [[ratings[k].mu for k in names], [ratings[k].sigma for k in names]]
    fitted = {k: trueskill.Rating(mu=m / passes, sigma=s / passes) for k, m, s in zip(names, *sums, strict=True)}
    offset = 0.0 - fitted[anchor].mu
    return {k: trueskill.Rating(mu=r.mu + offset, sigma=r.sigma) for k, r in fitted.items()}


def rating_from_dict(d: dict[str, float]) -> trueskill.Rating:
    """The rating stored as ``{"mu": ..., "sigma": ...}`` (the form the ``state_dict`` methods write)."""
    return trueskill.Rating(mu=float(d["mu"]), sigma=float(d["sigma"]))


def _to_dict(rating: trueskill.Rating) -> dict[str, float]:
    return {"mu": float(rating.mu), "sigma": float(rating.sigma)}


def cached_ratings(path: str, compute: Callable[[], dict[str, trueskill.Rating]]) -> dict[str, trueskill.Rating]:
    """The ratings in the JSON file ``path``, else (none, unreadable) ``compute()``'s, written there atomically."""
    try:
        with open(path) as f:
            return {k: rating_from_dict(r) for k, r in json.load(f).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        ratings = compute()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(f"{path}.{os.getpid()}.tmp", "w") as f:
        json.dump({k: _to_dict(r) for k, r in ratings.items()}, f)
    os.replace(f"{path}.{os.getpid()}.tmp", path)
    return ratings


class ReferenceEvaluator:
    """Rates one evaluated policy against fixed references (shifted scale); only the policy's rating moves."""

    def __init__(self, references: dict[str, trueskill.Rating]):
        self.references, self.rating = dict(references), trueskill.Rating(mu=0.0, sigma=SIGMA0)
        self.history: list[dict[str, float]] = []  # {"version", "mu", "sigma"} per finished version

    def choose(self) -> list[str]:
        """References whose mu is within WINDOW of the policy's mu; if there are none, the nearest one."""
        gaps = {k: abs(r.mu - self.rating.mu) for k, r in self.references.items()}
        return [k for k, g in gaps.items() if g <= WINDOW] or [min(gaps, key=gaps.__getitem__)]

    def update_many(self, reference: str, scores: Iterable[float]) -> trueskill.Rating:
        """Rate the policy after games against ``reference``, in order (scores 1 / 0.5 / 0); the reference is fixed."""
        for score in scores:
            self.rating = rate_game(self.rating, self.references[reference], score)[0]
        return self.rating

    def finish_version(self, version: int) -> trueskill.Rating:
        """Log and return ``version``'s rating; the next version starts at its mu with sigma = SIGMA0 (Appendix J)."""
        self.history.append({"version": int(version), "mu": float(self.rating.mu), "sigma": float(self.rating.sigma)})
        logged, self.rating = self.rating, trueskill.Rating(mu=self.rating.mu, sigma=SIGMA0)
        return logged

    def state_dict(self) -> dict:
        """JSON-serialisable state: references, current rating, history."""
        references = {k: _to_dict(r) for k, r in self.references.items()}
        return {"references": references, "rating": _to_dict(self.rating), "history": [dict(h) for h in self.history]}

    def load_state_dict(self, d: dict) -> None:
        self.references = {k: rating_from_dict(r) for k, r in d["references"].items()}
        self.rating, self.history = rating_from_dict(d["rating"]), [dict(h) for h in d["history"]]


class OpponentPool:
    """Past-opponent pool of Appendix N: softmax sampling over qualities, a member's quality drops when beaten; or,
    with ``sampling="pfsp"``, AlphaStar's prioritized fictitious self-play over the members' recent win rates."""

    def __init__(self, eta: float = ETA, sampling: str = "quality"):
        if sampling not in ("quality", "pfsp"):
            raise ValueError(f"sampling must be 'quality' or 'pfsp', got {sampling!r}")
        self.eta, self.sampling, self.keys, self.qualities = float(eta), sampling, [], np.zeros(0, dtype=np.float64)
        # PFSP: the current agent's score against each member (win 1, draw 0.5) and its games, both decayed per game
        self.scores, self.games = np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.float64)

    def add(self, key: str) -> None:
        """Add a snapshot with quality max(existing qualities) (0 for the first); keys must be unique."""
        if key in self.keys:
            raise ValueError(f"key {key!r} is already in the pool")
        self.qualities = np.append(self.qualities, float(self.qualities.max()) if self.keys else 0.0)
        self.scores, self.games = np.append(self.scores, 0.0), np.append(self.games, 0.0)
        self.keys.append(key)

    def win_rates(self) -> np.ndarray:
        """x_i: the current agent's decayed mean score against each member, 0.5 before its first game."""
        return np.divide(self.scores, self.games, out=np.full(len(self.keys), 0.5), where=self.games > 0)

    def probabilities(self) -> np.ndarray:
        """p_i = exp(q_i) / sum_j exp(q_j), computed stably (max subtracted); PFSP: p_i = f(x_i) / sum_j f(x_j) with
        f(x) = (1 - x)^2 (AlphaStar's "squared" weighting: the members the agent beats least), uniform if every f is 0.
        Shape (N,)."""
        if not self.keys:
            return np.zeros(0, dtype=np.float64)
        if self.sampling == "pfsp":
            f = (1.0 - self.win_rates()) ** 2
            return f / f.sum() if f.sum() > 0 else np.full(len(f), 1.0 / len(f))
        e = np.exp(self.qualities - self.qualities.max())
        return e / e.sum()

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` member indices, shape (size,), drawn with probabilities :meth:`probabilities` (none: ValueError)."""
        return rng.choice(len(self.keys), size=size, p=self.probabilities())

    def record_win(self, index: int) -> None:
        """The current policy beat member ``index``: q_i -= eta / (N p_i), with p taken before the update."""
        self.qualities[index] -= self.eta / (len(self.keys) * self.probabilities()[index])

    def record_game(self, index: int, score: float) -> None:
        """A game of the current policy against member ``index`` that it scored ``score`` (1 win, 0.5 draw, 0 loss):
        the quality update on a win (quality sampling), or the decayed win-rate counts (PFSP)."""
        if self.sampling == "pfsp":
            self.scores[index] = PFSP_DECAY * self.scores[index] + score
            self.games[index] = PFSP_DECAY * self.games[index] + 1.0
        elif score == 1:
            self.record_win(index)

    def state_dict(self) -> dict:
        """JSON-serialisable state: eta, sampling, keys, qualities and PFSP's decayed scores and games."""
        lists = {name: [float(v) for v in getattr(self, name)] for name in ("qualities", "scores", "games")}
        return {"eta": self.eta, "sampling": self.sampling, "keys": list(self.keys), **lists}

    def load_state_dict(self, d: dict) -> None:
        self.eta, self.sampling, self.keys = float(d["eta"]), d.get("sampling", "quality"), [str(k) for k in d["keys"]]
        self.qualities = np.asarray(d["qualities"], dtype=np.float64).reshape(-1)
        zeros = [0.0] * len(self.keys)  # files from before PFSP
        self.scores = np.asarray(d.get("scores", zeros), dtype=np.float64)
        self.games = np.asarray(d.get("games", zeros), dtype=np.float64)
