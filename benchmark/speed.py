"""Training speed of each cleanfive script against an earlier commit, side by side, and of cleanba_impala.py and
ppo_gridnet_masked.py against their peers (CleanRL, MicroRTS-Py) where those are set up.

Each case runs two commands, A and B, alternately (A, B, A, B, ...) for ``--rounds`` rounds, each run in an empty
temporary folder, for a fixed number of updates with periodic evaluations and checkpoints pushed past the end.
Speeds come from the TensorBoard events the runs write, so that old and new commits are measured alike: steps/s =
the steps between the first and the last-but-one ``charts/SPS`` event over the seconds between them (the last update
of ppo_lstm_selfplay.py holds its final evaluation); first update = seconds from the launch to the first event;
wall = the whole process.

Cases: c4 and lane (ppo_lstm_selfplay.py on Connect Four and on Moba5v5-v0), c4-ladder (Connect Four with half of
its games against lookahead, search1 and search2: the bots' share of the work), football (VMAS football, issue 51's
recipe: 256 games, 16 minibatches, half of the games against VMAS's scripted team's ladder; only when named),
gridnet, impala and guidance (the other scripts at their defaults): A is the script of ``--baseline`` (a ``git
worktree`` of it, or ``--baseline-dir``; PYTHONPATH that checkout), B the same script of this tree. torchrun: this
tree's ppo_lstm_selfplay.py in one process (A) against two processes under ``torchrun --nproc_per_node 2`` (B),
``--num-envs`` per process (B plays twice the games, as many updates), OMP_NUM_THREADS=1 in both; skipped while the
script has no torchrun support. cleanrl and microrts, with ``--peers DIR`` holding their checkouts DIR/cleanrl and
DIR/MicroRTS-Py, each with its .venv (the recipe is on the docs page): CleanRL's ppo_atari_envpool.py (Breakout-v5,
8 envs) against cleanba_impala.py at its defaults, and MicroRTS-Py's experiments/ppo_gridnet.py against
ppo_gridnet_masked.py, both with 8 bot and 16 self-play environments. Writes the table into docs/speed.md and keeps
each case's runs in benchmark/results/speed/<case>.json, from which ``--from-results`` remakes it.

With ``--gpu`` (on a machine with CUDA), each case that trains one script of this tree (c4, lane, gridnet, impala,
guidance, and impala-wide: cleanba_impala.py with 64 environments over 4 actor threads) runs that script on the CPU
(A, ``--no-cuda``) against the same script on the GPU (B), and the table starts with envpool's own ceiling there
(Breakout-v5, random actions, asynchronous, as many threads as cores); it goes into docs/speed.md's GPU block and
benchmark/results/speed_gpu/. Where the tree has no .git (a copied tree), $CLEANFIVE_COMMIT names its commit.

Before each run it waits (at most ``--max-wait`` seconds, saying so) until the 1-minute load average is below 0.5,
and the table gives that load at each run's start: a ratio taken on a busy machine does not repeat. ``--no-wait``
starts each run at once (a GPU machine, a screen).

    uv run --all-extras python benchmark/speed.py --rounds 2
    uv run --all-extras python benchmark/speed.py --cases cleanrl microrts --peers DIR --block speed-peers \\
        --results benchmark/results/speed_peers
    python benchmark/speed.py --gpu --no-wait --cases c4 impala impala-wide lane --rounds 1
"""

import functools
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import provenance as pv

DOC = pv.ROOT / "docs" / "speed.md"
SELFPLAY = ["--eval-every", "1000000", "--save-every", "0"]  # one evaluation, in the last update
LADDER = ["--bot-opponents", "lookahead", "search1", "search2"]  # issue 40's upper recipe's bot opponents
FOOTBALL = ["--env-id", "VmasFootball-v0", "--num-envs", "256", "--num-minibatches", "16"]
FOOTBALL += ["--bot-opponents", "random", "vmas_ai25", "vmas_ai50", "vmas_ai75", "vmas_ai"]
LANE = ["--num-heroes", "5", "--num-envs", "64"]  # the lane world's defaults until 2026-11-26, as measured since
NO_EVAL = ["--eval-episodes", "0", "--eval-games", "0", "--save-every", "0"]
PEER_GRIDNET = ["--num-bot-envs", "8", "--num-selfplay-envs", "16"]
WIDE = ["--local-num-envs", "64", "--num-actor-threads", "4", "--torch-threads", "4"]  # a GPU machine's 16 cores
# case: (this tree's script, its flags, the steps of one update of A, updates per run: 30-120 s on 2 idle cores)
CASES = {
    "c4": ("ppo_lstm_selfplay.py", SELFPLAY, 64 * 64, 4),
    "c4-ladder": ("ppo_lstm_selfplay.py", [*SELFPLAY, *LADDER], 64 * 64, 3),  # half of the games against bots
    "lane": ("ppo_lstm_selfplay.py", ["--env-id", "Moba5v5-v0", *LANE, *SELFPLAY], 64 * 64, 3),
    # football: 24 updates, as its games last up to 500 steps: the first 8 updates are self-play of every hero only
    "football": ("ppo_lstm_selfplay.py", [*FOOTBALL, *SELFPLAY], 256 * 64, 24),
    "gridnet": ("ppo_gridnet_masked.py", NO_EVAL, 4 * 256, 10),
    "impala": ("cleanba_impala.py", ["--save-every", "0"], 16 * 32, 60),
    "impala-wide": ("cleanba_impala.py", ["--save-every", "0", *WIDE], 64 * 32, 20),
    "guidance": ("ppo_action_guidance.py", ["--eval-episodes", "0", "--save-every", "0"], 8 * 128, 20),
    "torchrun": ("ppo_lstm_selfplay.py", SELFPLAY, 64 * 64, 4),
    "cleanrl": ("cleanba_impala.py", ["--save-every", "0"], 8 * 128, 40),
    "microrts": ("ppo_gridnet_masked.py", [*PEER_GRIDNET, "--torch-threads", "2", *NO_EVAL], 24 * 256, 3),
}
PEERS = {  # case: the peer, its script under --peers (its venv: .venv in the script's checkout), its flags
    "cleanrl": ("CleanRL", "cleanrl/cleanrl/ppo_atari_envpool.py", ["--env-id", "Breakout-v5", "--num-envs", "8"]),
    "microrts": ("MicroRTS-Py", "MicroRTS-Py/experiments/ppo_gridnet.py", ["--max-eval-workers", "0", *PEER_GRIDNET]),
}
LEAGUE = "gym-microrts-static-files"
IDLE_LOAD = 0.5  # the 1-minute load average below which a run starts
PARSER = pv.parser(__file__, __doc__, extra=False, results="speed")
GPU_CASES = ["c4", "lane", "gridnet", "impala", "guidance", "impala-wide"]  # --gpu: one script of this tree
NAMED_ONLY = ("impala-wide", "football")  # cases that run only when named
PARSER.add_argument(
    "--cases", nargs="+", choices=list(CASES), help="cases to run (default: all but impala-wide and football)"
)
PARSER.add_argument("--rounds", type=int, default=2, help="runs of each command, alternating")
PARSER.add_argument("--updates", type=int, help="updates of A per run (default: each case's own)")
PARSER.add_argument("--baseline", default="0736919", help="the earlier commit that the scripts are compared with")
PARSER.add_argument("--baseline-dir", type=Path, help="a checkout of --baseline (default: a git worktree in /tmp)")
PARSER.add_argument("--peers", type=Path, help="the folder of the peers' checkouts and venvs (see above)")
PARSER.add_argument("--gpu", action="store_true", help="each script on the CPU (A) against the GPU (B), see above")
PARSER.add_argument("--max-wait", type=float, default=900, help="longest wait for an idle machine before a run (s)")
PARSER.add_argument("--no-wait", action="store_true", help="start each run at once, busy machine or not (GPU, screen)")
PARSER.add_argument("--block", help="docs block to write (default: speed, or speed-gpu with --gpu): another machine's")


def git(*words: str) -> str:
    return subprocess.run(["git", *words], cwd=pv.ROOT, capture_output=True, text=True, check=True).stdout.strip()


@functools.cache
def this_tree() -> str:
    """The commit of the code measured, read once: a commit made during the runs does not change it."""
    return pv.code_version("cleanfive")


def baseline_checkout(args) -> Path:
    """``--baseline-dir``, or a worktree of ``--baseline`` in the temporary folder (made once, then reused)."""
    commit = git("rev-parse", "--verify", f"{args.baseline}^{{commit}}")
    path = args.baseline_dir or Path(tempfile.gettempdir()) / f"cleanfive-{commit[:7]}"
    if not path.exists():
        git("worktree", "add", "--detach", str(path), commit)
    head = git("-C", str(path), "rev-parse", "HEAD")
    pv.check(head == commit, f"--baseline-dir {path} is at {head[:7]}, not at --baseline {args.baseline}")
    return path


def side(label: str, argv: list, env: dict, tag: str = "charts/SPS", link: Path | None = None) -> dict:
    """One command of a case: its label, argv, environment, the TensorBoard tag of its speed and a file to link
    into its run folder."""
    return {"label": label, "argv": [str(word) for word in argv], "env": env, "tag": tag, "link": link}


def sides(case: str, args, total: int, base: Path | None) -> list[dict] | str:
    """Commands A and B of ``case`` for ``total`` steps (a baseline case's A in the checkout ``base``), or why the
    case cannot run here."""
    script, flags, _, _ = CASES[case]
    here, run = pv.ROOT / "cleanfive" / script, [*flags, "--total-timesteps", str(total)]
    mine = side(f"this tree `{this_tree()}`", [sys.executable, here, *run], {"PYTHONPATH": pv.ROOT})
    if args.gpu:
        cpu = side("CPU (`--no-cuda`)", [sys.executable, here, *run, "--no-cuda"], {"PYTHONPATH": pv.ROOT})
        return [cpu, mine | {"label": "GPU"}]
    if case == "torchrun":
        if "LOCAL_RANK" not in here.read_text() and "init_process_group" not in here.read_text():
            return f"cleanfive/{script} has no torchrun support yet (no LOCAL_RANK, no init_process_group)"
        env = {"PYTHONPATH": str(pv.ROOT), "OMP_NUM_THREADS": "1"}
        doubled = [*flags, "--total-timesteps", str(2 * total)]  # each process plays --num-envs games: as many updates
        torchrun = [Path(sys.executable).with_name("torchrun"), "--standalone", "--nproc_per_node", "2", here, *doubled]
        return [side("1 process", [sys.executable, here, *run], env), side("torchrun, 2 processes", torchrun, env)]
    if case in PEERS:
        peer, path, peer_flags = PEERS[case]
        if args.peers is None:
            return "no --peers folder given"
        python, code = args.peers / path.split("/")[0] / ".venv" / "bin" / "python", args.peers / path
        if not (python.is_file() and code.is_file()):
            return f"{args.peers} has no {path} or no {python.relative_to(args.peers)}"
        argv = [python, code, *peer_flags, "--total-timesteps", total]
        if case == "microrts":  # it reads gym-microrts-static-files/league.csv from its folder, and logs charts/sps
            return [side(f"{peer} `{code.name}`", argv, {"PYTHONPATH": ""}, "charts/sps", code.parent / LEAGUE), mine]
        return [side(f"{peer} `{code.name}`", argv, {"PYTHONPATH": ""}), mine]
    label = f"baseline `{git('-C', str(base), 'rev-parse', '--short', 'HEAD')}`"
    return [side(label, [sys.executable, base / "cleanfive" / script, *run], {"PYTHONPATH": base}), mine]


def sps_events(runs: Path, tag: str) -> list:
    """The ``tag`` events (wall_time, step, value) of the one TensorBoard run under ``runs`` (beside it, the cached
    reference ratings of ppo_lstm_selfplay.py: runs/reference_ratings/)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (run,) = (path for path in runs.iterdir() if path.name != "reference_ratings")
    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    return sorted(events.Scalars(tag), key=lambda event: event.step)


def wait_idle(max_wait: float) -> float:
    """Wait until the 1-minute load average is below IDLE_LOAD, at most ``max_wait`` seconds, saying so; the load
    then."""
    start, load = time.time(), os.getloadavg()[0]
    if load < IDLE_LOAD:
        return load
    print(
        f"  waiting for the 1-minute load ({load:.2f}) to fall below {IDLE_LOAD} (at most {max_wait:.0f} s)", flush=True
    )
    while (load := os.getloadavg()[0]) >= IDLE_LOAD and time.time() - start < max_wait:
        time.sleep(5)
    verdict = "starting anyway (the table shows it)" if load >= IDLE_LOAD else "starting"
    print(f"  1-minute load {load:.2f} after {time.time() - start:.0f} s: {verdict}", flush=True)
    return load


def measure(s: dict, wait: float | None) -> dict:
    """Run one command in an empty folder, after waiting up to ``wait`` seconds for an idle machine (None: no wait):
    the 1-minute load at its start, its steady steps/s, seconds to the first update, wall seconds, the speed it
    reported last itself, and the load after it."""
    load_start = os.getloadavg()[0] if wait is None else wait_idle(wait)
    with tempfile.TemporaryDirectory(prefix="speed-") as tmp:
        if s["link"]:
            Path(tmp, s["link"].name).symlink_to(s["link"])
        print("$", shlex.join(s["argv"]), flush=True)
        env, start = {**os.environ, **{k: str(v) for k, v in s["env"].items()}}, time.time()
        done = subprocess.run(s["argv"], cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.time() - start
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr, flush=True)
            raise RuntimeError(f"exit code {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
        events = sps_events(Path(tmp, "runs"), s["tag"])
    if len(events) < 3:
        raise RuntimeError(f"{len(events)} {s['tag']} events: a run needs 3 updates or more (--updates)")
    first, last = events[0], events[-2]
    sps = (last.step - first.step) / (last.wall_time - first.wall_time)
    result = {"load_start": load_start, "sps": sps, "first_update": first.wall_time - start, "wall": wall}
    result |= {"own_sps": events[-1].value}
    return result | {"load": os.getloadavg()[0]}


def shown(argv: list[str], base: Path | None = None, peers: Path | None = None) -> str:
    """``argv`` as the docs show it: python for this interpreter, paths in this tree relative to it, those in the
    baseline's checkout and the peers' folder under BASELINE/ and PEERS/."""
    words = ["python" if word == sys.executable else word for word in argv]
    for path, name in [(pv.ROOT, ""), (base, "BASELINE/"), (peers, "PEERS/")]:
        words = [word.replace(f"{path}/", name) if path else word for word in words]
    return shlex.join(words)


def run_case(case: str, args, base: Path | None) -> dict | str:
    """Run A and B of ``case`` alternately and keep them in ``--results``/<case>.json, or say why it cannot run."""
    _, _, steps, updates = CASES[case]
    commands = sides(case, args, steps * (args.updates or updates), base)
    if isinstance(commands, str):
        print(f"{case}: skipped: {commands}", flush=True)
        return commands
    load_start, runs = os.getloadavg()[0], [[], []]
    for round_ in range(args.rounds):
        for s, kept in zip(commands, runs, strict=True):
            try:
                kept.append(measure(s, None if args.no_wait else args.max_wait))
            except RuntimeError as failed:
                print(f"{case}: FAILED: {shlex.join(s['argv'])}: {failed}", flush=True)
                return f"failed: {failed}"
            done = kept[-1]
            print(
                f"  {case} round {round_ + 1} {s['label']}: {done['sps']:.0f} steps/s, 1-minute load at its start"
                f" {done['load_start']:.2f}",
                flush=True,
            )
    result = {"case": case, "updates": args.updates or updates, "rounds": args.rounds, "sides": []}
    for s, r in zip(commands, runs, strict=True):
        result["sides"].append({"label": s["label"], "command": shown(s["argv"], base, args.peers), "runs": r})
    result |= {"code": this_tree(), "date": pv.now(), "machine": pv.machine()}
    result |= {"load_start": load_start, "load": os.getloadavg()[0]}
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{case}.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def row(kept: dict) -> str:
    """One table row: each run's steps/s of A and of B, the ratio of their medians, first update and wall time, and
    the 1-minute load at each run's start ("—" in runs kept before it was recorded)."""
    a, b = ([run["sps"] for run in s["runs"]] for s in kept["sides"])
    cells = [kept["case"], *(s["label"] for s in kept["sides"]), *(", ".join(f"{v:.0f}" for v in x) for x in (a, b))]
    cells.append(f"{statistics.median(b) / statistics.median(a):.2f}")
    for key in ("first_update", "wall"):
        cells.append("; ".join(", ".join(f"{run[key]:.0f}" for run in s["runs"]) for s in kept["sides"]))
    load = (
        ", ".join(f"{run['load_start']:.2f}" if "load_start" in run else "—" for run in s["runs"])
        for s in kept["sides"]
    )
    cells.append("; ".join(load))
    return "| " + " | ".join(cells) + " |"


def envpool_ceiling(seconds: float = 10.0) -> str:
    """envpool's own speed on this machine: Breakout-v5 (cleanba_impala.py's settings) with random actions,
    asynchronous (2 x cores environments, batches of cores, cores threads), for ``seconds``; as one phrase."""
    import envpool
    import numpy as np

    cores, rng = os.cpu_count(), np.random.default_rng(0)
    kwargs = {"num_envs": 2 * cores, "batch_size": cores, "num_threads": cores, "episodic_life": True}
    envs = envpool.make("Breakout-v5", env_type="gymnasium", reward_clip=True, **kwargs)
    envs.async_reset()
    steps, start = 0, time.time()
    while time.time() - start < seconds:
        *_, info = envs.recv()
        envs.send(rng.integers(envs.action_space.n, size=len(info["env_id"])), info["env_id"])
        steps += len(info["env_id"])
    sps = steps / (time.time() - start)
    return f"envpool's ceiling here: Breakout-v5, random actions, asynchronous ({kwargs}): {sps:.0f} steps/s"


def main() -> None:
    args = PARSER.parse_args()
    pv.check(args.updates is None or args.updates >= 3, "--updates must be 3 or more (the last one is left out)")
    block = args.block or ("speed-gpu" if args.gpu else "speed")
    args.cases = args.cases or (GPU_CASES[:-1] if args.gpu else [c for c in CASES if c not in NAMED_ONLY])
    wrong = sorted(set(args.cases) - set(GPU_CASES)) if args.gpu else []
    pv.check(not wrong, f"--gpu measures one script of this tree per case; drop {' '.join(wrong)} from --cases")
    if args.gpu:
        import torch  # also names the GPU in the table's machine

        pv.check(torch.cuda.is_available() or args.from_results, "--gpu: torch sees no CUDA device on this machine")
    if args.gpu:  # no baseline; results kept beside the CPU machine's, and shown as the default in the table
        args.baseline = None
        if args.results == PARSER.get_default("results"):
            args.results = args.results.with_name("speed_gpu")
            PARSER.set_defaults(results=args.results)
    if not args.no_docs:
        pv.markers(DOC, block)
    started, load_start = time.time(), os.getloadavg()[0]
    if args.from_results:
        settings = {case: {"updates": args.updates or CASES[case][3], "rounds": args.rounds} for case in args.cases}
        found = {case: pv.load_kept(args.results / f"{case}.json", **settings[case]) for case in args.cases}
        found = {case: k or "no result kept with these --updates and --rounds" for case, k in found.items()}
    else:
        ceiling = envpool_ceiling() if args.gpu else None
        if ceiling:
            print(ceiling, flush=True)
            args.results.mkdir(parents=True, exist_ok=True)
            (args.results / "ceiling.txt").write_text(ceiling + "\n")
        base = baseline_checkout(args) if set(args.cases) - {"torchrun", *PEERS} and not args.gpu else None
        found = {case: run_case(case, args, base) for case in args.cases}
    kept = [k for k in found.values() if isinstance(k, dict)]
    pv.check(bool(kept), f"no results of {args.cases} with these --updates and --rounds in {args.results}")
    if args.from_results:
        code, source = None, f"; {pv.kept_provenance(kept)}."
    else:
        code = this_tree()
        source = f"; 1-minute load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
        source += f", {(time.time() - started) / 60:.0f} min in all."
    note = (
        ". Steps/s: each run's steady speed between its first and last-but-one update (from its TensorBoard events);"
        " B ÷ A: the ratio of their medians; first update and wall: seconds from the launch, A's runs; B's runs;"
        f" load: the 1-minute load average at each run's start (n: n cores busy; runs wait for {IDLE_LOAD} or less"
        " unless --no-wait)."
    )
    lines = [*pv.header(PARSER, args, code, source, note)]
    if args.gpu and (args.results / "ceiling.txt").exists():
        lines += [(args.results / "ceiling.txt").read_text().strip() + ".", ""]
    lines += ["| case | A | B | A steps/s | B steps/s | B ÷ A | first update (s) | wall (s) | load |", "|---" * 9 + "|"]
    lines += [row(k) for k in kept]
    lines += ["", "Commands (each in an empty folder):", ""]
    lines += [
        f"- {k['case']}, {k['updates']} updates: A `{k['sides'][0]['command']}`; B `{k['sides'][1]['command']}`"
        for k in kept
    ]
    lines += [f"- {case}: not run: {why}" for case, why in found.items() if isinstance(why, str)]
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, block, table)
    failed = [case for case, why in found.items() if isinstance(why, str) and why.startswith("failed")]
    pv.check(not failed, f"cases {' '.join(failed)} failed: their errors are printed above")


if __name__ == "__main__":
    main()
