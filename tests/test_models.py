"""The models that ship in cleanfive/models/: small plain-data files that the Arena and --eval-only read, each with a
card whose table is what --eval-only prints for it (played again under -m slow)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from driver import drive
from golden import check_run

from cleanfive.arena import DEFAULT_MODEL, MODELS, load_model
from cleanfive.envs.teams import make_team_env

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = sorted(MODELS.glob("*.cleanfive_model"))
COMMAND = re.compile(r"^uv run python (cleanfive/ppo_lstm_selfplay\.py --eval-only \S+ --eval-games 512)$", re.M)


def table(text: str) -> list[str]:
    """The Markdown table rows of --eval-only's output (or of a card, before its sections: a Connect Four card's
    ``## Perfect play``) and its rating line."""
    text = text.split("\n## ", 1)[0]
    return [line for line in text.splitlines() if line.startswith("| ") or line.startswith("|---")]


def test_the_arena_default_and_the_three_worlds_are_bundled():
    assert DEFAULT_MODEL in BUNDLED
    worlds = {torch.load(path, weights_only=True)["args"]["env_id"] for path in BUNDLED}
    assert {"ConnectFour-v1", "TicTacToe-v1", "Moba5v5-v0"} <= worlds


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_a_bundled_model_is_small_plain_data_with_a_card_for_every_reference(path):
    """A card's table has a row for each reference of its world, in order (a newer card's also for the held-out
    bots, as --eval-only prints them), each of 512 games."""
    assert path.stat().st_size < 5 * 2**20
    saved = torch.load(path, map_location="cpu", weights_only=True)  # plain data: tensors, numbers, strings
    assert set(saved) - {"converted_from"} == {"script", "args", "model"} and saved["script"] == "ppo_lstm_selfplay.py"
    assert all(len(digest) == 64 for digest in saved.get("converted_from", []))  # its files before convert_saved.py
    model = load_model(str(path))  # the Arena builds the script's Agent from it
    assert model.label == path.stem
    card = path.with_suffix(".md").read_text()
    assert COMMAND.search(card)[1].split()[2] == f"cleanfive/models/{path.name}"
    names = [row.split("`")[1] for row in table(card)[2:] if "| held out |" not in row]  # held-out bots aside
    assert names == list(make_team_env(model.env_id, 1, 0, model.num_heroes).bot_names)
    assert all(row.endswith("| 512 |") for row in table(card)[2:])


@pytest.mark.slow
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_eval_only_prints_the_card_table_again(path):
    card = path.with_suffix(".md").read_text()
    command = COMMAND.search(card)[1].split()
    result = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-2000:]
    assert table(result.stdout) == table(card)
    rating = re.search(r"trueskill_mu=\S+ sigma=\S+", result.stdout)[0]
    assert f"`{rating}`" in card


# a slice of each card that the default run plays again: one matchup (the lane world: its three bots, 2 games each,
# as its games are long), a few dozen seeded games, with the card's command otherwise; the table it prints is kept per
# machine class (tests/golden/runs.json); -m slow plays the whole card again
SLICES = {
    "connect4": ["--references", "random", "greedy", "--reference-games", "2", "--eval-games", "24"],
    "tictactoe": ["--references", "random", "greedy", "--reference-games", "2", "--eval-games", "24"],
    "lane": ["--eval-games", "2"],
}


@pytest.fixture(scope="module")
def slices(tmp_path_factory):
    root = tmp_path_factory.mktemp("slices")
    cases = {p.stem: (root / p.stem, ["--eval-only", str(p), *SLICES[p.stem], "--no-cuda"]) for p in BUNDLED}
    return drive(ROOT / "cleanfive" / "ppo_lstm_selfplay.py", cases, timeout=600)


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_a_slice_of_each_card_plays_again_exactly(slices, path):
    result, _ = slices[path.stem]
    assert result.returncode == 0, result.stderr[-2000:]
    rows = table(result.stdout)
    card_bots = [row.split("`")[1] for row in table(path.with_suffix(".md").read_text())[2:]]
    assert rows and {row.split("`")[1] for row in rows[2:]} & set(card_bots)  # the card's matchups, not others
    rating = re.search(r"trueskill_mu=\S+ sigma=\S+", result.stdout)[0]
    check_run(f"card slice {path.stem}", None, table=rows, rating=rating)
