"""A new user's first minutes, measured on a fresh clone: the README's two commands.

Clones this repository's HEAD into an empty folder, installs it as the README's first command does (``uv sync``: the
packages come from uv's cache once downloaded), then times ``uv run python cleanfive/ppo_lstm_selfplay.py`` from its
launch to its first progress line and to its first update (it is stopped there), ``--rounds`` times, each in a fresh
clone, each started when the 1-minute load is below 0.5. With ``--tests`` each round then times ``bash .ci/run`` (the
README's second command, as CI runs it) in the same clone. Prints a table with the commit, the machine and the date.

    uv run --all-extras python benchmark/fresh_clone.py --rounds 2 --tests
"""

import os
import subprocess
import tempfile
import time

import provenance as pv

PARSER = pv.parser(__file__, __doc__, extra=False)
PARSER.add_argument("--rounds", type=int, default=2, help="fresh clones timed to the main job's first update")
PARSER.add_argument("--tests", action="store_true", help="also time bash .ci/run in a fresh clone")
PARSER.add_argument("--block", default="fresh_clone", help="the speed page's block to write (one per machine type)")
MAIN = ["uv", "run", "python", "cleanfive/ppo_lstm_selfplay.py"]
QUIET_LOAD = 0.5  # 1-minute load average under which a timed run starts


def idle() -> float:
    """Wait (up to 10 minutes) until the 1-minute load is below QUIET_LOAD; return the load at the start."""
    for _ in range(120):
        if os.getloadavg()[0] < QUIET_LOAD:
            break
        time.sleep(5)
    return os.getloadavg()[0]


def fresh_clone(folder: str) -> None:
    subprocess.run(["git", "clone", "--quiet", str(pv.ROOT), folder], check=True)
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}  # the clone's own environment
    subprocess.run(["uv", "sync", "--quiet"], cwd=folder, check=True, env=env)


def first_update(folder: str) -> tuple[float, float, float]:
    """Seconds from the main job's launch to its first line and to its first update; the load at the launch."""
    load, start, first_line = idle(), time.time(), None
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(MAIN, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in proc.stdout:
        first_line = first_line or time.time() - start
        if line.startswith("iteration 1/"):
            break
    seconds = time.time() - start
    proc.kill()
    proc.wait()
    pv.check(line.startswith("iteration 1/"), f"the main job ended before its first update: {line}")
    return first_line, seconds, load


def ci_run(folder: str) -> tuple[float, int, str, float]:
    """Seconds of `bash .ci/run` (CI=true, as CI runs it), its exit code, pytest's summary line, the load at start."""
    load, start = idle(), time.time()
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"} | {"CI": "true"}
    result = subprocess.run(["bash", ".ci/run"], cwd=folder, capture_output=True, text=True, env=env)
    lines = [line for line in result.stdout.splitlines() if " passed" in line or " failed" in line]
    return time.time() - start, result.returncode, (lines[-1].strip("= ") if lines else "no summary"), load


if __name__ == "__main__":
    args = PARSER.parse_args()
    code, rows = pv.code_version("."), []
    for r in range(1, args.rounds + 1):
        with tempfile.TemporaryDirectory() as folder:
            fresh_clone(folder)
            line, update, load = first_update(folder)
            rows.append(
                f"| {r} | `{' '.join(MAIN)}` | first line {line:.1f} s, first update {update:.1f} s | {load:.2f} |"
            )
            if args.tests:  # then the README's second command in the same clone, as a new user runs them
                seconds, rc, summary, load = ci_run(folder)
                minutes = f"{int(seconds // 60)}:{int(seconds % 60):02d}"
                rows.append(f"| {r} | `bash .ci/run` | {minutes} (exit code {rc}; {summary}) | {load:.2f} |")
    note = " Each round in a fresh clone, after `uv sync` (the install): the main job, then (--tests) the tests."
    table = [
        *pv.header(PARSER, args, code, "", note),
        "| round | command | time from its launch | 1-minute load at start |",
    ]
    table += ["|---:|---|---|---:|", *rows]
    print("\n".join(table))
    if not args.no_docs:
        pv.write_block(pv.ROOT / "docs" / "speed.md", args.block, "\n".join(table))
