"""Issue 10 for every script: bad input, resume without loss after SIGKILL, numerical faults, offline tracking,
TensorBoard keys, saved models and --eval-only.

Every script of cleanfive/ has a row in SCRIPTS (test_every_script_has_a_row fails until a new script adds one) and
must pass every case. All runs have tiny budgets, in subprocesses; the runs that need no process of their own share
one interpreter per script (tests/driver.py: a process start costs 4-6 s of imports). They are independent, so the
`runs` fixture starts the work of every selected test of this module at once, two scripts at a time (beside the
other pytest worker: two cores), and each test waits for its own.
"""

import importlib
import importlib.util
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from driver import drive
from needs import microrts_missing
from payloads import RunsCode
from saved_models import save_selfplay_model
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

ROOT = Path(__file__).resolve().parents[1]
# a tiny Moba5v5-v0 model of ppo_lstm_selfplay.py for five_surgery.py's row, made once by the `runs` fixture
V0_MODEL = Path(tempfile.gettempdir()) / f"cleanfive_reliability_v0_{os.getpid()}.cleanfive_model"


@dataclass(frozen=True)
class Script:
    tiny: tuple[str, ...]  # a run of a few updates (the first cases' base flags)
    env_flag: str  # the flag that names the world
    wrong_env: str  # a world the script does not know
    extra: tuple[str, str, tuple[str, ...]] | None  # (package to hide, extra that installs it, flags that need it)
    bad_split: tuple[str, ...]  # flags whose batch cannot be split into the minibatches
    out_of_range: tuple[tuple[str, ...], ...]  # one flag and value each
    resume: tuple[str, ...]  # flags added to `tiny` for a run of `updates` updates
    updates: int  # counted by hand from `tiny` + `resume`
    resume_check: str  # "bit-identical": ends as an uninterrupted run; "deterministic": two resumes end alike;
    # "no-loss": neither (the world's state cannot be saved and is not seedable)
    nan: tuple[str, ...]  # flags that leave finite parameters after update 1 and non-finite ones at update 2
    episode: bool  # `tiny` finishes an episode, so charts/episodic_return must be logged
    video: str  # --capture-video with --eval-only: "yes", or "display" (needs one; exit 2 without)
    eval_flags: tuple[str, ...]  # a cheap evaluation for --eval-only


SCRIPTS = {
    "cleanba_impala": Script(
        tiny=("--local-num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--total-timesteps", "512"),
        env_flag="--env-id",
        wrong_env="CartPole-v1",
        extra=None,
        bad_split=("--num-minibatches", "3"),
        out_of_range=(("--learning-rate", "0"), ("--gamma", "1.5")),
        resume=("--num-steps", "32", "--total-timesteps", "640"),
        updates=10,
        resume_check="deterministic",  # envpool's games cannot be saved, but they restart from seeds
        nan=("--num-minibatches", "1", "--learning-rate", "1e12"),
        episode=True,
        video="yes",
        eval_flags=("--eval-episodes", "2"),
    ),
    "ppo_gridnet_masked": Script(
        tiny=(
            "--map-path",
            "maps/4x4/basesWorkers4x4.xml",
            "--reward-weight",
            "0",
            "1",
            "0",
            "0",
            "0",
            "0",
            "--num-selfplay-envs",
            "2",
            "--num-bot-envs",
            "2",
            "--bots",
            "passiveAI",
            "--max-steps",
            "100",
            "--num-steps",
            "32",
            "--update-epochs",
            "1",
            "--total-timesteps",
            "512",
            "--eval-episodes",
            "0",
            "--eval-games",
            "0",
            "--no-cuda",
        ),  # fmt: skip
        env_flag="--map-path",
        wrong_env="maps/nowhere.xml",
        extra=("gym_microrts", "microrts", ()),
        bad_split=("--num-minibatches", "3"),
        out_of_range=(("--learning-rate", "0"), ("--clip-coef", "-0.1")),
        resume=("--num-steps", "16", "--total-timesteps", "640"),
        updates=10,
        resume_check="no-loss",  # µRTS games live in the JVM and take no seed
        nan=("--num-minibatches", "1", "--learning-rate", "1e12"),
        episode=True,
        video="display",  # µRTS' Java renderer
        eval_flags=("--eval-episodes", "1"),
    ),
    "ppo_lstm_selfplay": Script(
        tiny=(
            "--env-id",
            "Moba5v5-v0",
            "--num-heroes",
            "3",
            "--total-timesteps",
            "768",
            "--num-envs",
            "4",
            "--num-steps",
            "32",
            "--bptt-len",
            "16",
            "--num-minibatches",
            "2",
            "--update-epochs",
            "1",
            "--pool-every",
            "1",
            "--eval-every",
            "1000",
            "--eval-games",
            "2",
            "--reference-games",
            "2",
            "--references",
            "random",
            "push",
            "--hidden-size",
            "32",
            "--no-cuda",
        ),  # fmt: skip
        env_flag="--env-id",
        wrong_env="CartPole-v1",
        extra=("vmas", "vmas", ("--env-id", "VmasFootball-v0", "--num-heroes", "2")),
        bad_split=("--num-minibatches", "3"),
        out_of_range=(("--learning-rate", "0"), ("--gae-lambda", "1.5")),
        resume=("--total-timesteps", "1280", "--policy-lag", "2"),  # the lag's saved versions must resume too
        updates=10,
        resume_check="bit-identical",  # the lane world saves its state
        # finite after update 1, overflowing later: a narrow window (7e17 overflows at update 6, 1.2e18 at update 2,
        # 2e18 at update 1; 6e17 overflowed only in a past version's sampling, which no longer stops a run)
        nan=("--num-minibatches", "1", "--learning-rate", "1e18"),
        episode=False,  # no lane-world game ends within a tiny run
        video="yes",
        eval_flags=("--eval-games", "2"),
    ),
    "ppo_action_guidance": Script(
        tiny=(
            "--map-path",
            "maps/4x4/basesWorkers4x4.xml",
            "--num-envs",
            "2",
            "--max-steps",
            "100",
            "--num-steps",
            "32",
            "--update-epochs",
            "1",
            "--total-timesteps",
            "256",
            "--eval-episodes",
            "0",
            "--no-cuda",
        ),
        env_flag="--map-path",
        wrong_env="maps/nowhere.xml",
        extra=("gym_microrts", "microrts", ()),
        bad_split=("--num-minibatches", "3"),
        out_of_range=(("--learning-rate", "0"), ("--epsilon-end", "1.5")),
        resume=("--num-steps", "16", "--total-timesteps", "320"),
        updates=10,
        resume_check="no-loss",  # µRTS games live in the JVM and take no seed
        nan=("--num-minibatches", "1", "--learning-rate", "1e12"),
        episode=True,
        video="display",  # µRTS' Java renderer
        eval_flags=("--eval-episodes", "1"),
    ),  # fmt: skip
    "five_surgery": Script(
        # operates V0_MODEL (made by the `runs` fixture) into Moba5v5-v1: new inputs and the new action
        tiny=(
            "--checkpoint",
            str(V0_MODEL),
            "--add-inputs",
            "--add-actions",
            "--env-id",
            "Moba5v5-v1",
            "--num-envs",
            "4",
            "--num-steps",
            "16",
            "--bptt-len",
            "8",
            "--num-minibatches",
            "2",
            "--update-epochs",
            "1",
            "--pool-every",
            "1",
            "--eval-every",
            "1000",
            "--eval-games",
            "1",
            "--reference-games",
            "1",
            "--references",
            "random",
            "push",
            "--verify-games",
            "2",
            "--verify-steps",
            "24",
            "--parity-games",
            "2",
            "--lr0-updates",
            "1",
            "--anneal-updates",
            "1",
            "--total-timesteps",
            "192",
            "--no-cuda",
        ),
        env_flag="--env-id",
        wrong_env="CartPole-v1",
        extra=None,  # the surgery starts from a lane-world model: VMAS football is not one of its targets
        bad_split=("--num-minibatches", "3"),
        out_of_range=(("--learning-rate", "0"), ("--gae-lambda", "1.5")),
        resume=("--total-timesteps", "640"),
        updates=10,
        resume_check="bit-identical",  # the lane world saves its state
        nan=("--learning-rate", "1e30"),  # update 1 runs at learning rate 0 (--lr0-updates 1)
        episode=False,  # no lane-world game ends within a tiny run
        video="yes",
        eval_flags=("--eval-games", "2"),
    ),  # fmt: skip
}
ERROR_CASES = (
    "wrong env id",
    "missing extra",
    "impossible split",
    "--resume missing file",
    "--resume corrupt file",
    "--resume another script's file",
    "--eval-only missing file",
    "--eval-only corrupt file",
    "--eval-only another script's file",
    "--resume a file that runs code",
    "--eval-only a file that runs code",
    "out of range 0",
    "out of range 1",
    "--capture-video without a display",
)
# scripts whose world needs something the machine may lack: every case of theirs is skipped without it
UNAVAILABLE = {"ppo_gridnet_masked": microrts_missing(), "ppo_action_guidance": microrts_missing()}
EVAL_RESULT = {  # the line of --eval-only's result, by script
    "ppo_lstm_selfplay": re.compile(r"^trueskill_mu=\S+ sigma=\S+$"),
    "five_surgery": re.compile(r"^trueskill_mu=\S+ sigma=\S+$"),
    "cleanba_impala": re.compile(r"^eval env_id=\S+ episodes=2 mean_return=\S+ std=\S+ returns=\["),
    "ppo_gridnet_masked": re.compile(r"^summary .*\beval_\w+="),
    "ppo_action_guidance": re.compile(r"^summary .*\beval_sparse_return=\S+"),
}
FAULT = re.compile(r"^error: non-finite loss or parameters at update (\d+); stopped\. Last good checkpoint: (.+)$")
RESUMED = re.compile(r"^resumed from (.+) at update (\d+) \(global_step (\d+)\)$", re.M)


def script_path(name):
    return ROOT / "cleanfive" / f"{name}.py"


def run(name, flags, cwd, **env):
    return subprocess.run(
        [sys.executable, str(script_path(name)), *flags],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1", **env},  # never the network
    )


def load(path):
    return torch.load(path, map_location="cpu", weights_only=True)


def one_error_line(result):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 and lines[0].startswith("error:") else None


def scalars(run_dir):
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def same_model(path_a, path_b):
    a, b = load(path_a)["model"], load(path_b)["model"]
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------------------------------------------------------------
# the work of each test, run on the pool; each returns what its test checks


def bad_input(name, case, tmp):
    """Flags, extra environment variables and a phrase the error line must contain, for one bad-input case."""
    s = SCRIPTS[name]
    corrupt, foreign = tmp / "corrupt.pt", tmp / "foreign.pt"
    corrupt.write_bytes(b"PK\x03\x04 not a checkpoint")
    torch.save({"args": {"not_a_flag_of_this_script": 1}, "model": {"w": torch.zeros(1)}}, foreign)
    files = {"missing file": tmp / "missing.pt", "corrupt file": corrupt, "another script's file": foreign}
    files["a file that runs code"] = tmp / "runs_code.pt"  # unpickling it would create tmp / "code_ran"
    torch.save({"args": {}, "model": {"w": RunsCode(tmp / "code_ran")}}, files["a file that runs code"])
    if case == "wrong env id":
        return [*s.tiny, s.env_flag, s.wrong_env], {}, s.wrong_env
    if case == "missing extra":  # a package of that name that cannot be imported, first on the path
        package, extra, extra_flags = s.extra
        (tmp / "fake" / package).mkdir(parents=True)
        (tmp / "fake" / package / "__init__.py").write_text(f"raise ModuleNotFoundError(name={package!r})\n")
        path = os.pathsep.join([str(tmp / "fake"), *filter(None, [os.environ.get("PYTHONPATH")])])
        return [*s.tiny, *extra_flags], {"PYTHONPATH": path}, f"--extra {extra}"
    if case == "impossible split":
        return [*s.tiny, *s.bad_split], {}, s.bad_split[0]
    if case.startswith("out of range"):
        bad = s.out_of_range[int(case[-1])]
        return [*s.tiny, *bad], {}, bad[0]
    if case == "--capture-video without a display":
        return [*s.tiny, "--capture-video"], {"DISPLAY": ""}, "display"
    flag, what = case.split(" ", 1)
    return [*s.tiny, flag, str(files[what])], {}, str(files[what])


DRIVER_ENV = {"WANDB_MODE": "offline", "OMP_NUM_THREADS": "1", "DISPLAY": ""}  # never the network, nor a display
RUN_SEED = "2"  # the seed of the run that is killed and resumed
# given to each resume: the checkpoint's seed holds, and the run says it ignored this one (the default seed: a flag
# given at its default value is a flag given all the same)
IGNORED_SEED = "1"


def script_job(name, kinds, tmp):
    """Every run of one script that needs no process of its own, in ONE interpreter (tests/driver.py): the resumes
    of a run SIGKILLed once a checkpoint at update >= 2 exists ("resume": resumed, and beside it an uninterrupted run
    or a second resume of the same checkpoint), its bad-input cases ("errors"), the numerical fault ("fault"), and
    ("track") --eval-only on the model that a tracked run (a process of its own: wandb) saved. The killed run and the
    tracked run are processes of their own. Returns {kind: what that kind's tests check}."""
    s, cases, out = SCRIPTS[name], {}, {}
    if "resume" in kinds:  # first in the interpreter: the runs that must end bit for bit alike
        resume_flags = [*s.tiny, *s.resume, "--seed", RUN_SEED, "--save-every", "1", "--save-model"]
        killed, other = tmp / "killed", tmp / "other"
        killed.mkdir()
        other.mkdir()
        with open(tmp / "killed.log", "w") as log:
            proc = subprocess.Popen(
                [sys.executable, str(script_path(name)), *resume_flags],
                cwd=killed,
                stdout=log,
                stderr=log,
                env={**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"},
            )
            while not any(load(p)["iteration"] >= 2 for p in killed.glob("runs/*/checkpoint.pt")):
                if proc.poll() is not None:
                    raise AssertionError(
                        f"the run ended before a checkpoint at update >= 2: {(tmp / 'killed.log').read_text()}"
                    )
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        (path,) = killed.glob("runs/*/checkpoint.pt")
        checkpoint = load(path)  # what the killed run left: a whole file (atomic writes), maybe a later update
        shutil.copy(path, other / "checkpoint.pt")
        # the run to compare with: uninterrupted (bit-identical), or the same checkpoint resumed elsewhere
        # (with a flag of another value, which the resumed run ignores and names: it must end as if not given)
        # the run's own world given again (not ignored: its settings are the default then, not flags given)
        world = [s.env_flag, s.tiny[s.tiny.index(s.env_flag) + 1]] if s.env_flag in s.tiny else []
        cases["resumed"] = (killed, ["--resume", str(path.relative_to(killed)), "--seed", IGNORED_SEED, *world])
        second = {"bit-identical": resume_flags, "deterministic": ["--resume", "checkpoint.pt"]}.get(s.resume_check)
        cases |= {"second": (other, second)} if second else {}
        out["resume"] = {"checkpoint": checkpoint, "path": path, "dirs": (killed, other)}
    if "track" in kinds:
        tracked = tmp / "tracked"
        tracked.mkdir()
        env = {"WANDB_DIR": str(tracked), "WANDB_SILENT": "true"}
        tracked_run = run(name, [*s.tiny, "--track", "--save-model"], tracked, **env)
        out["track"] = {"tmp": tracked, "tracked": tracked_run}
        models = list(tracked.glob(f"runs/*/{name}.cleanfive_model"))
        if out["track"]["tracked"].returncode == 0 and models:
            out["track"] |= {"run_dir": models[0].parent, "video": s.video == "yes"}  # the driver has no display
            video = ["--capture-video"] if s.video == "yes" else []
            cases["evaluated"] = (tracked, [*s.tiny, *s.eval_flags, "--eval-only", str(models[0]), *video])
    if "errors" in kinds:
        errors = [c for c in ERROR_CASES if not error_skip(name, c) and c != "missing extra"]
        flags = {case: bad_input(name, case, tmp) for case in errors}
        cases |= {case: (tmp, flags[case][0]) for case in errors}
    if "fault" in kinds:
        cases["fault"] = (tmp / "fault", [*s.tiny, *s.nan, "--save-every", "1"])
    results = drive(script_path(name), cases, env=DRIVER_ENV, timeout=600)
    if "resume" in kinds:
        out["resume"] |= {"resumed": results["resumed"][0], "second": "second" in results and results["second"][0]}
    if "errors" in kinds:
        out["errors"] = {case: (results[case][0], flags[case][2]) for case in errors}
    if "fault" in kinds:
        out["fault"] = results["fault"]
    if "evaluated" in results:
        out["track"]["evaluated"] = results["evaluated"][0]
    return out


def extra_job(name, kinds, tmp):
    """The missing-extra case: a process of its own, with the fake package first on its path."""
    flags, env, says = bad_input(name, "missing extra", tmp)
    return {"extra": {"missing extra": (run(name, flags, tmp, **env), says)}}


# each kind of test, the job that does its work (the kinds of one job and script share one run of it)
JOB_OF = {"errors": script_job, "fault": script_job, "track": script_job, "resume": script_job, "extra": extra_job}


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """Submit the jobs of every selected (not skipped) test of this module, two at a time; runs(key) waits for the
    work of test kind key[0] on script key[1]. five_surgery's row operates V0_MODEL, an untrained tiny Moba5v5-v0
    model of ppo_lstm_selfplay.py made here first (tests/saved_models.py)."""
    kinds = {}  # (job, script) -> the kinds of test it serves
    for item in request.session.items:
        key = getattr(item, "callspec", None) and item.callspec.params.get("key")
        if item.module is sys.modules[__name__] and key and not item.get_closest_marker("skip"):
            kinds.setdefault((JOB_OF[key[0]], key[1]), set()).add(key[0])
    if any(name == "five_surgery" for _, name in kinds):
        save_selfplay_model(V0_MODEL, "Moba5v5-v0", 3, hidden=32)
    pool, futures = ThreadPoolExecutor(2), {}
    for work, name in kinds:
        future = pool.submit(work, name, kinds[work, name], tmp_path_factory.mktemp(f"{work.__name__}_{name}"))
        futures |= {(kind, name): future for kind in kinds[work, name]}
    yield lambda key: futures[key].result()[key[0]]
    pool.shutdown(cancel_futures=True)
    V0_MODEL.unlink(missing_ok=True)


# the scripts whose tracked run and --eval-only of its model run under -m slow only (45-60 s of the default run's
# 5-minute budget): their own test files play a saved model with --eval-only (five_surgery.py with --capture-video),
# their TensorBoard keys are checked there too, and --track is the same few wandb.init lines in every script
SLOW_TRACK = ("ppo_gridnet_masked", "ppo_action_guidance", "five_surgery", "cleanba_impala")


def keys(kind):
    def marks(name):
        slow = kind == "track" and name in SLOW_TRACK
        return skip_marks(UNAVAILABLE.get(name)) + ([pytest.mark.slow] if slow else [])

    return [pytest.param((kind, name), id=name, marks=marks(name)) for name in SCRIPTS]


def skip_marks(reason):
    return [pytest.mark.skip(reason=reason)] if reason else []


def error_skip(name, case):
    """Why `case` does not apply to script `name` (None: it applies)."""
    if UNAVAILABLE.get(name):
        return UNAVAILABLE[name]
    if case == "missing extra" and SCRIPTS[name].extra is None:
        return f"{name} has no optional extra (envpool is a core dependency)"
    if case == "--capture-video without a display" and SCRIPTS[name].video != "display":
        return f"{name} records videos without a display"
    return None


def error_keys():
    for name in SCRIPTS:
        for case in ERROR_CASES:
            key = ("extra" if case == "missing extra" else "errors", name)
            yield pytest.param(key, case, id=f"{name}-{case}", marks=skip_marks(error_skip(name, case)))


# ---------------------------------------------------------------------------------------------------------------------
# the tests


def test_every_script_has_a_row():
    # arena.py plays saved models (tests/test_arena.py checks its bad input); it trains nothing and resumes nothing
    # convert_saved.py rewrites old model files (tests/test_ppo_lstm_selfplay.py checks it)
    scripts = {p.stem for p in (ROOT / "cleanfive").glob("*.py")} - {
        "__init__",
        "trueskill_league",
        "arena",
        "convert_saved",
    }
    assert scripts <= SCRIPTS.keys(), f"add a row to SCRIPTS for {sorted(scripts - SCRIPTS.keys())}"


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_two_runs_of_one_name_save_the_same_checkpoint_path_without_a_crash(name, tmp_path, monkeypatch):
    """Two runs of one run name (same world, seed and second: CleanRL's name) write one checkpoint path. Here a
    second process's whole atomic_save falls between the first one's write and its rename; with one shared temporary
    file the first rename found nothing (FileNotFoundError, seen with two football runs). The last rename wins."""
    module = importlib.import_module(f"cleanfive.{name}")
    path, rename, pids = str(tmp_path / "run" / "checkpoint.pt"), os.replace, iter((111, 222))

    def rename_after_the_other_process(source, target):
        monkeypatch.setattr(os, "replace", rename)
        monkeypatch.setattr(os, "getpid", lambda: next(pids))  # (the other process's pid)
        module.atomic_save({"run": "second"}, path)
        rename(source, target)

    monkeypatch.setattr(os, "replace", rename_after_the_other_process)
    module.atomic_save({"run": "first"}, path)
    assert torch.load(path, weights_only=True)["run"] == "first"
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["checkpoint.pt"]  # no temporary file left


@pytest.mark.parametrize(("key", "case"), list(error_keys()))
def test_bad_input_exits_2_with_one_line(runs, key, case):
    result, says = runs(key)[case]
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = one_error_line(result)
    assert line is not None, f"want one `error: ...` line on stderr, got:\n{result.stderr[-3000:]}"
    assert says in line, f"the line should name {says!r}: {line}"
    if case.endswith("a file that runs code"):  # refused before anything in it ran
        assert "convert_saved.py" in line and not (Path(says).parent / "code_ran").exists()


@pytest.mark.parametrize("key", keys("resume"))
def test_sigkill_then_resume_loses_no_update(runs, key):
    s = SCRIPTS[key[1]]
    out = runs(key)
    checkpoint, resumed, second = out["checkpoint"], out["resumed"], out["second"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    k, g = checkpoint["iteration"], checkpoint["global_step"]
    assert k >= 2 and g % k == 0
    # it starts right after the checkpoint's update, under the same run name
    (line,) = RESUMED.findall(resumed.stdout)
    assert (int(line[1]), int(line[2])) == (k, g), resumed.stdout
    said = f"--resume: the run goes on with its own flags; ignored: --seed {IGNORED_SEED}"  # and nothing else
    assert said in resumed.stdout.splitlines(), resumed.stdout
    assert checkpoint["run_name"] == out["path"].parent.name
    # and finishes every update: the last checkpoint is the last update, and each update is logged exactly once
    last = load(out["path"])
    assert (last["iteration"], last["global_step"]) == (s.updates, s.updates * g // k)
    steps = [step for step, _ in scalars(out["path"].parent)["charts/SPS"]]
    assert steps == [u * g // k for u in range(1, s.updates + 1)], "TensorBoard lost or repeated updates"
    if second:  # killed + resumed ends exactly as an uninterrupted run, or as another resume of the checkpoint
        assert second.returncode == 0, second.stderr[-3000:]
        model = f"runs/*/{key[1]}.cleanfive_model"
        (resumed_model,), (second_model,) = (list(d.glob(model)) for d in out["dirs"])
        assert same_model(resumed_model, second_model), f"the final parameters differ ({s.resume_check})"


@pytest.mark.parametrize("key", keys("fault"))
def test_numerical_fault_stops_with_one_line_and_keeps_the_last_good_checkpoint(runs, key):
    result, tmp = runs(key)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    line = one_error_line(result)
    assert line is not None and FAULT.match(line), result.stderr[-3000:]
    update, path = FAULT.match(line).groups()
    assert int(update) >= 2, line  # the learning rate is set so that the first update survives
    checkpoint = load(tmp / path)  # with --save-every 1: the update before the faulty one, not overwritten by it
    assert checkpoint["iteration"] == int(update) - 1
    assert all(t.isfinite().all() for t in checkpoint["model"].values() if t.is_floating_point())


@pytest.mark.parametrize("key", keys("track"))
def test_track_offline_writes_a_wandb_run_and_tensorboard_has_the_cleanrl_keys(runs, key):
    out = runs(key)
    tracked, tmp = out["tracked"], out["tmp"]
    assert tracked.returncode == 0, tracked.stderr[-3000:]
    assert list((tmp / "wandb").glob("offline-run-*")), "no offline wandb run"
    tags = scalars(out["run_dir"])
    wanted = ["charts/SPS", "losses/value_loss", "losses/policy_loss", "losses/entropy"]
    wanted += ["charts/episodic_return"] if SCRIPTS[key[1]].episode else []
    assert set(wanted) <= tags.keys(), f"missing {sorted(set(wanted) - tags.keys())}"


@pytest.mark.parametrize("key", keys("track"))
def test_saved_model_plays_with_eval_only_and_records_a_video(runs, key):
    out = runs(key)
    assert "evaluated" in out, "the tracked run saved no model"
    evaluated = out["evaluated"]
    assert evaluated.returncode == 0 and "Traceback" not in evaluated.stderr, evaluated.stderr[-3000:]
    # the evaluation's result line, with finite numbers: a rating (the Five pair), the games' scores (cleanba) or the
    # evaluation fields of the summary (the µRTS pair)
    (line,) = [x for x in evaluated.stdout.splitlines() if EVAL_RESULT[key[1]].match(x)]
    numbers = [float(v) for v in re.findall(r"=([-+\w.]+)", line) if re.fullmatch(r"[-+]?(\d[\d.e+-]*|nan|inf)", v)]
    assert numbers and all(math.isfinite(v) for v in numbers), line
    if out["video"]:  # (without a display, a world that needs one refuses --capture-video: a bad-input case)
        videos = [p for p in (out["tmp"] / "videos").rglob("*") if p.is_file() and p.stat().st_size > 0]
        assert videos, "--capture-video wrote no video"
