"""cleanfive/arena.py: the server's game loop, the record, the league, bad input, and the page in headless Chromium.

The models are untrained agents saved in ppo_lstm_selfplay.py's --save-model format (what the arena loads). Set
ARENA_SCREENSHOTS=docs/img to have the browser tests write the docs' screenshots.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from cleanfive.arena import Args, Session, league, load_model, serve
from cleanfive.envs import moba
from cleanfive.envs.board import has_won
from cleanfive.envs.teams import make_team_env
from cleanfive.ppo_lstm_selfplay import Agent
from cleanfive.ppo_lstm_selfplay import Args as TrainArgs

ROOT = Path(__file__).resolve().parents[1]
ARENA = [sys.executable, str(ROOT / "cleanfive" / "arena.py")]


def save_model(path: Path, env_id: str, num_heroes: int | None = None, seed: int = 0, hidden: int = 16) -> str:
    """An untrained agent saved as ppo_lstm_selfplay.py --save-model saves one."""
    env = make_team_env(env_id, 1, 0, num_heroes)
    torch.manual_seed(seed)
    agent = Agent(env.obs_shape, env.num_actions, env.num_heroes, hidden)
    args = vars(TrainArgs(env_id=env_id, num_heroes=env.num_heroes, hidden_size=hidden, seed=seed))
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"script": "ppo_lstm_selfplay.py", "args": args, "model": agent.state_dict()}, path)
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    name = "ppo_lstm_selfplay.cleanfive_model"
    return {
        "c4": save_model(root / "c4_seed1" / name, "ConnectFour-v1", seed=1),
        "c4b": save_model(root / "c4_seed2" / name, "ConnectFour-v1", seed=2),
        "ttt": save_model(root / "ttt" / name, "TicTacToe-v1"),
        "lane": save_model(root / "lane" / name, "Moba5v5-v1", num_heroes=3),
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


def test_port_in_use_one_line_exit_2(models, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        flags = [models["ttt"], "--port", str(busy.getsockname()[1])]
        result = subprocess.run([*ARENA, *flags], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "is in use" in result.stderr


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
            dropped.sendall(b'POST /api/move HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"act')
        with pytest.raises(urllib.error.HTTPError) as bad:
            post("/api/move", {"column": 3})
        assert bad.value.code == 400
        while not state["over"]:
            state = post("/api/move", {"action": int(np.flatnonzero(state["legal"])[0])})
        assert len(records(record)) == 1
        assert "<canvas" in urllib.request.urlopen(url + "/", timeout=10).read().decode()
    finally:
        server.shutdown()


# ---- the page in headless Chromium (Debian's chromium and chromium-driver; no browser is downloaded)
CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
except ImportError:
    webdriver = None
no_browser = not (CHROMIUM and DRIVER and webdriver)
reason = "needs Debian's chromium and chromium-driver on PATH and selenium (the dev extra); .ci/run installs them"
SHOTS = os.environ.get("ARENA_SCREENSHOTS")


@pytest.fixture
def browser():
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

    def start(model):
        record = str(tmp_path / "games.jsonl")
        proc = subprocess.Popen(
            [*ARENA, model, "--games", "2", "--record", record], cwd=tmp_path, stdout=subprocess.PIPE, text=True
        )
        procs.append(proc)
        line = proc.stdout.readline()
        assert line.startswith("arena: "), line
        return line.split(" on ")[-1].strip()

    yield start, tmp_path / "games.jsonl"
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


def wait_for(driver, condition, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = driver.execute_script("return window.arena.busy ? null : window.arena.state")
        if state and condition(state):
            return state
        time.sleep(0.05)
    raise AssertionError("the page did not reach the expected state")


@pytest.mark.skipif(no_browser, reason=reason)
def test_browser_connect_four_game(models, browser, arena_server):
    start, record = arena_server
    browser.get(start(models["c4"]))
    wait_for(browser, lambda s: s["board_game"])
    browser.find_element(By.ID, "start").click()
    state = wait_for(browser, lambda s: s.get("board") is not None)
    canvas = browser.find_element(By.ID, "canvas")
    cell = 512 // 7
    rng = np.random.default_rng(0)
    while not state["over"]:
        column = int(rng.choice(np.flatnonzero(state["legal"])))
        moves = len(state["moves"])  # the click on the canvas's column, offsets from its centre
        x = (512 - 7 * cell) // 2 + column * cell + cell // 2 - 256
        ActionChains(browser).move_to_element_with_offset(canvas, x, -150).click().perform()
        state = wait_for(browser, lambda s, n=moves: len(s["moves"]) > n)
        assert state["moves"][moves] == column
        if SHOTS and moves == 12:
            browser.save_screenshot(f"{SHOTS}/arena_connect_four.png")
    result = browser.find_element(By.ID, "result").text
    (game,) = records(record)
    assert result == state["result"] and result.startswith("person ") and game["moves"] == state["moves"]


@pytest.mark.skipif(no_browser, reason=reason)
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
    assert "W A S D" in browser.find_element(By.CSS_SELECTOR, "#keys td.held").text  # the legend shows the key held
    ActionChains(browser).key_up("w").perform()
    assert hero(state)[2] > x0 + 3
    if SHOTS:
        wait_for(browser, lambda s: s["t"] >= 70, timeout=60)
        browser.save_screenshot(f"{SHOTS}/arena_lane.png")
    assert records(record) == []  # no game finished
