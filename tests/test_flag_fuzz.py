"""Valid combinations of the flags that change code paths, drawn for every script and run for a few updates (issue 39).

Flags are tested one at a time elsewhere; a crash that only a combination reaches (an empty minibatch under torchrun,
or with --clip-grad-per-param) needs combinations. Case ``i`` of a script is drawn by its generator from
``np.random.default_rng([SEED, script number, i])``, so a case is the same on every machine and reruns alone
(``pytest tests/test_flag_fuzz.py -k "ppo_lstm_selfplay and 7"``). Each case runs a few updates and must exit 0 with a
``params_sha256`` line; a case drawn with ``resume`` kills itself (SIGKILL) right after the checkpoint of a drawn
update is in place, is resumed, and must then end with the same hash as the uninterrupted run where the script promises
bit-exactness (the lane world; other worlds restart their games with fresh seeds, so there the resumed run only has to
finish).

It is a search, not a regression check: ``-m slow`` plays the first ``SLOW_CASES`` cases of every script and prints
what it ran (one case took 40-60 s of the default run's 5-minute budget, so the default run keeps only the
generator's own checks). Every crash found becomes a named
regression test in the script's test file, which the default run does run.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from needs import microrts_missing

ROOT = Path(__file__).resolve().parents[1]
SEED = 39
SLOW_CASES = 30
HASH = re.compile(r"params_sha256=([0-9a-f]{64})\b")
HAS_MICRORTS = importlib.util.find_spec("gym_microrts") is not None
HAS_VMAS = importlib.util.find_spec("vmas") is not None


def pick(rng, options):
    """One of `options` (a list; numpy would turn mixed values into strings)."""
    return options[rng.integers(len(options))]


def divisor(rng, n):
    """A divisor of n, up to n itself (one sequence or environment per minibatch)."""
    return pick(rng, [d for d in range(1, n + 1) if n % d == 0])


def toggle(rng, name):
    """--name or --no-name."""
    return [f"--{name}"] if rng.random() < 0.5 else [f"--no-{name}"]


def five_trainer(rng, num_envs):
    """The flags that ppo_lstm_selfplay.py and five_surgery.py share: rollout split, update, lag, normalisation,
    self-play and bot shares, each at its edges (0 and 1) as often as in between. Returns (flags, steps per update)."""
    bptt = pick(rng, [4, 8, 16])
    num_steps = bptt * pick(rng, [1, 2, 4])
    team_sequences = num_steps // bptt * num_envs * 2
    flags = ["--num-envs", str(num_envs), "--num-steps", str(num_steps), "--bptt-len", str(bptt)]
    flags += ["--num-minibatches", str(divisor(rng, team_sequences)), "--update-epochs", str(pick(rng, [1, 2]))]
    flags += ["--policy-lag", str(pick(rng, [0, 0, 1, 2])), "--pool-every", str(pick(rng, [1, 2, 10]))]
    flags += ["--past-fraction", str(pick(rng, [0.0, 0.2, 1.0])), "--bot-fraction", str(pick(rng, [0.0, 0.5, 1.0]))]
    flags += ["--bot-fraction-end", str(pick(rng, [0.0, 0.5, 1.0]))]
    for name in ("norm-adv", "anneal-lr", "clip-vloss"):
        flags += toggle(rng, name)
    if rng.random() < 0.4:
        flags += ["--clip-grad-per-param"]
    if rng.random() < 0.3:
        flags += ["--target-kl", str(pick(rng, [1e-9, 0.02]))]  # 1e-9: every update stops after its first epoch
    flags += ["--eval-games", "1", "--reference-games", "2", "--no-cuda", "--save-every", "1"]
    return flags, num_envs * num_steps


def selfplay_case(rng):
    world = pick(rng, ["ConnectFour-v1", "ConnectFour-v1", "TicTacToe-v1", "Moba5v5-v0", "VmasFootball-v0"])
    if world == "VmasFootball-v0" and not HAS_VMAS:
        world = "Moba5v5-v0"
    team = world in ("Moba5v5-v0", "VmasFootball-v0")
    heroes = {"Moba5v5-v0": pick(rng, [1, 3]), "VmasFootball-v0": pick(rng, [2, 3])}.get(world, 1)
    flags, steps = five_trainer(rng, pick(rng, [2, 4]) if team else pick(rng, [2, 4, 8]))
    references = {"Moba5v5-v0": ["random", "push"], "VmasFootball-v0": ["random", "chase"]}
    flags += ["--env-id", world, "--num-heroes", str(heroes), "--hidden-size", pick(rng, ["16", "32"])]
    flags += ["--references", *references.get(world, ["random", "greedy"])]
    if not team and rng.random() < 0.3:
        flags += ["--no-mirror"]  # the board's left-right images off (on by default)
    # team-world evaluations play whole games: only the last update's
    flags += ["--eval-every", "100" if team else str(pick(rng, [1, 2, 100]))]
    processes = 2 if rng.random() < 0.2 else 1
    updates = int(rng.integers(2, 4))
    flags += ["--total-timesteps", str(updates * steps * processes)]
    resume = team and world == "Moba5v5-v0" and rng.random() < 0.3
    return {"flags": flags, "processes": processes, "updates": updates, "resume": resume, "exact": resume}


def surgery_case(rng):
    flags, steps = five_trainer(rng, pick(rng, [2, 4]))
    flags += ["--env-id", "Moba5v5-v1", "--add-inputs", "--add-actions", "--eval-every", "100"]
    flags += ["--references", "random", "push", "--verify-games", "2", "--verify-steps", "16", "--parity-games", "2"]
    flags += ["--lr0-updates", str(pick(rng, [0, 1])), "--anneal-updates", str(pick(rng, [1, 2]))]
    if rng.random() < 0.5:
        flags += ["--widen-dense", str(pick(rng, [4, 8]))]
    if rng.random() < 0.3:
        flags += ["--widen-lstm", "4", "--lstm-scales", "0.01"]
    if rng.random() < 0.3:
        flags += ["--fold-inputs", "14", "15"]  # hero ids 3 and 4: always 0 in a team of 3
    updates = int(rng.integers(2, 4))
    flags += ["--total-timesteps", str(updates * steps)]
    resume = rng.random() < 0.3
    return {"flags": flags, "processes": 1, "updates": updates, "resume": resume, "exact": resume, "surgery": True}


def impala_case(rng):
    threads = pick(rng, [1, 2])
    envs = threads * pick(rng, [1, 2, 4])
    steps = pick(rng, [8, 16, 32])
    flags = ["--local-num-envs", str(envs), "--num-actor-threads", str(threads), "--num-steps", str(steps)]
    flags += ["--num-minibatches", str(divisor(rng, envs)), "--torch-threads", str(pick(rng, [1, 2]))]
    flags += ["--vtrace-lambda", str(pick(rng, [1.0, 0.9])), "--vtrace-rho-bar", str(pick(rng, [1.0, 0.5]))]
    flags += toggle(rng, "anneal-lr") + ["--save-every", "1", "--no-cuda"]
    if rng.random() < 0.3:
        flags += ["--sync"]
    else:
        flags += ["--policy-lag", str(pick(rng, [1, 2]))]
    processes = 2 if rng.random() < 0.2 else 1
    updates = int(rng.integers(3, 6))
    flags += ["--total-timesteps", str(updates * envs * steps * processes)]
    return {"flags": flags, "processes": processes, "updates": updates, "resume": rng.random() < 0.2, "exact": False}


def microrts_common(rng, envs):
    steps = pick(rng, [16, 32])
    # all divide the batch; 16 minibatches of 16 steps of one env hold one sample each: only without --norm-adv
    minibatches = pick(rng, [1, 2, 4, 16] if envs * steps > 16 else [1, 2, 4])
    flags = ["--num-steps", str(steps), "--num-minibatches", str(minibatches)]
    flags += ["--update-epochs", str(pick(rng, [1, 2])), "--max-steps", "100"]
    for name in ("norm-adv", "clip-vloss", "anneal-lr"):
        flags += toggle(rng, name)
    if rng.random() < 0.3:
        flags += ["--target-kl", str(pick(rng, [1e-9, 0.02]))]
    flags += ["--save-every", "1", "--no-cuda"]
    return flags, envs * steps


def gridnet_case(rng):
    selfplay, bots = pick(rng, [(0, 2), (2, 0), (2, 1), (2, 2)])
    flags, steps = microrts_common(rng, selfplay + bots)
    flags += ["--map-path", pick(rng, ["maps/4x4/basesWorkers4x4.xml", "maps/8x8/basesWorkers8x8.xml"])]
    flags += ["--num-selfplay-envs", str(selfplay), "--num-bot-envs", str(bots), "--bots", "passiveAI"]
    strategy = pick(rng, ["masking", "naive", "penalty"])
    flags += ["--strategy", strategy, "--eval-episodes", str(pick(rng, [0, 1]))]
    flags += ["--invalid-penalty", str(pick(rng, [0.0, -0.1]))] if strategy == "penalty" else []
    flags += ["--eval-games", "0"]
    updates = int(rng.integers(2, 4))
    flags += ["--total-timesteps", str(updates * steps)]
    return {"flags": flags, "processes": 1, "updates": updates, "resume": rng.random() < 0.2, "exact": False}


def guidance_case(rng):
    envs = pick(rng, [1, 2])
    flags, steps = microrts_common(rng, envs)
    flags += ["--map-path", "maps/4x4/basesWorkers4x4.xml", "--num-envs", str(envs), "--eval-episodes", "0"]
    flags += ["--task", pick(rng, ["LearnToAttack", "ProduceCombatUnits", "DefeatRandomEnemy"])]
    flags += ["--strategy", pick(rng, ["sparse", "shaped", "long-adaptation", "short-adaptation", "mixed-policy"])]
    if rng.random() < 0.4:
        flags += ["--plo"]
    updates = int(rng.integers(2, 4))
    flags += ["--total-timesteps", str(updates * steps)]
    return {"flags": flags, "processes": 1, "updates": updates, "resume": rng.random() < 0.2, "exact": False}


GENERATORS = {  # script: (its number in the seed, the case generator, needs)
    "ppo_lstm_selfplay": (0, selfplay_case, True),
    "five_surgery": (1, surgery_case, True),
    "cleanba_impala": (2, impala_case, True),
    "ppo_gridnet_masked": (3, gridnet_case, HAS_MICRORTS),
    "ppo_action_guidance": (4, guidance_case, HAS_MICRORTS),
}


def draw(script, i):
    number, generator, _ = GENERATORS[script]
    return generator(np.random.default_rng([SEED, number, i]))


@pytest.fixture(scope="module")
def v0_model(tmp_path_factory):
    """A Moba5v5-v0 model of ppo_lstm_selfplay.py (3 heroes a side) for five_surgery.py's cases."""
    cwd = tmp_path_factory.mktemp("v0")
    flags = ["--env-id", "Moba5v5-v0", "--num-heroes", "3", "--num-envs", "2", "--num-steps", "16", "--bptt-len"]
    flags += ["8", "--num-minibatches", "2", "--update-epochs", "1", "--total-timesteps", "64", "--hidden-size", "16"]
    flags += ["--eval-every", "100", "--eval-games", "1", "--reference-games", "1", "--references", "random", "push"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "cleanfive" / "ppo_lstm_selfplay.py"), *flags, "--save-model", "--no-cuda"],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (path,) = cwd.glob("runs/*/ppo_lstm_selfplay.cleanfive_model")
    return path


def command(script, case, v0_model):
    flags = [*case["flags"], *(["--checkpoint", str(v0_model)] if case.get("surgery") else [])]
    launcher = [sys.executable]
    if case["processes"] > 1:
        launcher += ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(case["processes"])]
    return [*launcher, str(ROOT / "cleanfive" / f"{script}.py"), *flags]


def run(cmd, cwd):
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)


def final_hash(result):
    hashes = HASH.findall(result.stdout)
    assert result.returncode == 0 and len(hashes) == 1, f"exit {result.returncode}\n{result.stderr[-4000:]}"
    return hashes[0]


# Runs a script with os.replace wrapped: once the script's atomic write puts a checkpoint of update >= STOP in place,
# the process kills itself (SIGKILL), so a case dies right after a drawn update however fast its updates run.
KILLER = """import os, runpy, signal, sys, torch
stop, script, replace = int(sys.argv[1]), sys.argv[2], os.replace
def replace_then_kill(src, dst, *rest, **kw):
    replace(src, dst, *rest, **kw)
    if str(dst).endswith("checkpoint.pt") and torch.load(dst, weights_only=True)["iteration"] >= stop:
        os.kill(os.getpid(), signal.SIGKILL)
os.replace, sys.argv = replace_then_kill, sys.argv[2:]
runpy.run_path(script, run_name="__main__")
"""


def killed_and_resumed(script, case, cwd, v0_model, stop_at):
    """Run the case until its checkpoint holds update >= stop_at, where it is SIGKILLed (torchrun then stops the other
    process), resume it. Returns the resumed run's hash and the update it resumed from."""
    cwd.mkdir(parents=True, exist_ok=True)
    (cwd / "killer.py").write_text(KILLER)
    cmd = command(script, case, v0_model)
    at = cmd.index(str(ROOT / "cleanfive" / f"{script}.py"))
    killed = run([*cmd[:at], str(cwd / "killer.py"), str(stop_at), *cmd[at:]], cwd)
    assert killed.returncode != 0, "the run ended before its checkpoint reached the update to kill it at"
    (path,) = cwd.glob("runs/*/checkpoint.pt")
    resumed_from = torch.load(path, weights_only=True)["iteration"]  # read now: the resumed run writes it again
    resume = {"flags": ["--resume", str(path)], "processes": case["processes"]}  # the checkpoint holds the rest
    return final_hash(run(command(script, resume, None), cwd)), resumed_from


def check(script, i, tmp_path, v0_model):
    case = draw(script, i)
    if not GENERATORS[script][2]:
        pytest.skip(f"{script}: {microrts_missing()}")
    whole = final_hash(run(command(script, case, v0_model), tmp_path / "whole"))
    if case["resume"]:
        stop_at = int(np.random.default_rng([SEED, 99, i]).integers(1, case["updates"]))
        resumed, case["resumed_from"] = killed_and_resumed(script, case, tmp_path / "killed", v0_model, stop_at)
        assert case["resumed_from"] == stop_at < case["updates"], case["resumed_from"]
        if case["exact"]:
            assert resumed == whole, f"resumed at update {case['resumed_from']} of {case['updates']}: {case['flags']}"
    return case


@pytest.mark.slow
@pytest.mark.parametrize(("script", "i"), [(script, i) for script in GENERATORS for i in range(SLOW_CASES)])
def test_drawn_flag_combination_runs(script, i, tmp_path, v0_model):
    case = check(script, i, tmp_path, v0_model)
    resumed = f" (from update {case['resumed_from']} of {case['updates']})" if case["resume"] else ""
    print(f"{script} case {i}: {' '.join(case['flags'])} processes={case['processes']}{resumed}")


def test_cases_are_drawn_alike_every_time():
    assert draw("ppo_lstm_selfplay", 3) == draw("ppo_lstm_selfplay", 3)
    flags = [" ".join(draw(s, i)["flags"]) for s in GENERATORS for i in range(SLOW_CASES)]
    assert len(set(flags)) >= 0.9 * len(flags)  # few cases alike (a small script's space holds repeats)
    # the generator reaches the crash of issue 39: one team sequence per minibatch, clipped per parameter
    reached = []
    for i in range(SLOW_CASES):
        f = draw("ppo_lstm_selfplay", i)["flags"]
        envs, steps, bptt, minibatches = (int(f[f.index(k) + 1]) for k in SPLIT)
        reached += [minibatches == steps // bptt * envs * 2 and "--clip-grad-per-param" in f]
    assert any(reached)


SPLIT = ("--num-envs", "--num-steps", "--bptt-len", "--num-minibatches")
