"""League table of Connect Four models of ppo_lstm_selfplay.py across runs and steps: `cleanfive/arena.py --league`.

Trains ``--seeds`` (at once, one torch thread each) for ``--minutes`` of wall time each with the script's defaults,
and keeps each seed's model at ``--snapshots`` evenly spaced times (its latest checkpoint then, stripped to the
``--save-model`` format: ``runs/arena_league/models/seed<S>/step<K>.cleanfive_model``, named ``seed<S>@<step>`` on
the ladder); or takes ``--models`` already saved. Then rates them all, the world's references and the people of the
arena's games record on one TrueSkill ladder (random = 0) with ``arena.py --league``, keeps the table as JSON and
Markdown in ``<results>/`` and writes it into docs/arena.md (block ``league``) unless --no-docs. ``--from-results``
writes the kept table again without playing.

    uv run --all-extras python benchmark/arena_league.py --seeds 1 2 3 --minutes 30 --snapshots 4
"""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import provenance as pv
import torch

SCRIPT = pv.ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
ARENA = pv.ROOT / "cleanfive" / "arena.py"
KEPT = pv.ROOT / "runs" / "arena_league"  # the runs and their models (not in git; the table is)
DOC = pv.ROOT / "docs" / "arena.md"
ENV_ID = "ConnectFour-v1"
PARSER = pv.parser(__file__, __doc__, extra=False, results="arena")
PARSER.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="training runs, at once")
PARSER.add_argument("--minutes", type=float, default=30.0, help="wall time of each run")
PARSER.add_argument("--snapshots", type=int, default=4, help="models kept per run, evenly spaced in time")
PARSER.add_argument("--models", nargs="+", help="rate these saved models instead of training")
PARSER.add_argument("--games", type=int, default=64, help="games per pair of parties on the ladder")
PARSER.add_argument("--record", default="runs/arena/games.jsonl", help="the arena's games record (its people)")


def next_model(cwd: Path, proc: subprocess.Popen, after: int) -> dict:
    """The run's first checkpoint past step ``after`` (written atomically: always whole), in the --save-model format
    with its step; waits for the run to write one."""
    while True:
        for path in cwd.glob("runs/*/checkpoint.pt"):
            saved = torch.load(path, map_location="cpu", weights_only=True)  # data, never code
            if saved["global_step"] > after:
                return {key: saved[key] for key in ("script", "args", "model", "global_step")}
        pv.check(proc.poll() is None, f"the run in {cwd} stopped (exit code {proc.returncode}) before its checkpoint")
        time.sleep(5)


def train(args) -> list[str]:
    """Run every seed for --minutes, keeping its latest model at each of --snapshots evenly spaced times."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = {seed: KEPT / f"seed{seed}" for seed in args.seeds}
    procs, steps, models = {}, dict.fromkeys(args.seeds, 0), []
    try:
        for seed, cwd in runs.items():
            shutil.rmtree(cwd, ignore_errors=True)
            cwd.mkdir(parents=True)
            cmd = [sys.executable, str(SCRIPT), "--env-id", ENV_ID, "--seed", str(seed), "--save-every", "10"]
            procs[seed] = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL)
        start = time.time()
        for k in range(1, args.snapshots + 1):
            time.sleep(max(0.0, start + args.minutes * 60 * k / args.snapshots - time.time()))
            for seed, cwd in runs.items():
                saved = next_model(cwd, procs[seed], steps[seed])
                steps[seed] = saved["global_step"]
                models.append(str(KEPT / "models" / f"seed{seed}" / f"step{k}.cleanfive_model"))
                Path(models[-1]).parent.mkdir(parents=True, exist_ok=True)
                torch.save(saved, models[-1])
                print(f"kept {models[-1]} (step {steps[seed]})", flush=True)
    finally:
        for proc in procs.values():
            proc.terminate()
            proc.wait()
    return models


def main() -> None:
    args = PARSER.parse_args()
    if not args.no_docs:
        pv.markers(DOC, "league")
    out = args.results / "league"
    if not args.from_results:
        models = args.models or train(args)
        cmd = [sys.executable, str(ARENA), "--league", *models, "--games", str(args.games), "--out", str(out)]
        subprocess.run([*cmd, "--record", args.record], check=True, cwd=pv.ROOT)
        code = pv.code_version(SCRIPT, ARENA, "cleanfive/envs/board.py", "cleanfive/trueskill_league.py")
        made = {"code": code, "machine": pv.machine(), "command": pv.command(PARSER, args)}
        Path(f"{out}.provenance.json").write_text(json.dumps(made) + "\n")
    pv.check(Path(f"{out}.json").exists(), f"no kept table {out}.json; run without --from-results")
    league, made = json.loads(Path(f"{out}.json").read_text()), json.loads(Path(f"{out}.provenance.json").read_text())
    source = (
        f" from the table kept in {os.path.relpath(out, pv.ROOT)}.json (commit `{made['code']}`, {made['machine']})"
    )
    note = (
        f" {league['games_per_pair']} games per pair of parties, each side in half; one TrueSkill fit over all of "
        "them (OpenAI Five's Appendix J settings), `random` pinned at 0. A model is `seed<S>@<step>`."
    )
    lines = [*pv.header(PARSER, args, None, source, note), Path(f"{out}.md").read_text().rstrip()]
    lines[2] = f"Command: `{made['command']}`{note}"  # the command that played the kept games
    print("\n".join(lines))
    if not args.no_docs:
        pv.write_block(DOC, "league", "\n".join(lines))


if __name__ == "__main__":
    main()
