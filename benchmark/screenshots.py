"""Screenshots of the docs site as a reader sees it: builds the site (``mkdocs build --strict``) and takes, with
headless Chromium, the pages one window-height after another, so that tables that do not fit,
missing plots and walls of text show before a reader meets them. Look at them, then delete them: the images are not
kept in the repository.

Needs a Chromium (Debian's ``chromium`` package, or ``--browser``); without one it says so and exits 0, so that it can
run anywhere. Pages: the home page and the script pages unless ``--pages`` names others (``docs/<page>.md``).
``--arena`` shoots the Arena's own page instead (the docs keep those two: ``--out docs/img``): it serves the bundled
Connect Four model with a record of its own, plays one game through the page's API in which ``search2`` makes the
person's moves against the agent, waits for the ladder, and takes the page at 360 and 1440 pixels wide.
Headless Chromium neither scrolls to an anchor nor renders a window much taller than 16,000 pixels, so each view is
a copy of the page shifted up by a negative top margin.

    uv run --all-extras python benchmark/screenshots.py
    uv run --all-extras python benchmark/screenshots.py --pages research-log speed --out runs/screens
    uv run --all-extras python benchmark/screenshots.py --arena --out docs/img
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import provenance as pv

SCRIPTS = sorted(p.stem for p in (pv.ROOT / "cleanfive").glob("*.py") if p.stem not in ("__init__", "trueskill_league"))
PARSER = pv.parser(__file__, __doc__, docs=False, extra=False)
PARSER.add_argument("--pages", nargs="+", default=["index", *SCRIPTS], help="docs pages, without .md")
PARSER.add_argument("--out", type=Path, default=pv.ROOT / "runs" / "screenshots", help="folder for the PNGs")
PARSER.add_argument("--browser", default="chromium", help="a Chromium binary (name on PATH or path)")
PARSER.add_argument("--width", type=int, default=1280, help="window width in pixels")
PARSER.add_argument("--height", type=int, default=1600, help="window height in pixels (one view)")
PARSER.add_argument("--arena", action="store_true", help="the Arena's page at 360 and 1440 px: arena_<width>.png")
# Chromium draws a page once its scripts have run, with no scroll bar
HEADLESS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=5000"]
ARENA_VIEWS = {360: 900, 1440: 900}  # window width: height (at 360 px: the board, the result, the new game)


def shoot(browser: str, html: Path, offset: int, png: Path, width: int, height: int) -> bool:
    """One view of the page ``html`` from ``offset`` pixels down, after its scripts and images have loaded; whether
    it shows any of the page's text (False: past its end)."""
    from PIL import Image

    shifted = html.with_name("_screenshot.html")
    style = f"<style>body{{margin-top:-{offset}px !important}}</style></head>"
    shifted.write_text(html.read_text().replace("</head>", style, 1))
    cmd = [browser, *HEADLESS, f"--window-size={width},{height}", f"--screenshot={png}", shifted.as_uri()]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if done.returncode != 0 or not png.exists():
        sys.exit(f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
    column = Image.open(png).convert("L").crop((width // 5, 60, 4 * width // 5, height))  # the text column
    if column.getextrema()[0] < 200:
        return True
    png.unlink()
    return False


def arena_views(browser: str, out: Path) -> None:
    """The Arena's page after a game of ``search2`` (the person's moves) against the bundled model, at each width of
    ARENA_VIEWS, once the page's ladder is rated."""
    import numpy as np

    from cleanfive.envs.board import bot_actions

    with tempfile.TemporaryDirectory(prefix="arena-") as folder:
        flags = ["--record", f"{folder}/games.jsonl", "--games", "8", "--player", "search2 for the screenshot"]
        arena = [sys.executable, str(pv.ROOT / "cleanfive" / "arena.py"), *flags]
        server = subprocess.Popen(arena, stdout=subprocess.PIPE, text=True, cwd=folder)
        try:
            url = server.stdout.readline().split(" on ")[-1].strip()
            pv.check(url.startswith("http://"), f"the Arena did not start: {' '.join(arena)}")

            def call(path: str, body: dict | None = None) -> dict:
                data = None if body is None else json.dumps(body).encode()
                request = urllib.request.Request(url + path, data, {"Content-Type": "application/json"})
                return json.loads(urllib.request.urlopen(request, timeout=60).read())

            state, rng = call("api/new", {"side": 0, "opponent": "agent"}), np.random.default_rng(0)
            while not state["over"]:
                board = np.array(state["board"])[None]
                move = bot_actions("search2", board, state["side"], state["env_id"], rng)[0]
                state = call("api/move", {"action": int(move)})
            deadline = time.time() + 600
            while call("api/state")["ladder"] is None and time.time() < deadline:
                time.sleep(2)
            for width, height in ARENA_VIEWS.items():
                png = out / f"arena_{width}.png"
                cmd = [browser, *HEADLESS, f"--window-size={width},{height}", f"--screenshot={png}", url]
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
                pv.check(done.returncode == 0 and png.exists(), f"failed: {' '.join(cmd)}\n{done.stderr[-2000:]}")
                print(f"arena: {png} ({width} x {height}); the game: {state['result']}", flush=True)
        finally:
            server.terminate()
            server.wait(timeout=10)


def main() -> None:
    args = PARSER.parse_args()
    browser = shutil.which(args.browser)
    if browser is None:
        print(f"skipped: no Chromium here ({args.browser!r} is not on PATH; `apt-get install chromium`, or --browser)")
        return
    if args.arena:
        args.out.mkdir(parents=True, exist_ok=True)
        return arena_views(browser, args.out)
    for page in args.pages:
        pv.check(
            (pv.ROOT / "docs" / f"{page}.md").exists(), f"no docs/{page}.md for --pages {page}: name a page, no .md"
        )
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="site-") as site:
        mkdocs, env = Path(sys.executable).with_name("mkdocs"), os.environ | {"NO_MKDOCS_2_WARNING": "1"}
        subprocess.run([mkdocs, "build", "--strict", "--quiet", "--site-dir", site], cwd=pv.ROOT, check=True, env=env)
        for page in args.pages:
            html = Path(site) / ("index.html" if page == "index" else f"{page}/index.html")
            views = 0
            while shoot(
                browser, html, views * args.height, args.out / f"{page}_{views:02d}.png", args.width, args.height
            ):
                views += 1
            print(f"{page}: {views} views of {args.width} x {args.height} in {args.out}", flush=True)


if __name__ == "__main__":
    main()
