"""Tests for benchmark/football_budget.py: the line fitted to a run's late win rates and where it reaches a target."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmark"))  # the benchmark imports its helpers there

import football_budget  # noqa: E402


def kept_run(win_rate, end=16, cpu_per_million=360.0):
    """A kept run evaluated every 0.5M steps to ``end`` M steps, win rate ``win_rate(M steps)`` against vmas_ai."""
    rows = [
        {"step": int(m * 1e6), "vmas_ai": win_rate(m), "cpu": m * cpu_per_million}
        for m in [k / 2 for k in range(1, 2 * end + 1)]
    ]
    return {"rows": rows, "final": {"games": 256, "results": {"vmas_ai": [0.3, 0.6, 0.1]}}}


def test_a_straight_trend_is_fitted_and_extrapolated_at_the_runs_own_cpu_cost():
    # early rows off the line: only the last quarter (12-16M) is fitted
    fit = football_budget.trend(kept_run(lambda m: 0.9 if m < 12 else 0.1 + 0.015 * m), "vmas_ai", 0.40)
    assert fit["line"][0] == pytest.approx(0.015) and fit["at_end"] == pytest.approx(0.34)
    assert fit["reach"] == pytest.approx(20.0) and fit["cpu_reach"] == pytest.approx(20 * 6.0)  # 360 s a M steps
    assert fit["evaluations"] == 9 and fit["final"] == pytest.approx((0.3, 0.75, 256))


def test_a_run_past_the_target_or_falling_never_extrapolates_beyond_it():
    past = football_budget.trend(kept_run(lambda m: 0.02 * m), "vmas_ai", 0.20)
    assert past["reach"] == 16.0 and past["cpu_reach"] == pytest.approx(past["cpu_end"])
    falling = football_budget.trend(kept_run(lambda m: 0.5 - 0.01 * m), "vmas_ai", 0.40)
    assert falling["reach"] == float("inf")
