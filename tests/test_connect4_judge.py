"""benchmark/connect4_judge.py: the perfect-play judge's scoring, its phases, its data and how it feeds the network."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanfive.envs.board import BoardTeamEnv, has_won, legal_actions, play_all, winning_moves

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmark"))
import connect4_judge as judge  # noqa: E402
from board_table import load_agent, training_script  # noqa: E402
from saved_models import save_selfplay_model  # noqa: E402
from test_repo import in_process  # noqa: E402

NAN = np.nan


def test_scoring_of_hand_made_positions():
    """Each row's numbers worked out by hand from the scores and the probabilities."""
    scores = np.array(
        [
            [1, -2, NAN, 0, 3, -1, 1],  # won: columns 0, 4, 6 keep it, 4 (3) is the fastest
            [0, -1, 0, -3, NAN, NAN, -2],  # drawn: columns 0 and 2 keep it, both optimal
            [2, 5, -1, -1, -1, -1, -1],  # won: 0 keeps it (a slower win), 1 is optimal
            [-4, 1, -2, NAN, -3, -3, -3],  # won by column 1 only; the policy's top is a full column
        ]
    )
    probs = np.array(
        [
            [0.1, 0.5, 0.0, 0.1, 0.2, 0.05, 0.05],
            [0.3, 0.1, 0.4, 0.1, 0.0, 0.0, 0.1],
            [0.6, 0.3, 0.1, 0.0, 0.0, 0.0, 0.0],
            [0.1, 0.2, 0.0, 0.6, 0.05, 0.05, 0.0],
        ]
    )
    got = judge.score_moves(scores, probs)
    assert got["keeps"].tolist() == [0.0, 1.0, 1.0, 1.0]  # row 4: column 1 (0.2), not the full column 3
    assert got["optimal"].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert got["sampled"] == pytest.approx([0.1 + 0.2 + 0.05, 0.3 + 0.4, 0.6 + 0.3, 0.2])
    assert got["uniform"] == pytest.approx([3 / 6, 2 / 5, 2 / 7, 1 / 6])


def test_wins_at_once_of_hand_made_positions():
    """Game 0 at ply 6: the first player's three in column 0 win there, and its most likely move plays it. Game 1 at
    ply 7: the second player's three in column 1 win there, but its most likely move blocks column 0. Game 2: no win
    in one move is open. So two positions count and one of them is taken."""
    games = [np.array(m) for m in ([0, 1, 0, 1, 0, 1], [0, 1, 0, 1, 0, 1, 6], [3, 3])]
    probs = np.array([[0.9, 0.1, 0, 0, 0, 0, 0], [0.6, 0.4, 0, 0, 0, 0, 0], [1.0, 0, 0, 0, 0, 0, 0]])
    assert judge.wins_at_once(judge.replay(games), np.array([6, 7, 2]), probs) == {"n": 2, "share": 0.5}


def test_phases_are_seven_plies_each():
    assert judge.phase(np.array([0, 6, 7, 13, 14, 27, 28, 41])) == [
        "0–6",
        "0–6",
        "7–13",
        "7–13",
        "14–20",
        "21–27",
        "28–34",
        "35–41",
    ]


def test_the_positions_file_is_the_solvers_and_replays_on_the_worlds_board():
    """2,402 lines of 7 scores; replayed with the world's own moves (board.play_all), no game is over, the full
    columns are exactly the null scores, and every move that wins at once scores as the solver scores an immediate
    win, (43 - stones) // 2 (so the columns are not mirrored: mirrored, most would not)."""
    lines = judge.DATA.read_text().splitlines()
    assert len(lines) == 2402
    rows = [json.loads(line) for line in lines]
    assert all(len(row["scores"]) == 7 and set(row["moves"]) <= set("1234567") for row in rows)
    moves, scores = judge.load_positions()
    board = np.full((len(rows), 6, 7), -1, dtype=np.int64)
    plies = np.array([len(m) for m in moves])
    for ply in range(plies.max()):
        playing = plies > ply
        column = np.array([m[ply] if len(m) > ply else 0 for m in moves])
        assert legal_actions(board, "ConnectFour-v1")[playing, column[playing]].all()
        after = play_all(board, ply % 2, "ConnectFour-v1")[np.arange(len(rows)), column]
        board[playing] = after[playing]
    assert (board == judge.replay(moves)[np.arange(len(rows)), plies]).all()
    assert not has_won(board, 0, "ConnectFour-v1").any() and not has_won(board, 1, "ConnectFour-v1").any()
    assert ((board[:, 0] >= 0) == np.isnan(scores)).all()
    win = winning_moves(board, plies % 2, "ConnectFour-v1")
    assert win.sum() > 100 and (scores[win] == np.broadcast_to(((43 - plies) // 2)[:, None], win.shape)[win]).all()
    value = np.nanmax(np.sign(scores), -1)
    assert ((value >= 0).sum(), (value > 0).sum()) == (1577, 1333)


def test_observations_are_the_worlds():
    """The judge's board and observation of the side to move after each move equal those of the world
    (BoardTeamEnv: envpool's board, its side ids and planes) playing the same moves."""
    moves, _ = judge.load_positions()
    games = [m for m in moves if len(m) >= 20][:6]
    boards = judge.replay(games)
    env = BoardTeamEnv("ConnectFour-v1", len(games), 0)
    obs, info = env.reset()
    for ply in range(20):
        side = info["acting"][:, :, 0].argmax(1)  # the side to move in each game
        mine = judge.observations(boards[:, ply], np.full(len(games), ply))
        assert (obs[np.arange(len(games)), side, 0] == mine).all(), ply
        actions = np.zeros((len(games), 2, 1), dtype=np.int64)
        actions[:, :, 0] = np.array([m[ply] for m in games])[:, None]
        obs, _, _, info = env.step(actions)


@pytest.mark.parametrize("fresh", [False, True])
def test_the_batched_policy_is_the_one_the_world_plays(fresh):
    """policy(): all positions in one left-padded batch give the probabilities that the script's Agent gives when the
    world plays the game move by move (as board_table.play feeds it: every step, active on its side's turns), read
    at the position; with ``fresh``, from a fresh state at the position."""
    agent, _ = load_agent(str(ROOT / judge.BUNDLED), ("ConnectFour-v1",))  # trained: its policy is far from uniform
    moves, _ = judge.load_positions()
    by_length = sorted(moves, key=len)
    picked = by_length[::160] + by_length[-1:]  # 17 games, the shortest to the longest
    plies = np.array([len(m) for m in picked])
    assert plies.min() == 0 and plies.max() == 41
    batched = judge.policy(agent, judge.replay(picked), plies, fresh)
    env = BoardTeamEnv("ConnectFour-v1", len(picked), 0)
    obs, info = env.reset()
    rows = np.arange(len(picked))
    mover = info["acting"][:, :, 0].argmax(1) ^ (plies % 2)  # the side to move at the position
    state, expected = training_script().zero_state(agent, len(picked), "cpu"), np.zeros((len(picked), 7))
    with torch.inference_mode():
        for ply in range(plies.max() + 1):
            at = plies == ply
            active = torch.as_tensor(at if fresh else info["acting"][rows, mover, 0] & (ply <= plies))
            x = torch.as_tensor(obs[rows, mover, 0])
            fresh_state = training_script().zero_state(agent, len(picked), "cpu")
            hidden, state, squares = agent.get_states(
                x, fresh_state if fresh else state, torch.zeros(len(picked)), active
            )
            mask = torch.as_tensor(info["action_mask"][rows, mover, 0])
            probs = torch.softmax(agent.get_logits(hidden, squares).masked_fill(~mask, -torch.inf), -1).numpy()
            expected[at] = probs[at]
            actions = np.zeros((len(picked), 2, 1), dtype=np.int64)
            actions[:, :, 0] = np.array([m[ply] if len(m) > ply else m[-1] if len(m) else 0 for m in picked])[:, None]
            actions[plies <= ply] = legal_actions(info["board"], "ConnectFour-v1")[plies <= ply].argmax(-1)[
                :, None, None
            ]
            obs, _, _, info = env.step(actions)
    np.testing.assert_allclose(batched, expected, atol=1e-5)
    if not fresh:  # the earlier turns change what the network reads
        assert np.abs(batched - judge.policy(agent, judge.replay(picked), plies, True)).max() > 0.01


def test_the_judge_of_a_model_is_its_positions_mean(tmp_path):
    """judge(): overall and per phase, the means of score_moves over the not-lost positions of each."""
    path = save_selfplay_model(tmp_path / "untrained.cleanfive_model", "ConnectFour-v1", seed=1)
    result = judge.judge(path)
    assert result["positions"] == 2402 and result["overall"]["n"] == 1577 and result["overall"]["won"] == 1333
    phases = [key for key in result if key.count("–")]
    assert phases == ["0–6", "7–13", "14–20", "21–27", "28–34", "35–41"]
    assert sum(result[p]["n"] for p in phases) == 1577
    for metric in judge.METRICS:
        weighted = sum(result[p][metric] * result[p]["n"] for p in phases) / 1577
        assert result["overall"][metric] == pytest.approx(weighted)
    assert result["overall"]["uniform"] == pytest.approx(0.499, abs=5e-4)  # a random legal move, as the issue
    moves, scores = judge.load_positions()  # the position alone: the mean over the not-lost positions of score_moves
    agent, _ = load_agent(path, ("ConnectFour-v1",))
    plies, kept = np.array([len(m) for m in moves]), np.nanmax(np.sign(scores), -1) >= 0
    alone = judge.policy(agent, judge.replay([m for m, k in zip(moves, kept, strict=True) if k]), plies[kept], True)
    for metric, values in judge.score_moves(scores[kept], alone).items():
        assert result["fresh_state"][metric] == pytest.approx(values.mean())
    assert 0.2 < result["overall"]["keeps"] < 0.9  # an untrained network: about as a random move
    # wins at once: the positions where some legal move completes a line, and whether the most likely one does
    boards = judge.replay([m for m, k in zip(moves, kept, strict=True) if k])
    probs = judge.policy(agent, boards, plies[kept], False)
    position = boards[np.arange(len(probs)), plies[kept]].astype(np.int64)
    mover = plies[kept] % 2
    legal = position[:, 0] < 0
    after = play_all(position, mover, "ConnectFour-v1")  # (K, 7, 6, 7)
    wins = np.stack([has_won(after[:, c], mover, "ConnectFour-v1") for c in range(7)], 1) & legal
    best = np.where(legal, probs, -1).argmax(-1)
    offered = wins.any(1)
    assert result["wins_at_once"]["n"] == offered.sum() == 354  # every such position is won, as its scores say
    assert result["wins_at_once"]["share"] == pytest.approx(wins[np.arange(len(best)), best][offered].mean())


def plain_negamax(value, moves, depth):
    """search_values' move values for the position after ``moves``, one move at a time, each child board replayed
    from its moves (connect4_judge.replay) and judged by the world's has_won: WIN for a move that wins, 0 for one
    that fills the board, else minus the opponent's best at depth - 1 (``value`` at depth 1)."""
    board, ply, out = judge.replay([moves])[0, -1], len(moves), np.full(7, -np.inf)
    for column in [c for c in range(7) if board[0, c] < 0]:
        child = judge.replay([np.append(moves, column)])[0, -1].astype(np.int64)
        if has_won(child, ply % 2, "ConnectFour-v1"):
            out[column] = judge.WIN
        elif ply + 1 == 42:
            out[column] = 0.0
        elif depth == 1:
            out[column] = -value(child[None], np.array([ply + 1]))[0]
        else:
            out[column] = -plain_negamax(value, np.append(moves, column), depth - 1).max()
    return out


def test_the_search_is_a_plain_negamax_on_the_value():
    """search_values equals a one-position, one-move-at-a-time negamax on positions of the judge, late ones
    included, at depths 1-3, with a value that differs for every position; and with a value of 0 everywhere a
    depth-2 search takes a win in one and refuses every move that lets the opponent win at once."""
    moves, _ = judge.load_positions()
    picked = [moves[i] for i in np.random.default_rng(0).choice(len(moves), 30, replace=False)]
    picked += [m for m in moves if len(m) >= 38][:5]  # full boards within the search
    plies = np.array([len(m) for m in picked])
    positions = judge.replay(picked)[np.arange(len(picked)), plies].astype(np.int64)
    weights = np.random.default_rng(1).normal(size=(6, 7))

    def value(boards, at):  # any function of the position and its side to move
        return np.tanh(((boards == (at % 2)[:, None, None]) * weights).sum((1, 2)) - 0.1 * (boards >= 0).sum((1, 2)))

    for depth, some in ((1, 35), (2, 35), (3, 10)):
        got = judge.search_values(value, positions[-some:], plies[-some:], depth)
        want = np.stack([plain_negamax(value, m, depth) for m in picked[-some:]])
        np.testing.assert_allclose(got, want)
    zero = lambda boards, at: np.zeros(len(boards))  # noqa: E731
    # win: at ply 6 the first player, to move, has three in column 0; block: at ply 7 the second player, to move,
    # faces the first's three in column 0 and has no three of its own
    win, block = judge.replay([np.array([0, 1, 0, 1, 0, 1])]), judge.replay([np.array([0, 1, 0, 1, 0, 6, 2])])
    assert judge.search_values(zero, win[:, 6].astype(np.int64), np.array([6]), 2)[0].argmax() == 0
    after_block = judge.search_values(zero, block[:, 7].astype(np.int64), np.array([7]), 2)[0]
    assert after_block.argmax() == 0 and (np.delete(after_block, 0) == -judge.WIN).all()  # only column 0 holds


def test_the_searched_judge_is_the_search_moves_share(tmp_path):
    """searched() at depth 0 is judge()'s row of the position alone; at depth 1 its overall keeps is the share of the
    not-lost positions where the move found here, one position at a time, keeps the solver's outcome: a winning move
    first, else the move after which the model's value for the opponent (each child replayed from its moves) is
    lowest, ties by the most likely move; its phases weigh up to the overall number."""
    path = save_selfplay_model(tmp_path / "untrained.cleanfive_model", "ConnectFour-v1", seed=1)
    result, alone = judge.searched(path, [0, 1]), judge.judge(path)["fresh_state"]
    assert result[0]["overall"]["keeps"] == pytest.approx(alone["keeps"])
    assert result[0]["overall"]["optimal"] == pytest.approx(alone["optimal"])
    moves, scores = judge.load_positions()
    kept = [k for k, s in enumerate(scores) if np.nanmax(np.sign(s)) >= 0]
    plies = np.array([len(moves[k]) for k in kept])
    agent, _ = load_agent(path, ("ConnectFour-v1",))
    probs = judge.policy(agent, judge.replay([moves[k] for k in kept]), plies, True)
    children = [(i, c) for i, k in enumerate(kept) for c in range(7) if not np.isnan(scores[k][c])]
    boards = judge.replay([np.append(moves[kept[i]], c) for i, c in children])
    after = np.array([plies[i] + 1 for i, _ in children])
    child = boards[np.arange(len(children)), after].astype(np.int64)
    theirs = judge.value_head(agent, child, after)
    move_value = np.full((len(kept), 7), -np.inf)
    for (i, c), board, v in zip(children, child, theirs, strict=True):
        won = has_won(board, plies[i] % 2, "ConnectFour-v1")
        move_value[i, c] = judge.WIN if won else 0.0 if plies[i] + 1 == 42 else -v
    keeps = []
    for i, k in enumerate(kept):
        best = [c for c in range(7) if move_value[i, c] == move_value[i].max()]
        move = max(best, key=lambda c: probs[i, c])
        keeps.append(np.sign(scores[k][move]) == np.nanmax(np.sign(scores[k])))
    assert result[1]["overall"]["keeps"] == pytest.approx(np.mean(keeps))
    counts = dict(zip(*np.unique(judge.phase(plies), return_counts=True), strict=True))
    for depth in (0, 1):
        weighted = sum(result[depth][label]["keeps"] * n for label, n in counts.items()) / len(plies)
        assert result[depth]["overall"]["keeps"] == pytest.approx(weighted)


def test_a_bad_model_path_is_one_line_and_exit_2(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a model")
    tictactoe = save_selfplay_model(tmp_path / "ttt.cleanfive_model", "TicTacToe-v1")
    for path in (tmp_path / "missing.cleanfive_model", foreign, tictactoe):
        result = in_process([sys.executable, str(ROOT / "benchmark" / "connect4_judge.py"), "--models", str(path)])
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert str(path) in result.stderr
    result = in_process([sys.executable, str(ROOT / "benchmark" / "connect4_judge.py"), "--depths", "2", "-1"])
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--depths" in result.stderr, result.stderr


def test_every_connect4_card_carries_the_judges_table():
    """A bundled Connect Four model's card holds the table that the judge gives for it now (--cards wrote it)."""
    cards = [
        path
        for path in sorted((ROOT / "cleanfive" / "models").glob("*.cleanfive_model"))
        if torch.load(path, weights_only=True)["args"]["env_id"] == judge.ENV_ID
    ]
    assert cards
    for path in cards:
        section = path.with_suffix(".md").read_text().split("\n## Perfect play\n", 1)[1]
        rows = [line for line in judge.table({f"`{path.stem}`": judge.judge(str(path))}) if line.startswith("|")]
        assert [line for line in section.splitlines() if line.startswith("|")] == rows


def test_the_learning_benchmark_judges_its_checkpoints_and_final_models(tmp_path, monkeypatch):
    """benchmark/ppo_lstm_selfplay_learning.py: a checkpoint's judge goes into the row of the evaluation at its step
    (once per file written); a kept run's final model gets its judge if it is the file its final table played; the
    final table's judge rows are each seed's numbers and their mean ± std (numpy's, here)."""
    import hashlib
    import importlib

    bench = importlib.import_module("ppo_lstm_selfplay_learning")
    models = [
        save_selfplay_model(tmp_path / f"m{seed}.cleanfive_model", "ConnectFour-v1", seed=seed) for seed in (1, 2)
    ]
    checkpoint = tmp_path / "checkpoint.pt"
    torch.save(torch.load(models[0], weights_only=True) | {"global_step": 4096}, checkpoint)
    rows = [{"step": 2048}, {"step": 4096}]
    judged = bench.judge_checkpoint(str(checkpoint), rows, "ConnectFour-v1", None)
    results = [judge.judge(model) for model in models]
    overall = results[0]["overall"]
    assert "judge" not in rows[0] and rows[1]["judge"] == pytest.approx(
        {m: overall[m] for m in judge.METRICS}, abs=1e-4
    )
    monkeypatch.setattr(bench.connect4_judge, "judge", lambda path: pytest.fail("judged the same file again"))
    assert bench.judge_checkpoint(str(checkpoint), rows, "ConnectFour-v1", judged) == judged
    assert bench.judge_checkpoint(str(checkpoint), [{"step": 4096}], "TicTacToe-v1", None) is None
    monkeypatch.undo()
    foreign = tmp_path / "foreign.pt"
    foreign.write_text("not a checkpoint")
    assert bench.judge_checkpoint(str(foreign), rows[:1], "ConnectFour-v1", None) is not None and "judge" not in rows[0]

    args = bench.PARSER.parse_args(["--seeds", "1", "2", "--clock", "cpu", "--jobs", "2", "--from-results"])
    args.results = tmp_path
    for seed, model in zip((1, 2), models, strict=True):
        identity = {"env_id": args.env_id, "seed": seed, "minutes": 30.0, "clock": "cpu", "threads": 1, "extra": []}
        digest = hashlib.sha256(Path(model).read_bytes()).hexdigest() if seed == 1 else "another file"
        run = identity | {"rows": [{"step": 4096, "cpu": 60.0, "time": 61.0}], "model": model, "code": "abc1234"}
        run |= {"date": "2026-12-06 06:00 UTC"}
        bench.pv.keep(tmp_path / "block" / f"seed{seed}.json", run | {"final": {"games": 8, "model_sha256": digest}})
    found = {seed: bench.kept_or_train(seed, "block", args) for seed in (1, 2)}
    assert found[1]["final"]["judge"]["overall"] == overall
    assert "judge" in json.loads((tmp_path / "block" / "seed1.json").read_text())["final"]
    assert "judge" not in found[2]["final"]  # its final table played another file

    lines = bench.judge_table({1: {"judge": results[0]}, 2: None, 3: {"judge": results[1]}})
    keeps = [r["overall"]["keeps"] for r in results]
    assert (
        f"| most likely move keeps the outcome (all 1,577) | {keeps[0]:.3f} | — | {keeps[1]:.3f} | "
        f"{np.mean(keeps):.3f} ± {np.std(keeps):.3f} (2/3 seeds) |"
    ) in lines
    early = [r["0–6"]["keeps"] for r in results]
    assert f"| most likely keeps, plies 0–6 (426) | {early[0]:.3f} | — | {early[1]:.3f} |" in "\n".join(lines)
    taken = [r["wins_at_once"]["share"] for r in results]
    row = f"| most likely move wins at once where it can (354) | {taken[0]:.3f} | — | {taken[1]:.3f} |"
    assert row in "\n".join(lines)
    before = {key: value for key, value in results[0].items() if key != "wins_at_once"}  # a judge kept from before it
    lines = bench.judge_table({1: {"judge": before}, 2: {"judge": results[1]}})
    assert lines and not any("wins at once" in line for line in lines)
    assert bench.judge_table({1: {"games": 8}, 2: None}) == []


def test_the_learning_benchmark_plays_its_final_models_head_to_head(tmp_path, monkeypatch, capsys):
    """benchmark/ppo_lstm_selfplay_learning.py --head-to-head: a kept run's final model plays the bundled model and
    the same seed's model of another block (arena.play_match, seeded by the seed), kept once; a model that is not
    the file its results' final table played is not played; the table gives each seed's score and rates."""
    import hashlib
    import importlib

    from cleanfive import arena

    bench = importlib.import_module("ppo_lstm_selfplay_learning")
    digest = {}
    for block, seed in (("mine", 1), ("mine", 2), ("other", 1), ("other", 2)):
        model = save_selfplay_model(tmp_path / f"{block}{seed}.cleanfive_model", "ConnectFour-v1", seed=seed)
        digest[block, seed] = hashlib.sha256(Path(model).read_bytes()).hexdigest()
        kept = digest[block, seed] if (block, seed) != ("other", 2) else "another file"
        run = {"env_id": "ConnectFour-v1", "seed": seed, "minutes": 30.0, "clock": "cpu", "threads": None, "extra": []}
        run |= {"rows": [{"step": 4096, "cpu": 60.0, "time": 61.0}], "model": model, "code": "abc1234"}
        run |= {"date": "2026-12-06 06:00 UTC"}
        bench.pv.keep(tmp_path / block / f"seed{seed}.json", run | {"final": {"games": 8, "model_sha256": kept}})
    flags = ["--seeds", "1", "2", "--clock", "cpu", "--from-results", "--head-to-head", "bundled", "other"]
    args = bench.PARSER.parse_args(flags)
    args.results = tmp_path
    monkeypatch.setattr(bench.connect4_judge, "judge", lambda path: {})  # (the judge has its own test)
    found = {seed: bench.kept_or_train(seed, "mine", args) for seed in (1, 2)}
    torch.manual_seed(1)
    mine, other = (
        arena.load_model(str(tmp_path / "mine1.cleanfive_model")),
        arena.load_model(str(tmp_path / "other1.cleanfive_model")),
    )
    scores = arena.play_match("ConnectFour-v1", 1, mine, other, bench.HEAD_TO_HEAD_GAMES, seed=1)
    match = found[1]["final"]["head_to_head"]["other"]
    assert match["win"] == np.mean(scores == 1) and match["draw"] == np.mean(scores == 0.5)
    assert match["loss"] == np.mean(scores == 0) and match["opponent_sha256"] == digest["other", 1]
    assert match["games"] == 512 and match["win"] + match["draw"] + match["loss"] == pytest.approx(1)
    assert set(found[2]["final"]["head_to_head"]) == {"bundled"}  # its "other" model is not the file its table played
    assert "no head-to-head against other" in capsys.readouterr().out
    bundled = Path(arena.DEFAULT_MODEL).read_bytes()
    assert found[1]["final"]["head_to_head"]["bundled"]["opponent_sha256"] == hashlib.sha256(bundled).hexdigest()
    assert "head_to_head" in json.loads((tmp_path / "mine" / "seed1.json").read_text())["final"]  # kept
    monkeypatch.setattr(arena, "play_match", lambda *a, **k: pytest.fail("played a kept match again"))
    assert bench.kept_or_train(1, "mine", args)["final"]["head_to_head"] == found[1]["final"]["head_to_head"]

    lines = bench.head_to_head_table({s: found[s]["final"] for s in (1, 2)}, ["bundled", "other"])
    one = match["win"] + match["draw"] / 2
    row = f"| score against `other`'s model of the same seed (win + draw / 2) | {one:.3f} | — | {one:.3f} (1/2 seeds) |"
    assert row in lines and sum(line.startswith("| ") for line in lines) == 1 + 2 * 4  # the header, 4 rows an opponent
    assert bench.head_to_head_table({1: {"games": 8}}, ["bundled"]) == []
    # a bundled model replaced since: its kept match stays, as the former one's (under its digest), and the new
    # bundled model is played
    former = found[1]["final"]["head_to_head"]["bundled"]
    monkeypatch.setattr(bench, "bundled_file", lambda args: tmp_path / "other1.cleanfive_model")
    monkeypatch.setattr(bench, "bundled_sha256", lambda args: digest["other", 1])
    monkeypatch.setattr(bench.board_table, "match", lambda *a: {"win": 0.5, "draw": 0.25, "loss": 0.25})
    again = bench.kept_or_train(1, "mine", args)["final"]["head_to_head"]
    assert again[f"bundled@{former['opponent_sha256'][:8]}"] == former
    rates = {"win": 0.5, "draw": 0.25, "loss": 0.25}
    assert again["bundled"] == {"games": 512, **rates, "opponent_sha256": digest["other", 1]}
    lines = bench.head_to_head_table({1: {"head_to_head": again}}, ["bundled"])
    assert not any("former" in line for line in lines)  # its match is history, kept in the results
    assert "| score against the bundled model (win + draw / 2) | 0.625 | 0.625 (1/1 seeds) |" in lines
    # a file converted since (cleanfive/convert_saved.py: other bytes, its former digest kept in it) is still the
    # model its results name: the bundled model converted is not a former one, and nothing is played again
    converter = [sys.executable, str(ROOT / "cleanfive" / "convert_saved.py"), str(tmp_path / "other1.cleanfive_model")]
    subprocess.run(converter, check=True, capture_output=True, timeout=120)
    converted = Path(converter[-1])
    assert hashlib.sha256(converted.read_bytes()).hexdigest() != digest["other", 1]
    assert bench.played_file(converted, digest["other", 1]) == converted and not bench.played_file(converted, "x")
    monkeypatch.setattr(bench.board_table, "match", lambda *a: pytest.fail("played a kept match again"))
    assert bench.kept_or_train(1, "mine", args)["final"]["head_to_head"] == again
    for flags, says in (
        (["--head-to-head", "nosuch"], "no such block"),
        (["--env-id", "Moba5v5-v0", "--head-to-head", "bundled"], "board games only"),
    ):
        monkeypatch.setattr(
            sys, "argv", ["ppo_lstm_selfplay_learning.py", "--from-results", "--results", str(tmp_path), *flags]
        )
        with pytest.raises(SystemExit) as exit_info:
            bench.main()
        assert exit_info.value.code == 2 and says in capsys.readouterr().err
