"""TrueSkill league of OpenAI Five (Berner et al. 2019): rated reference pool, rating evaluation (Appendix J: TrueSkill
with sigma = 25/3, beta = sigma / 2, tau = 0, draw probability 0.02; fixed references shifted so that random play has
mu = 0; the evaluated agent plays only references within 10 points and only its own rating moves) and past-opponent
sampling (Appendix N: qualities q, p_i proportional to exp(q_i), q_i -= eta / (N p_i) when the current agent wins)."""

import json
import os
from collections.abc import Callable, Iterable

import numpy as np
import trueskill

MU0, SIGMA0 = 25.0, 25 / 3  # internal prior; only differences matter, reported ratings are shifted (anchor at 0)
BETA, TAU, DRAW_PROBABILITY = SIGMA0 / 2, 0.0, 0.02
ETA, WINDOW = 0.01, 10.0  # Appendix N's quality step; Appendix J: the references played are within WINDOW of mu

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
    """Past-opponent pool of Appendix N: softmax sampling over qualities, a member's quality drops when beaten."""

    def __init__(self, eta: float = ETA):
        self.eta, self.keys, self.qualities = float(eta), [], np.zeros(0, dtype=np.float64)  # members' keys, q

    def add(self, key: str) -> None:
        """Add a snapshot with quality max(existing qualities) (0 for the first); keys must be unique."""
        if key in self.keys:
            raise ValueError(f"key {key!r} is already in the pool")
        self.qualities = np.append(self.qualities, float(self.qualities.max()) if self.keys else 0.0)
        self.keys.append(key)

    def probabilities(self) -> np.ndarray:
        """p_i = exp(q_i) / sum_j exp(q_j), shape (N,), computed stably (max subtracted)."""
        if not self.keys:
            return np.zeros(0, dtype=np.float64)
        e = np.exp(self.qualities - self.qualities.max())
        return e / e.sum()

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """``size`` member indices, shape (size,), drawn with probabilities :meth:`probabilities` (none: ValueError)."""
        return rng.choice(len(self.keys), size=size, p=self.probabilities())

    def record_win(self, index: int) -> None:
        """The current policy beat member ``index``: q_i -= eta / (N p_i), with p taken before the update."""
        self.qualities[index] -= self.eta / (len(self.keys) * self.probabilities()[index])

    def state_dict(self) -> dict:
        """JSON-serialisable state: eta, keys, qualities."""
        return {"eta": self.eta, "keys": list(self.keys), "qualities": [float(q) for q in self.qualities]}

    def load_state_dict(self, d: dict) -> None:
        self.eta, self.keys = float(d["eta"]), [str(k) for k in d["keys"]]
        self.qualities = np.asarray(d["qualities"], dtype=np.float64).reshape(-1)
