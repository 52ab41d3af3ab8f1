"""Tests for benchmark/board_table.py: the board games' final table and the robust rung it reports."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmark"))  # the benchmark imports its helpers there

import board_table  # noqa: E402

FINAL_TABLE = board_table.final_table

from cleanfive.envs.board import BOT_NAMES, HELD_OUT_NAMES  # noqa: E402


def result(rates: dict[str, float], trained=()) -> dict:
    """A final table with these sampled win rates (no draws) and 1.0 against every other bot."""
    sampled = {b: [rates.get(b, 1.0), 0.0, 1.0 - rates.get(b, 1.0)] for b in board_table.bots()}
    return {
        "env_id": "ConnectFour-v1",
        "trained": list(trained),
        "games": 8,
        "sampled": sampled,
        "most_likely": sampled,
    }


def test_the_table_lists_the_ladder_each_bot_followed_by_the_held_out_bots_on_its_rung():
    order = board_table.bots()
    assert sorted(order) == sorted(BOT_NAMES + HELD_OUT_NAMES)
    assert [b for b in order if b in BOT_NAMES] == list(BOT_NAMES)
    assert order.index("search2") < order.index("search2+random15") < order.index("centre2") < order.index("search3")
    assert [board_table.rung(b) for b in ("search2+opening4", "centre3", "greedy")] == ["search2", "search3", "greedy"]


def test_the_robust_rung_is_the_last_rung_whose_untrained_bots_are_all_beaten():
    assert board_table.robust_rung(result({})) == ("search4", 1.0, "random")
    # a held-out bot lost to on search2's rung: search1 is the rung, the worst rate up to it is found below it
    held, worst, against = board_table.robust_rung(result({"greedy": 0.7, "centre2": 0.45, "search1+opening4": 0.6}))
    assert (held, worst, against) == ("search1", 0.6, "search1+opening4")
    # a bot it trained against does not count, even where it lost; a rung of trained bots only is passed over; a
    # loss on the first rung that counts: none
    assert board_table.robust_rung(result({"search1": 0.1}, trained=["search1"]))[0] == "search4"
    assert board_table.robust_rung(result({"random": 0.4}, trained=["random"])) == ("search4", 1.0, "greedy")
    assert board_table.robust_rung(result({"random": 0.4, "greedy+opening4": 0.3}, trained=["random"]))[0] == "none"
    held, worst, against = board_table.robust_rung(result({"random": 0.4}))
    assert held == "none" and np.isnan(worst) and against is None


def test_a_saved_model_plays_every_bot_both_ways(monkeypatch, capsys):
    played = []  # each model's final_table, as main() made it
    monkeypatch.setattr(board_table, "final_table", lambda *args: played.append(FINAL_TABLE(*args)) or played[-1])
    model = "cleanfive/models/tictactoe.cleanfive_model"
    monkeypatch.setattr("sys.argv", ["board_table.py", "--models", model, "--games", "4"])
    board_table.main()
    (out,) = played
    assert out["env_id"] == "TicTacToe-v1" and out["games"] == 4
    for way in ("sampled", "most_likely"):
        assert list(out[way]) == board_table.bots()
        for win, draw, loss in out[way].values():
            assert np.isclose(win + draw + loss, 1.0) and all(x in (0, 0.25, 0.5, 0.75, 1) for x in (win, draw, loss))
    printed = capsys.readouterr().out
    assert "| `search4` | `search4` |" in printed and "robust rung" in printed


def test_head_to_head_plays_each_model_against_each_opponent(tmp_path):
    """--head-to-head: one row per (model, opponent), its rates those of arena.play_match seeded by --seed (torch's
    seed for the sampled moves too); the score is win + draw / 2."""
    import torch
    from saved_models import save_selfplay_model

    from cleanfive import arena

    a, b = (save_selfplay_model(tmp_path / f"{n}.cleanfive_model", "ConnectFour-v1", seed=n) for n in (1, 2))
    lines = board_table.head_to_head([a], [b, a], 32, seed=3)
    torch.manual_seed(3)
    scores = arena.play_match("ConnectFour-v1", 1, arena.load_model(a), arena.load_model(b), 32, seed=3)
    rates = [np.mean(scores == s) for s in (1.0, 0.5, 0.0)]
    assert lines[2] == f"| `{a}` | `{b}` | " + " | ".join(f"{r:.3f}" for r in [*rates, scores.mean()]) + " |"
    assert len(lines) == 2 + 2 and lines[3].startswith(f"| `{a}` | `{a}` | ")
