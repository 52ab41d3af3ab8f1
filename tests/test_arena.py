"""cleanfive/arena.py: the server's game loop, the record, the league, bad input, and the page in headless Chromium.

The models are untrained agents saved in ppo_lstm_selfplay.py's --save-model format (what the arena loads). Set
ARENA_SCREENSHOTS=docs/img to have the browser tests write the docs' screenshots.
"""

import base64
import contextlib
import functools
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from needs import MISSING, needs
from payloads import RunsCode
from saved_models import save_selfplay_model as save_model

from cleanfive import arena
from cleanfive.arena import MAX_BODY, Args, Session, describe_world, league, load_model, serve
from cleanfive.envs import moba
from cleanfive.envs.board import has_won
from cleanfive.envs.teams import make_team_env

ROOT = Path(__file__).resolve().parents[1]
LONG_RUN = ("ConnectFour-v1__ppo_lstm_selfplay__a_run_with_a_long_name_" * 2)[:100]
ARENA = [sys.executable, str(ROOT / "cleanfive" / "arena.py")]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    name = "ppo_lstm_selfplay.cleanfive_model"
    return {
        "c4": save_model(root / "c4_seed1" / name, "ConnectFour-v1", seed=1),
        "c4b": save_model(root / "c4_seed2" / name, "ConnectFour-v1", seed=2),
        "ttt": save_model(root / "ttt" / name, "TicTacToe-v1"),
        "lane": save_model(root / "lane" / name, "Moba5v5-v1", num_heroes=3),
        "long": save_model(root / LONG_RUN / name, "ConnectFour-v1", seed=3),  # a run's name of 100 characters
    }


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("first", [0, 1])
def test_board_game_to_the_end_is_recorded(models, tmp_path, first):
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["c4"]), Args(record=str(record)))
    state = session.new(side=first)
    assert len(state["moves"]) == first and state["to_move"] == state["side"]  # second: the agent has moved
    if first:
        assert state["probs"] and abs(sum(state["probs"]) - 1) < 0.01 and isinstance(state["value"], float)
    rng = np.random.default_rng(0)
    while not state["over"]:
        assert len(state["moves"]) < state["world"]["max_steps"]  # a move fills a cell
        full = np.flatnonzero(~np.array(state["legal"]))
        if full.size:  # an illegal click is ignored with a note
            again = session.move(int(full[0]))
            assert "not legal" in again["note"] and again["moves"] == state["moves"]
        before = len(state["moves"])
        state = session.move(int(rng.choice(np.flatnonzero(state["legal"]))))
        assert len(state["moves"]) in (before + 1, before + 2)
    (game,) = records(record)
    assert game["players"] == ["person", "c4_seed1"] and game["people"] == ["person"]
    assert game["moves"] == state["moves"] and game["sides"][0] == state["side"]
    board = np.array(state["board"])[None]
    won = [bool(has_won(board, side, "ConnectFour-v1")[0]) for side in game["sides"]]
    assert game["outcome"] == [1.0 * won[0] - won[1], 1.0 * won[1] - won[0]]
    assert "won" in state["result"] if won[0] else ("lost" in state["result"] if won[1] else "drew" in state["result"])
    with pytest.raises(ValueError):
        session.move(0)  # the game is over


def hero(state, kind=moba.HERO, index=0):
    lane = state["lane"]
    return next(u for u in lane["units"] if u[0] == state["side"] and u[1] == kind and u[5] == index)


@pytest.mark.parametrize("side", [0, 1])
def test_lane_person_moves_in_screen_directions_with_fog(models, tmp_path, side):
    session = Session(load_model(models["lane"]), Args(record=str(tmp_path / "games.jsonl")))
    state = session.new(mode="play", side=side, opponent="random")
    start = hero(state)[2:4]
    assert start[0] < 8 and start[1] < 8  # the person's base is bottom-left on the page, either side
    assert not any(u[0] != side and u[1] == moba.HERO for u in state["lane"]["units"])  # enemy heroes in the fog
    assert state["action_names"][1] == "move_E" and len(state["lane"]["mask"]) == session.env.num_actions
    for _ in range(4):
        state = session.tick(1)  # move_E: to the right of the screen
    x, y = hero(state)[2:4]
    assert x == pytest.approx(start[0] + 4, abs=0.3) and y == pytest.approx(start[1], abs=0.3)
    assert state["moves"] == [1] * 4 and state["t"] == 4 and len(state["probs"]) == session.env.num_actions
    watch = session.new(mode="watch", side=0, opponent="agent")
    assert any(u[0] == 1 and u[1] == moba.HERO for u in watch["lane"]["units"])  # watching: everything is drawn


def test_lane_game_to_the_end_is_recorded(models, tmp_path):
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["lane"]), Args(record=str(record)))
    state = session.new(mode="watch", opponent="push")
    while not state["over"]:
        state = session.tick()
    (game,) = records(record)
    assert game["players"] == ["lane", "push"] and game["people"] == [] and game["mode"] == "watch"
    assert game["length"] == state["t"] <= moba.MAX_STEPS and sum(game["outcome"]) == 0
    assert game["outcome"] != [0, 0] or game["length"] == state["world"]["max_steps"]  # a draw: the time cap


@pytest.mark.parametrize("name", ["c4", "ttt"])
def test_board_description_is_the_world_s_own(models, tmp_path, name):
    """The board the page draws and the cell each of its clicks takes: the world's shape, and where a first move
    lands on the world's own empty board (a column's bottom cell, or the cell row by row)."""
    session = Session(load_model(models[name]), Args(record=str(tmp_path / "games.jsonl")))
    env, world = session.env, session.state()["world"]
    assert (world["rows"], world["columns"]) == env.board_shape and world["seconds_per_step"] == env.seconds_per_step
    assert world["move"] == {"c4": "column", "ttt": "cell"}[name]
    for action in range(env.num_actions):
        side = session.new(side=0)["side"]  # the person moves first
        board = np.array(session.move(action)["board"])
        cell = (world["rows"] - 1, action) if world["move"] == "column" else divmod(action, world["columns"])
        assert np.argwhere(board == side).tolist() == [list(cell)], action


def test_lane_description_is_the_world_s_own(models, tmp_path):
    """The lane world's map as the page draws it: the world's step time, map size, unit kinds and ancient slot."""
    session = Session(load_model(models["lane"]), Args(record=str(tmp_path / "games.jsonl")))
    world, lane = session.state()["world"], session.new(mode="watch", side=1)["lane"]
    env = session.game["env"]  # the game's own world
    assert world["seconds_per_step"] == env.seconds_per_step and world["max_steps"] == moba.MAX_STEPS
    assert world["map_size"] == moba.MAP_SIZE and world["fountain_radius"] ** 2 == moba.FOUNTAIN_RADIUS2
    assert all(0 < u[2] < world["map_size"] and 0 < u[3] < world["map_size"] for u in lane["units"])
    kinds = world["kinds"]  # the world's unit slots: heroes, buildings, creeps
    assert (env.kind[: env.num_heroes] == kinds["hero"]).all() and (env.kind[env.creeps] == kinds["creep"]).all()
    assert env.kind[world["ancient"]] == kinds["building"] and env.max_hp[0, 0, world["ancient"]] == moba.ANCIENT_HP


def test_record_is_appended_and_survives_a_cut_line(models, tmp_path):
    record = tmp_path / "games.jsonl"
    kept = '{"env_id": "TicTacToe-v1", "players": ["person", "ttt"], "outcome": [1.0, -1.0]}'
    record.write_text(kept + '\n{"env_id": "Tic')  # a line cut short by a crash
    session = Session(load_model(models["ttt"]), Args(record=str(record)))
    state = session.new(side=0, greedy=True)
    while not state["over"]:
        state = session.move(int(np.flatnonzero(state["legal"])[0]))
    lines = record.read_text().splitlines()
    assert len(lines) == 3 and lines[0] == kept and lines[1] == '{"env_id": "Tic'
    assert json.loads(lines[2])["greedy"] is True


def test_person_rating_on_the_reference_scale(models, tmp_path):
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["ttt"]), Args(record=str(record), games=4))
    session.rate_in_background()
    deadline = time.time() + 60
    while session.ladder is None and time.time() < deadline:
        time.sleep(0.1)
    assert session.ladder["random"] == 0 and session.rating is None  # no game of the person yet
    for _ in range(3):
        state = session.new(side=0)
        while not state["over"]:
            state = session.move(int(np.flatnonzero(state["legal"])[0]))
    assert session.rating is not None and session.rating["sigma"] < 25 / 3
    assert session.state()["rating"] == session.rating


def test_league_table(models, tmp_path):
    record = tmp_path / "games.jsonl"
    people = {"env_id": "ConnectFour-v1", "players": ["ann", "c4_seed1"], "people": ["ann"], "outcome": [1.0, -1.0]}
    record.write_text(json.dumps(people) + "\n" + json.dumps(people | {"env_id": "TicTacToe-v1"}) + "\n")
    out = tmp_path / "league"
    table = league(Args(league=(models["c4"], models["c4b"]), games=4, record=str(record), out=str(out)))
    rows = {r["name"]: r for r in table["ratings"]}
    assert set(rows) == {"random", "greedy", "lookahead", "c4_seed1", "c4_seed2", "ann"} | set(
        make_team_env("ConnectFour-v1", 1, 0).bot_names
    )
    assert rows["random"]["mu"] == 0 and rows["ann"]["kind"] == "person" and rows["ann"]["games"] == 1
    assert rows["c4_seed1"]["games"] == 4 * (len(rows) - 2) + 1  # every other party but the person, and the person
    assert json.loads((tmp_path / "league.json").read_text()) == table
    md = (tmp_path / "league.md").read_text()
    assert md.count("\n") == len(rows) + 2 and "| c4_seed2 | model |" in md


def one_line_exit_2(call, capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        call()
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    return err


def test_bad_model_one_line_exit_2(tmp_path, capsys):
    assert "No such file" in one_line_exit_2(lambda: load_model(str(tmp_path / "nothing.cleanfive_model")), capsys)
    other = tmp_path / "other.pt"
    torch.save({"script": "five_surgery.py", "args": {}, "model": {}}, other)
    assert "written by five_surgery.py" in one_line_exit_2(lambda: load_model(str(other)), capsys)
    torch.save({"script": "ppo_lstm_selfplay.py", "args": {"env_id": "Pong-v5", "num_heroes": 1}, "model": {}}, other)
    assert "Pong-v5" in one_line_exit_2(lambda: load_model(str(other)), capsys)  # a world the script does not know
    torch.save({"script": "ppo_lstm_selfplay.py", "args": {}, "model": RunsCode(tmp_path / "code_ran")}, other)
    assert "convert_saved.py" in one_line_exit_2(lambda: load_model(str(other)), capsys)
    assert not (tmp_path / "code_ran").exists()  # refused before anything in the file ran


def test_port_in_use_one_line_exit_2(models, tmp_path, capsys):
    session = Session(load_model(models["ttt"]), Args(record=str(tmp_path / "games.jsonl")))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert "is in use" in one_line_exit_2(lambda: serve(session, "127.0.0.1", busy.getsockname()[1]), capsys)


def test_league_of_two_worlds_one_line_exit_2(models, tmp_path, capsys):
    two = Args(league=(models["c4"], models["ttt"]), out=str(tmp_path / "league"))
    assert "different worlds" in one_line_exit_2(lambda: league(two), capsys)


def test_server_survives_bad_and_dropped_requests(models, tmp_path):
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["ttt"]), Args(record=str(record)))
    server = serve(session, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"

    def post(path, body):
        request = urllib.request.Request(url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
        return json.loads(urllib.request.urlopen(request, timeout=10).read())

    try:
        state = post("/api/new", {"side": 0})
        with socket.create_connection(("127.0.0.1", server.server_port)) as dropped:  # a tab closed mid-request
            head = "POST /api/move HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            dropped.sendall(head.encode() + b'Content-Length: 100\r\n\r\n{"act')
        with pytest.raises(urllib.error.HTTPError) as bad:
            post("/api/move", {"column": 3})
        assert bad.value.code == 400
        while not state["over"]:
            state = post("/api/move", {"action": int(np.flatnonzero(state["legal"])[0])})
        assert len(records(record)) == 1
        assert "<canvas" in urllib.request.urlopen(url + "/", timeout=10).read().decode()
    finally:
        server.shutdown()


# ---- the server answers only its user: its own names, its own page, the page's kind of request
@pytest.fixture
def live(models, tmp_path):
    """A TicTacToe arena on a free port in this process (no rating: its state changes only by requests)."""
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["ttt"]), Args(record=str(record)))
    server = serve(session, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_port, record
    server.shutdown()
    server.server_close()


SAFE = {  # what every answer carries: no other site frames the page, sniffs a type, caches a game or reads a referrer
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
    "referrer-policy": "no-referrer",
    "cross-origin-resource-policy": "same-origin",
}


def exchange(port, request: bytes, address="127.0.0.1") -> tuple[int, dict, bytes]:
    """Send ``request`` as it is; the answer's status, headers (names in lower case) and body. Every answer has a
    status line and the headers SAFE, a Content-Security-Policy that no page may frame, and a Server header without
    the Python version."""
    with socket.create_connection((address, port), timeout=5) as s:
        s.sendall(request)
        with contextlib.suppress(OSError):  # (the server may have answered a bad request and closed already)
            s.shutdown(socket.SHUT_WR)  # a body shorter than its Content-Length ends here
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    assert re.fullmatch(r"HTTP/1\.[01] [1-5][0-9][0-9] .*", status), reply[:300]
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    assert {k: headers.get(k) for k in SAFE} == SAFE, headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"], headers
    assert headers["server"] == "cleanfive-arena", headers
    return int(status.split()[1]), headers, body


def ask(port, method="GET", path="/api/state", body=None, headers=(), address="127.0.0.1") -> tuple[int, bytes]:
    """One raw request, (status, body) of its answer. Host, and with a body Content-Type and Content-Length, are the
    page's unless ``headers`` says otherwise (None: left out; a list: the header repeated)."""
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    host = f"[{address}]" if ":" in address else address
    fields = {"Host": f"{host}:{port}"}
    fields |= {"Content-Type": "application/json", "Content-Length": str(len(raw))} if body is not None else {}
    fields |= dict(headers)
    lines = [f"{k}: {v}\r\n" for k, vs in fields.items() if vs is not None for v in (vs if type(vs) is list else [vs])]
    request = f"{method} {path} HTTP/1.1\r\n{''.join(lines)}\r\n".encode("latin-1") + raw
    code, _, answer = exchange(port, request, address)
    return code, answer


def game_state(port) -> dict:
    code, body = ask(port)
    assert code == 200, body
    return json.loads(body)


def test_server_answers_only_its_own_names_and_page(live, models, tmp_path):
    port, record = live
    assert ask(port, "POST", "/api/new", {"side": 0})[0] == 200
    before = game_state(port)
    foreign = ["evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", "localhost.", "[::2]", "", None]
    for host in [*foreign, [f"127.0.0.1:{port}", "evil.example"]]:  # a DNS-rebinding page sends its own name
        code, body = ask(port, headers={"Host": host})
        assert code == 403 and "answers only to" in json.loads(body)["error"], host
    for host in (f"localhost:{port}", "LOCALHOST", f"[::1]:{port}", "::1", "127.0.0.1"):
        assert ask(port, headers={"Host": host})[0] == 200, host
    for origin in ("http://evil.example", f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}", "null"):
        code, body = ask(port, "POST", "/api/move", {"action": 4}, {"Origin": origin})
        assert code == 403 and "own page" in json.loads(body)["error"], origin
    assert game_state(port) == before and not record.exists()
    code, body = ask(port, "POST", "/api/move", {"action": 4}, {"Origin": f"http://localhost:{port}"})
    assert code == 200 and json.loads(body)["moves"][0] == 4
    session = Session(load_model(models["ttt"]), Args(record=str(tmp_path / "other.jsonl")))
    other = serve(session, "127.0.0.2", 0)  # --host: one more name it answers to
    threading.Thread(target=other.serve_forever, args=(0.05,), daemon=True).start()
    try:
        assert ask(other.server_port, headers={"Host": f"127.0.0.2:{other.server_port}"}, address="127.0.0.2")[0] == 200
    finally:
        other.shutdown()
        other.server_close()


def test_the_api_table_names_each_call_s_arguments():
    """arena.CALLS spells out what each POST's body holds: the Session method's arguments, those without a default
    needed, the others optional."""
    import inspect

    for name, needed, optional in arena.CALLS.values():
        params = inspect.signature(getattr(Session, name)).parameters
        params = {k: p for k, p in params.items() if k != "self"}
        assert set(needed) == {k for k, p in params.items() if p.default is p.empty}, name
        assert set(optional) == {k for k, p in params.items() if p.default is not p.empty}, name


def test_server_refuses_other_kinds_of_request_and_bad_values(live):
    port, record = live
    ask(port, "POST", "/api/new", {"side": 0})
    before = json.loads(ask(port, "POST", "/api/move", {"action": 4})[1])
    refused = [  # what a cross-site form or no-cors fetch can send (no CORS preflight), and bodies not read
        *[(415, {"Content-Type": kind}) for kind in ("text/plain", None, "application/x-www-form-urlencoded")],
        (415, {"Content-Type": "multipart/form-data; boundary=x"}),
        (411, {"Content-Length": None}),
        (411, {"Transfer-Encoding": "chunked"}),
        (413, {"Content-Length": str(MAX_BODY + 1)}),
        (413, {"Content-Length": "9" * 30}),
        *[(400, {"Content-Length": size}) for size in ("-1", "1e3", "abc", ["13", "13"])],
    ]
    for code, headers in refused:
        got, body = ask(port, "POST", "/api/move", {"action": 0}, headers)
        assert got == code and json.loads(body)["error"], headers
    assert ask(port, "POST", "/api/move", b"x" * (MAX_BODY + 1))[0] == 413
    for body in (b"", b"{", b"\xff{}", b"[0]", b'"x"', b"3", b"null", b"[" * 3000):
        assert ask(port, "POST", "/api/move", body)[0] == 400, body[:10]
    new = [{"side": 0.0}, {"side": True}, {"side": 1.5}, {"side": 2}, {"side": "0"}, {"greedy": 1}, {"mode": 3}]
    new += [{"opponent": ["agent"]}, {"opponent": "nobody"}, {"side": 0, "x": 1}]
    move = [{"action": a} for a in (1e30, 1.5, True, -1, 9, 10**30, None, "3", [3])]
    move += [{}, {"column": 3}, {"action": 0, "self": 1}]
    for path, body in [*[("/api/new", b) for b in new], *[("/api/move", b) for b in move]]:
        code, reply = ask(port, "POST", path, body)
        assert code == 400 and json.loads(reply)["error"], (path, body)
    assert ask(port, "POST", "/api/tick", {"action": 0})[0] == 409  # no lane game here
    for method, path, code in [("GET", "/x", 404), ("GET", "/api/move", 404), ("POST", "/api/state", 404)]:
        assert ask(port, method, path, {} if method == "POST" else None)[0] == code
    for method in ("PUT", "DELETE", "OPTIONS", "HEAD"):  # no CORS preflight is ever answered
        assert ask(port, method, "/api/move")[0] == 501
    assert game_state(port) == before and not record.exists()
    legal = int(np.flatnonzero(before["legal"])[0])  # the game goes on
    code, body = ask(port, "POST", "/api/move", {"action": legal}, {"Content-Type": "application/json; charset=utf-8"})
    assert code == 200 and json.loads(body)["moves"][: len(before["moves"]) + 1] == [*before["moves"], legal]


def test_a_failure_midway_leaves_the_game_and_the_record(live, monkeypatch):
    port, record = live

    def full_disk(path, game):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(arena, "append_record", full_disk)
    now = json.loads(ask(port, "POST", "/api/new", {"side": 0})[1])
    code = 200
    while code == 200:  # to the move that ends the game, whose record cannot be written
        before = now
        code, body = ask(port, "POST", "/api/move", {"action": int(np.flatnonzero(before["legal"])[0])})
        now = json.loads(body)
    assert code == 500 and "No space left" in now["error"]
    assert game_state(port) == before and not before["over"] and not record.exists()
    monkeypatch.undo()
    action = int(np.flatnonzero(before["legal"])[0])  # the same move again: the game goes on from where it was
    code, body = ask(port, "POST", "/api/move", {"action": action})
    now = json.loads(body)
    assert code == 200 and now["moves"][: len(before["moves"]) + 1] == [*before["moves"], action]
    board, earlier = np.array(now["board"]), np.array(before["board"])
    assert (board[earlier >= 0] == earlier[earlier >= 0]).all() and (board >= 0).sum() == len(now["moves"])
    while not now["over"]:
        now = json.loads(ask(port, "POST", "/api/move", {"action": int(np.flatnonzero(now["legal"])[0])})[1])
    (game,) = records(record)
    assert game["moves"] == now["moves"] and game_state(port)["result"] == now["result"]


def test_a_failure_midway_puts_the_lane_world_back(models, tmp_path, monkeypatch):
    """The lane world's last tick cannot be written: the world, the agents' LSTM states and their sampling go back,
    so the same tick again ends the game the same way."""
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["lane"]), Args(record=str(record)))
    monkeypatch.setattr(arena, "append_record", lambda path, game: (_ for _ in ()).throw(OSError(28, "disk full")))
    state = session.new(mode="watch", opponent="lasthit")
    with pytest.raises(OSError):
        while True:
            before = state
            with session.undo_on_failure():
                state = session.tick()
    assert session.state() == before and not record.exists()
    monkeypatch.undo()
    with session.undo_on_failure():
        state = session.tick()
    (game,) = records(record)
    assert state["over"] and state["t"] == before["t"] + 1 == game["length"]


def test_server_fuzz_every_request_answered(live):
    """Seeded random requests (methods, paths, headers, bodies) with a valid game's steps against the agent and the
    bots, and replays, among them: each is answered with a status line and headers that no page may frame (a JSON
    error when refused, never 500), the server goes on, the record stays JSON and its games replay."""
    port, record = live
    rng = random.Random(48)
    keys = ["side", "action", "mode", "opponent", "greedy", "moves", "x"]

    def value(depth=0):
        kinds = [
            lambda: rng.randint(-3, 10) * 10 ** rng.choice([0, 0, 30]),
            lambda: rng.uniform(-2, 10),
            lambda: rng.random() < 0.5,
            lambda: None,
            lambda: rng.choice(["play", "watch", "agent", "random", "search2", "push", "", "é", "5", "1212121", "0"]),
            lambda: [value(depth + 1) for _ in range(rng.randrange(4))],
            lambda: {rng.choice(keys): value(depth + 1) for _ in range(rng.randrange(4))},
        ]
        return rng.choice(kinds if depth < 3 else kinds[:5])()

    def body():
        return rng.choice(
            [
                lambda: json.dumps({rng.choice(keys): value() for _ in range(rng.randrange(4))}).encode(),
                lambda: json.dumps(value()).encode(),
                lambda: rng.randbytes(rng.choice([0, 1, 30, 300, MAX_BODY, MAX_BODY + 1, 6000])),
                lambda: b"[" * rng.randrange(1, 3000),
            ]
        )()

    methods = ["GET", "POST", "POST", "POST", "PUT", "DELETE", "HEAD", "OPTIONS"]
    paths = ["/", "/api/state", "/api/new", "/api/move", "/api/tick", "/api/replay", "/api/games", "/../x", "*", "/a b"]
    paths += ["/api/move?x=1", "/" * 3000]
    for i in range(300):
        if i % 8 == 0:  # a valid step of a game, between the fuzz's requests
            now = game_state(port)
            playing = now.get("board") is not None and not now["over"]
            path = "/api/move" if playing else "/api/new"
            opponent = rng.choice(["agent", "random", "search1"])
            args = {"action": int(rng.choice(np.flatnonzero(now["legal"])))} if playing else {"side": rng.randrange(2)}
            args |= {} if playing else {"opponent": opponent}
            code, reply = ask(port, "POST", path, args)
            assert code == 200, reply
            continue
        raw, method, path = body(), rng.choice(methods), rng.choice(paths)
        headers = {
            "Host": rng.choice([f"127.0.0.1:{port}", "localhost", f"[::1]:{port}", "evil.example", "", None]),
            "Content-Type": rng.choice(["application/json", "application/json; charset=utf-8", "text/plain", None]),
            "Content-Length": rng.choice(
                [str(len(raw)), str(len(raw)), None, "-5", "x", "9" * 25, str(len(raw) + 7), [str(len(raw))] * 2]
            ),
            "Origin": rng.choice([None, None, f"http://127.0.0.1:{port}", "http://evil.example", "null"]),
        }
        code, reply = ask(port, method, path, raw, headers)
        assert code != 500, (method, path, headers, raw[:100], reply)
        if code >= 400:
            assert json.loads(reply)["error"], (code, reply)
    game_state(port)
    lines = record.read_text().splitlines()
    assert lines and all(isinstance(json.loads(line), dict) for line in lines)
    for game in records(record):
        code, body = ask(port, "POST", "/api/replay", {"moves": "".join(arena.SHARE[a] for a in game["moves"])})
        assert code == 200 and json.loads(body)["moves"] == game["moves"]
    code, body = ask(port, "GET", "/api/games")
    assert code == 200 and json.loads(body) == records(record)[::-1]


def test_every_answer_carries_the_page_s_policy(live):
    """The page's Content-Security-Policy allows its own inline script and style (by their SHA-256) and requests to
    this server, nothing else: no frame around it, no other script, no style attribute, no form."""
    port, _ = live
    code, headers, page = exchange(port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    policy = dict(rule.strip().split(" ", 1) for rule in headers["content-security-policy"].split(";"))
    html = page.decode()
    for tag in ("script", "style"):
        inline = re.search(rf"<{tag}>(.*?)</{tag}>", html, re.S)[1]
        assert policy[f"{tag}-src"] == f"'sha256-{base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()}'"
    assert policy["default-src"] == policy["frame-ancestors"] == policy["form-action"] == "'none'"
    assert policy["connect-src"] == "'self'" and code == 200 and html.count("<script") == 1
    assert not re.search(r"\sstyle=|\son[a-z]+=|innerHTML|insertAdjacentHTML|document\.write", html)  # text as text


def test_garbage_request_lines_get_a_status_line(live):
    port, _ = live
    for line in (b"garbage", b"GET /", b"\x00\xff\xfe", b"GET / HTTP/9.9", b"G E T / HTTP/1.1", b"GET /api/state HTTP"):
        code, _, body = exchange(port, line + b"\r\n\r\n")  # (HTTP/0.9's "GET /" names no Host)
        assert 400 <= code < 600 and code != 500 and json.loads(body)["error"], line
    assert game_state(port)["board_game"]


def test_the_opponent_is_the_game_s_and_the_record_s(models, tmp_path):
    """A board game is played against the opponent chosen, among the agent, the world's bots and the levels, and
    the record names it; an opponent, or a mode, the game does not have is refused and changes nothing."""
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["c4"]), Args(record=str(record)), (load_model(models["c4b"]),))
    choices = [k for k, _ in session.state()["opponents"]]
    assert choices == ["agent", *make_team_env("ConnectFour-v1", 1, 0).bot_names, "c4_seed2"]
    started = session.new(side=0)
    for bad in [dict(opponent="push"), dict(opponent="c4_seed1"), dict(opponent=""), dict(mode="watch")]:
        with pytest.raises(arena.Refused):
            session.new(**bad)
        assert session.state() == started, bad
    rng = np.random.default_rng(1)
    for opponent, label in [("random", "random"), ("c4_seed2", "c4_seed2"), ("agent", "c4_seed1")]:
        state = session.new(side=1, opponent=opponent)
        while not state["over"]:
            assert (state["probs"] is None) == (opponent == "random")  # a bot's move has no probabilities
            state = session.move(int(rng.choice(np.flatnonzero(state["legal"]))))
        assert records(record)[-1]["players"] == ["person", label] and state["result"].endswith(f"against {label}")
        assert records(record)[-1]["first"] == 1  # the person moved second


def test_replay_shows_the_agent_s_decisions(models, tmp_path):
    """A recorded game as one line replays move by move: the same boards, and at the agent's moves the
    probabilities it gave them in the game; a line that is not a game of this board is refused."""
    record = tmp_path / "games.jsonl"
    session = Session(load_model(models["c4"]), Args(record=str(record)))
    state, rng, decisions = session.new(side=1), np.random.default_rng(2), {}
    while True:
        decisions[len(state["moves"]) - 1] = state["probs"]  # the agent's last move, and its probabilities
        if state["over"]:
            break
        state = session.move(int(rng.choice(np.flatnonzero(state["legal"]))))
    (game,) = records(record)
    decisions = {i: p for i, p in decisions.items() if i % 2 == 0}  # the agent moved first
    line = "".join(arena.SHARE[a] for a in game["moves"])
    replay = session.replay(line)
    assert replay["moves"] == game["moves"] and replay["over"] and replay["cells"] == state["cells"]
    assert all(replay["frames"][i]["probs"] == p for i, p in decisions.items()) and decisions
    board = np.array(state["board"])
    assert replay["frames"][-1]["board"] == np.where(board < 0, -1, board ^ state["first"]).tolist()
    assert [(np.array(f["board"]) >= 0).sum() for f in replay["frames"]] == list(range(1, len(line) + 1))
    assert replay["outcome"] == game["outcome"][game["first"]]  # the first mover's
    for bad in ["", "0", "8", "1111111", line + "1", "4" * 43, "4 ", 44, None]:
        with pytest.raises(arena.Refused):
            session.replay(bad)


def test_value_reads_as_an_expected_result():
    rng = np.random.default_rng(0)
    v = rng.normal(0, 2, 4000)
    score = (rng.random(4000) < 1 / (1 + np.exp(-(1.5 * v - 0.5)))).astype(float)
    fit = arena.fit_expected(list(zip(v, score, strict=True)))
    assert fit == pytest.approx((1.5, -0.5), abs=0.15)
    results = [arena.expected_result(x, fit) for x in (-9, -1, 0, 1, 9)]
    assert results == sorted(results) and -1 <= results[0] < -0.99 and 0.99 < results[-1] <= 1
    apart = arena.fit_expected([(-1.0, 0.0), (1.0, 1.0)] * 20)  # values that separate wins from losses
    assert np.isfinite(apart).all()
    assert arena.expected_result(1.0, apart) > 0.9 > -0.9 > arena.expected_result(-1.0, apart)
    assert arena.expected_result(1.0, None) is None


@pytest.mark.parametrize("env_id", ["ConnectFour-v1", "TicTacToe-v1"])
def test_winning_cells_are_the_winning_line(env_id):
    k = {"ConnectFour-v1": 4, "TicTacToe-v1": 3}[env_id]
    rng = np.random.default_rng(0)
    for _ in range(300):
        board = rng.choice([-1, -1, 0, 1], size=make_team_env(env_id, 1, 0).board_shape)
        cells = arena.winning_cells(board, k)
        assert bool(cells) == bool(has_won(board, 0, env_id) | has_won(board, 1, env_id))
        for side in (0, 1):  # the cells of one side are k in a row: taking them away leaves no line of it
            own = [c for c in cells if board[tuple(c)] == side]
            rest = board.copy()
            rest[tuple(np.array(own).T)] = -1 if own else rest[tuple(np.array(own).T)]
            assert not has_won(rest, side, env_id)
    board = np.full((6, 7), -1)
    board[5, 1:5], board[4, :2] = 0, 1
    assert arena.winning_cells(board, 4) == [[5, 1], [5, 2], [5, 3], [5, 4]]


# ---- the page in headless Chromium (Debian's chromium and chromium-driver; no browser is downloaded)
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
except ImportError:
    webdriver = None
missing = [
    name for name, found in [("chromium", CHROMIUM), ("chromedriver", DRIVER), ("selenium", webdriver)] if not found
]
needs_browser = needs(
    f"{MISSING}{', '.join(missing)} (.ci/run installs Debian's chromium and chromium-driver)" if missing else None
)
SHOTS = os.environ.get("ARENA_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the module's browser tests (each opens its own page)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=900,760"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def arena_server(tmp_path):
    """The real command on a free port: yields (start(model) -> url, record path)."""
    procs = []

    def start(model, *more):  # None: no model given; more: more flags
        record = str(tmp_path / "games.jsonl")
        flags = [*([model] if model else []), "--games", "2", "--record", record, *more]
        proc = subprocess.Popen([*ARENA, *flags], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        line = proc.stdout.readline()
        assert line.startswith("arena: "), line
        return line.split(" on ")[-1].strip()

    yield start, tmp_path / "games.jsonl"
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def test_bundled_model_ipv6_and_levels_from_the_command_line(models, arena_server, capsys):
    """With no model given the bundled Connect Four model is served; --host ::1 serves on IPv6 and prints its address
    in brackets; --levels adds models as opponents; a level of another world, or of an opponent's name, is one line
    and exit code 2."""
    start, _ = arena_server
    url = start(None, "--host", "::1", "--levels", models["c4b"])
    assert url.startswith("http://[::1]:")
    state = json.loads(ask(int(url.rstrip("/").rsplit(":", 1)[1]), address="::1")[1])
    assert state["env_id"] == "ConnectFour-v1" and state["model"] == "connect4"
    assert state["opponents"][0] == ["agent", "connect4"] and state["opponents"][-1] == ["c4_seed2", "c4_seed2"]
    other = Args(model=models["c4"], levels=(models["ttt"],))
    assert "TicTacToe-v1" in one_line_exit_2(lambda: arena.open_session(other), capsys)
    same = Args(model=models["c4"], levels=(models["c4"],))
    assert "one name" in one_line_exit_2(lambda: arena.open_session(same), capsys)


def test_the_bundled_model_comes_with_earlier_checkpoints_of_its_run_as_levels():
    """With no model given, the opponents are the bundled model, the ladder's bots and three earlier checkpoints of
    the bundled model's own run (cleanfive/models/connect4_levels/README.md: the run played again, its evaluations
    equal to the kept run's), each a small plain-data file of that run's arguments; a model given has no levels."""
    assert len(arena.DEFAULT_LEVELS) == 3
    session = arena.open_session(Args())
    labels = [label for _, label in session.opponents.values()]
    assert labels[:8] == ["connect4", *session.references] and len(labels) == 11
    bundled = torch.load(arena.DEFAULT_MODEL, weights_only=True)["args"]
    steps = []
    for path in arena.DEFAULT_LEVELS:
        saved = torch.load(path, weights_only=True)
        assert set(saved) - {"converted_from"} == {"script", "args", "model"} and Path(path).stat().st_size < 2 * 2**20
        differ = {k for k in bundled if saved["args"][k] != bundled[k]}
        assert differ <= {"exp_name", "cuda"}, differ  # the run's recipe, seed and budget: the same run
        steps.append(int(Path(path).stem.split("@")[1]))
    assert steps == sorted(steps) and steps[-1] < bundled["total_timesteps"]
    assert len(arena.open_session(Args(model=str(arena.DEFAULT_MODEL))).opponents) == 8


def wait_for(driver, condition, timeout=20.0, what="state"):
    """The page's `window.arena.<what>` (its game state, or its replay) once no request is pending and it meets
    `condition`."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = driver.execute_script(f"return window.arena.busy ? null : window.arena.{what}")
        if value and condition(value):
            return value
        time.sleep(0.05)
    raise AssertionError(f"the page did not reach the expected {what}")


@needs_browser
def test_browser_lane_ticks_with_keys(models, browser, arena_server):
    start, record = arena_server
    browser.get(start(models["lane"]))
    wait_for(browser, lambda s: not s["board_game"])
    browser.find_element(By.ID, "start").click()
    state = wait_for(browser, lambda s: s.get("t", 0) >= 2)
    x0 = hero(state)[2]
    ActionChains(browser).key_down("d").perform()  # move_E, held for a few ticks
    state = wait_for(browser, lambda s: s["moves"].count(1) >= 4)
    ActionChains(browser).key_up("d").key_down("w").perform()
    state = wait_for(browser, lambda s: s["moves"][-1] == 3)  # move_N
    # the legend shows the key held (read in one call: the legend is drawn again at each tick, which leaves an element
    # found in one call stale in the next)
    assert "W A S D" in browser.execute_script("return document.querySelector('#keys td.held').innerText")
    state, status = browser.execute_script("return [window.arena.state, document.getElementById('status').textContent]")
    seconds = state["world"]["seconds_per_step"]  # the game clock as the world describes it
    assert status.startswith(f"{state['t'] * seconds:.1f} s of {state['world']['max_steps'] * seconds:g} ·")
    ActionChains(browser).key_up("w").perform()
    assert hero(state)[2] > x0 + 3
    if SHOTS:
        wait_for(browser, lambda s: s["t"] >= 70, timeout=60)
        browser.save_screenshot(f"{SHOTS}/arena_lane.png")
    assert records(record) == []  # no game finished


def test_the_page_holds_no_number_of_a_world():
    """arena.html takes every world's numbers from the server's `world`: no board's columns in its arithmetic, no guess
    from the action count, none of the lane world's map size, game length, step time, towers or fountain radius."""
    script = arena.PAGE.read_text().split("<script>", 1)[1]
    patterns = [r"S\.actions\b", r"\bkind\s*===?\s*\d"]
    for env_id in ("ConnectFour-v1", "TicTacToe-v1"):
        env = make_team_env(env_id, 1, 0)
        world = describe_world(env)
        patterns += [rf"[%/*]\s*{world['columns']}\b(?!\.)", rf"===?\s*{env.num_actions}\b"]
        patterns += [rf"[?:]\s*{n}\s*[:)]" for n in (world["rows"], world["columns"])]  # a shape as a guess's answer
    env = make_team_env("Moba5v5-v1", 1, 0, 3)
    world = describe_world(env)
    seconds, towers = world["seconds_per_step"], world["ancient"] - env.num_heroes
    patterns += [rf"\b{world['map_size']:g}\b", rf"\b{world['max_steps'] * seconds:g}\b"]
    patterns += [rf"\*\s*{re.escape(f'{seconds:g}')}\b", rf"\+\s*{towers}\b"]
    patterns += [rf"\b{world['fountain_radius']:g}\s*\*\s*k\b"]
    found = {p: m[0] for p in patterns if (m := re.search(p, script))}
    assert not found, found


class AnyBoard:
    """A stand-in board game of any shape behind the real server, described by describe_world as a world of that shape
    would be: the person's stone lands where the kind of move puts it, the agent answers with the first legal move."""

    def __init__(self, rows: int, columns: int, move: str):
        actions = columns if move == "column" else rows * columns
        shape = SimpleNamespace(board_shape=(rows, columns), num_actions=actions, seconds_per_step=1.0)
        self.world = describe_world(shape)
        self.lock, self.game, self.board, self.moves = threading.Lock(), None, None, []

    def legal(self) -> list[bool]:
        free = self.board < 0
        return (free.any(0) if self.world["move"] == "column" else free.ravel()).tolist()

    def undo_on_failure(self):
        return contextlib.nullcontext()

    def games(self) -> list:
        return []

    def new(self, side: int = 0, opponent: str = "agent", greedy: bool = False) -> dict:
        self.board, self.moves = np.full((self.world["rows"], self.world["columns"]), -1), []
        return self.state()

    def move(self, action: int) -> dict:
        for side, a in ((0, action), (1, self.legal().index(True))):
            column = self.world["move"] == "column"
            cell = (np.flatnonzero(self.board[:, a] < 0)[-1], a) if column else divmod(a, self.world["columns"])
            self.board[cell] = side
            self.moves.append(a)
        return self.state()

    def state(self) -> dict:
        out = dict(env_id="AnyBoard", model="stand-in", player="person", rating=None, ladder=None)
        out |= dict(board_game=True, world=self.world, opponents=[["agent", "stand-in"]])
        if self.board is None:
            return out
        legal, last = self.legal(), self.moves[-1] if self.moves else None
        out |= dict(side=0, to_move=0, moves=self.moves, board=self.board.tolist(), legal=legal, over=False)
        out["note"] = f"the stand-in's note after {len(self.moves)} moves"
        return out | dict(result=None, agent_action=last, probs=[round(1 / len(legal), 3)] * len(legal), value=0.0)


@needs_browser
def test_browser_board_of_any_shape(browser):
    """The page draws boards of shapes no world has yet from the server's description alone, and each click plays the
    action of the cell (row by row) or the column clicked. A click on a taken cell is noted, and the note goes at the
    next move, whose answer's own note (the server's) is shown."""
    for rows, columns, move in [(4, 5, "cell"), (5, 8, "column")]:
        game = AnyBoard(rows, columns, move)
        server = serve(game, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        try:
            browser.get(f"http://127.0.0.1:{server.server_port}/")
            wait_for(browser, lambda s: s["board_game"])
            browser.find_element(By.ID, "start").click()
            wait_for(browser, lambda s: s.get("board") is not None)
            canvas, cell = browser.find_element(By.ID, "canvas"), min(512 // columns, 420 // rows)
            for row, column in [(rows - 1, columns - 1), (0, columns - 2), (rows // 2, 1)]:
                moves = len(game.moves)  # the click on the canvas's cell, offsets from its centre
                x, y = (512 - columns * cell) // 2 + column * cell + cell // 2 - 256, 8 + row * cell + cell // 2 - 256
                ActionChains(browser).move_to_element_with_offset(canvas, x, y).click().perform()
                wait_for(browser, lambda s, n=moves: len(s["moves"]) > n)
                assert game.moves[moves] == (column if move == "column" else row * columns + column)
                assert browser.find_element(By.ID, "note").text == f"the stand-in's note after {moves + 2} moves"
                if move == "cell":  # the same cell again: taken
                    ActionChains(browser).move_to_element_with_offset(canvas, x, y).click().perform()
                    assert browser.find_element(By.ID, "note").text == "that cell is taken: ignored"
            assert browser.find_element(By.ID, "status").text.startswith(f"Your move: click a {move}.")
        finally:
            server.shutdown()
            server.server_close()


class QuietFiles(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def another_site(tmp_path, page: str, port: int):
    """A page of another origin (``page``, with ARENA standing for the Arena's address) served on a port of its own:
    yields its address."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text(page.replace("ARENA", f"http://127.0.0.1:{port}"))
    site = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietFiles, directory=str(tmp_path / "site")))
    threading.Thread(target=site.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{site.server_port}/index.html"
    finally:
        site.shutdown()
        site.server_close()


OTHER_SITE = """<!doctype html><title>another site in the same browser</title>
<iframe name="sink"></iframe>
<form id="form" method="POST" action="ARENA/api/move" enctype="text/plain" target="sink">
  <input name='{"action": "' value='", "action": 3}'>
</form>
<script>
  const body = JSON.stringify({ action: 3 });
  fetch("ARENA/api/move", { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body });
  document.getElementById("form").submit();
</script>"""


@needs_browser
def test_browser_another_site_cannot_play(live, browser, tmp_path, monkeypatch):
    """A page of another origin posts a move the two ways that need no CORS preflight (a no-cors fetch and a form):
    both reach the server, are refused, and the game and the record stay as they were."""
    port, record = live
    answers, send = [], arena.Handler.send
    monkeypatch.setattr(arena.Handler, "send", lambda self, code, *a: answers.append(code) or send(self, code, *a))
    assert ask(port, "POST", "/api/new", {"side": 0})[0] == 200  # the person's move: 3 would be legal
    before, answers[:] = game_state(port), []
    with another_site(tmp_path, OTHER_SITE, port) as url:
        browser.get(url)
        deadline = time.time() + 20
        while len(answers) < 2 and time.time() < deadline:
            time.sleep(0.05)
    assert answers == [403, 403]
    assert game_state(port) == before and before["moves"] == [] and not record.exists()


FRAMING_SITE = """<!doctype html><title>another site that frames the Arena</title>
<iframe id="arena" name="arena" src="ARENA/" width="900" height="700"></iframe>"""


@needs_browser
def test_browser_a_frame_cannot_click(live, browser, tmp_path, monkeypatch):
    """A page of another origin frames the Arena with a game in progress and clicks where the board's centre cell
    would be: the browser shows no Arena in the frame, and the game stays as it was."""
    port, record = live
    assert ask(port, "POST", "/api/new", {"side": 0})[0] == 200  # the person's move: the centre is legal
    before = game_state(port)
    answered, send = [], arena.Handler.send
    monkeypatch.setattr(arena.Handler, "send", lambda self, code, *a: answered.append(code) or send(self, code, *a))
    with another_site(tmp_path, FRAMING_SITE, port) as url, contextlib.ExitStack() as leave:
        leave.callback(browser.switch_to.default_content)
        browser.get(url)
        frame = browser.find_element(By.ID, "arena")
        deadline = time.time() + 20
        while not answered and time.time() < deadline:  # the page is sent to the frame, which the browser refuses
            time.sleep(0.05)
        time.sleep(0.3)
        for dx, dy in [(-176, -72), (-176, -142), (-100, -72)]:  # the centre cell of a page in the frame, and near it
            ActionChains(browser).move_to_element_with_offset(frame, dx, dy).click().perform()
        browser.switch_to.frame(frame)
        assert browser.find_elements(By.ID, "canvas") == []  # nothing of the Arena is drawn in the frame
    assert game_state(port) == before and not record.exists()


def scrolls_sideways(driver, width: int) -> bool:
    """Whether the page, drawn in a window ``width`` CSS pixels wide, is wider than the window."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride", {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False}
    )
    time.sleep(0.3)
    return driver.execute_script(
        "const e = document.documentElement; return e.scrollWidth > e.clientWidth"
        " || [...document.querySelectorAll('header *, aside *, #play *')].some((n) => n.getBoundingClientRect().right"
        " > e.clientWidth + 0.5)"
    )


@needs_browser
def test_browser_level_record_replay_and_fit(models, browser, arena_server):
    """A person named with HTML and 70 characters picks the `random` level on a run of a 100-character name and
    plays a whole game by clicks, each on the column it plays: the record names `random`, the result line is coloured
    by who won, the game is listed first and replays move by move, its shared line opens it again, names are text,
    and the page fits 360, 640 and 1440 px."""
    start, record = arena_server
    player = "<i>&amp;</i> " + "a person with a name of seventy characters"[:57]
    browser.get(start(models["long"], "--player", player))
    wait_for(browser, lambda s: s["board_game"] and s["opponents"])
    Select(browser.find_element(By.ID, "opponent")).select_by_value("random")
    browser.find_element(By.ID, "start").click()
    state = wait_for(browser, lambda s: s.get("board") is not None)
    canvas, cell, rng = browser.find_element(By.ID, "canvas"), 512 // 7, np.random.default_rng(3)
    while not state["over"]:
        column, moves = int(rng.choice(np.flatnonzero(state["legal"]))), len(state["moves"])
        x = (512 - 7 * cell) // 2 + column * cell + cell // 2 - 256
        ActionChains(browser).move_to_element_with_offset(canvas, x, -150).click().perform()
        state = wait_for(browser, lambda s, n=moves: len(s["moves"]) > n)
        assert state["moves"][moves] == column
    (game,) = records(record)
    assert game["players"] == [player, "random"] and game["moves"] == state["moves"]
    result = browser.find_element(By.ID, "result")
    assert result.text == state["result"] and result.get_attribute("class") == (
        "win" if game["outcome"][0] > 0 else "loss" if game["outcome"][0] < 0 else "draw"
    )
    assert result.rect["y"] >= canvas.rect["y"] + canvas.rect["height"]  # beside the board, never over it
    assert len(state["cells"]) >= 4 if game["outcome"][0] else state["cells"] == []  # the winning line is marked:
    drawn = min(512 // 7, 420 // 6)  # a green dot at the centre of each of its stones
    centres = [((512 - 7 * drawn) // 2 + (c + 0.5) * drawn, 8 + (r + 0.5) * drawn) for r, c in state["cells"]]
    pixel = "return [...document.getElementById('canvas').getContext('2d').getImageData(...arguments, 1, 1).data]"
    assert all(browser.execute_script(pixel, x, y) == [127, 224, 127, 255] for x, y in centres)
    line = "".join(arena.SHARE[a] for a in game["moves"])
    listed = browser.find_element(By.CSS_SELECTOR, "#game-list li")
    assert player in listed.text and " against random " in listed.text
    listed.find_element(By.TAG_NAME, "button").click()
    replay = wait_for(browser, lambda r: r["at"] == len(line), what="replay")
    assert replay["data"]["moves"] == game["moves"]
    assert browser.find_element(By.ID, "share").get_attribute("value") == line
    browser.find_element(By.ID, "first-move").click()
    for at in (1, 2):
        browser.find_element(By.ID, "forward").click()
        frame = wait_for(browser, lambda r, n=at: r["at"] == n, what="replay")["data"]["frames"][at - 1]
        assert frame["move"] == game["moves"][at - 1] and (np.array(frame["board"]) >= 0).sum() == at
    browser.find_element(By.ID, "close").click()
    browser.find_element(By.ID, "open-line").send_keys(line)
    browser.find_element(By.ID, "open").click()
    assert wait_for(browser, lambda r: r["game"] is None, what="replay")["data"]["moves"] == game["moves"]
    me = wait_for_element(browser, "#ladder tr.me td", timeout=90)  # the person on the ladder, once it is rated
    assert me.text == player and browser.execute_script("return document.querySelectorAll('i').length") == 0
    assert browser.find_element(By.ID, "world").text.startswith(LONG_RUN)
    try:
        assert not any(scrolls_sideways(browser, width) for width in (360, 640, 1440))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def wait_for_element(driver, selector, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if found := driver.find_elements(By.CSS_SELECTOR, selector):
            return found[0]
        time.sleep(0.2)
    raise AssertionError(f"no {selector} on the page")
