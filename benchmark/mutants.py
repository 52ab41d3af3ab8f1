"""Proof that the tests can fail: deliberate one-line bugs, each run against the default test run.

``BUGS`` lists realistic one-line bugs (a sign in GAE, the PPO clip coefficient, zero-sum, team spirit's schedule,
the quality update, PFSP's weight, the V-trace clip, a mask, a surgery fold, default values, the ratings key, ...):
each replaces one exact piece of one line by another, and changes numbers silently (none is a syntax error or a crash
on import, which any test would catch and which would prove nothing). For each bug the script copies the working tree
(its tracked files and the untracked ones git does not ignore: uncommitted tests count) into a temporary folder,
applies the bug there, and runs the default test command in the copy (``pytest`` with pyproject's addopts, so
``-m 'not slow'`` on two workers; the default run's quick files (``QUICK``) first, the whole run only if they all
pass) with this interpreter and its environment (``PYTHONPATH`` puts the copy's
``cleanfive`` before the installed one, for the scripts the tests start too; no bytecode is written). ``-x`` is added:
it stops a caught run at its first failure, so it only shortens a caught run, and an escaped run is the whole default
run. A bug is *caught* (the run failed; its first failing test is named), *escaped* (every test passed), or *stale*:
its original text is not in its file exactly once any more, as the tree moved; a stale bug is never counted as caught.
Unless ``--no-baseline``, the unchanged copy runs first and must pass: else every bug would look caught. The script
exits 1 if any bug escaped or is stale. ``--targeted`` runs each bug against only the test file expected to catch it
(quick, for a check while tests are written; not the proof). tests/test_mutants.py checks the list itself on every
test run: each original text is in its file exactly once, each bug changes one line, and the changed file stays
ruff-clean and keeps the docs' cited code, so that no bug is caught by a text check alone. Prints a table with the
commit, the machine and the date; a run of the whole list writes it into docs/benchmarks.md.

    uv run --all-extras python benchmark/mutants.py
    uv run --all-extras python benchmark/mutants.py --only gae_delta_sign pfsp_weight --no-docs
    uv run --all-extras python benchmark/mutants.py --targeted --no-baseline
    uv run --all-extras python benchmark/mutants.py --list
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import provenance as pv

PARSER = pv.parser(__file__, __doc__, extra=False)
PARSER.add_argument("--only", nargs="+", metavar="NAME", help="run these bugs only (names from --list)")
PARSER.add_argument("--list", action="store_true", help="list the bugs and the test file expected to catch each")
PARSER.add_argument("--targeted", action="store_true", help="run each bug against its expected test file only")
PARSER.add_argument("--no-baseline", action="store_true", help="skip the run of the unchanged copy")


@dataclass(frozen=True)
class Bug:
    name: str
    path: str  # the file, from the repository's root
    old: str  # a piece of one line, in the file exactly once
    new: str  # what replaces it
    what: str  # the bug, in words
    expect: str  # the test file expected to catch it (--targeted runs it alone)


LSTM, SURGERY, GRID, GUIDE = (
    f"cleanfive/{n}.py" for n in ("ppo_lstm_selfplay", "five_surgery", "ppo_gridnet_masked", "ppo_action_guidance")
)
IMPALA, LEAGUE, TEAMS, MOBA = (
    "cleanfive/cleanba_impala.py",
    "cleanfive/trueskill_league.py",
    "cleanfive/envs/teams.py",
    "cleanfive/envs/moba.py",
)
T_LSTM, T_SURGERY, T_GRID, T_GUIDE = (
    f"tests/test_{n}.py" for n in ("ppo_lstm_selfplay", "five_surgery", "ppo_gridnet_masked", "ppo_action_guidance")
)
T_IMPALA, T_LEAGUE, T_RATINGS = (
    "tests/test_cleanba_impala.py",
    "tests/test_trueskill_league.py",
    "tests/test_reference_ratings.py",
)

BUGS = [
    # GAE
    Bug(
        "gae_delta_sign",
        LSTM,
        "nextvalues * nextnonterminal - values[t]",
        "nextvalues * nextnonterminal + values[t]",
        "GAE's TD error adds V(s_t) instead of subtracting it",
        T_LSTM,
    ),
    Bug(
        "gae_sign_gridnet",
        GRID,
        "lastgaelam = delta + gamma * gae_lambda",
        "lastgaelam = delta - gamma * gae_lambda",
        "GAE subtracts the discounted next advantage",
        T_GRID,
    ),
    Bug(
        "gae_sign_guidance",
        GUIDE,
        "delta = rewards[t] + gamma * nextvalues",
        "delta = rewards[t] - gamma * nextvalues",
        "GAE's TD error subtracts gamma V(s_t+1)",
        T_GUIDE,
    ),
    Bug(
        "surgery_gae_lambda",
        SURGERY,
        "torch.where(active[t], gae_lambda, 1.0)",
        "torch.where(active[t], 1.0, gae_lambda)",
        "five_surgery's copy of gae: lambda on the waiting steps, 1 on the decisions",
        T_SURGERY,
    ),
    # PPO losses
    Bug(
        "clip_coef",
        LSTM,
        "1 - clip_coef, 1 + clip_coef",
        "1 - clip_coef, 1 + 2 * clip_coef",
        "the ratio's upper clip at 1 + 2 eps",
        T_LSTM,
    ),
    Bug(
        "pg_clip_min_gridnet",
        GRID,
        "return torch.max(-advantages * ratio",
        "return torch.min(-advantages * ratio",
        "the clipped surrogate takes the min of the two losses (an optimistic bound)",
        T_GRID,
    ),
    Bug(
        "value_clip_gridnet",
        GRID,
        "return 0.5 * torch.max(v_loss_unclipped",
        "return 0.5 * torch.min(v_loss_unclipped",
        "the clipped value loss takes the min of the clipped and unclipped losses",
        T_GRID,
    ),
    Bug(
        "value_clip_guidance",
        GUIDE,
        'v_loss = value_loss(newvalue, b["values"][mb_inds], b_returns[mb_inds], args.clip_coef,',
        'v_loss = value_loss(newvalue, b["values"][mb_inds], b_returns[mb_inds], args.vf_coef,',
        "the value clip range is vf_coef (0.5), not clip_coef (0.1)",
        T_GUIDE,
    ),
    Bug(
        "ent_coef_schedule",
        LSTM,
        "ent_coef = anneal(args.ent_coef, args.ent_coef_final, frac)",
        "ent_coef = anneal(args.ent_coef_final, args.ent_coef, frac)",
        "the entropy coefficient anneals from the final value to the start value",
        T_LSTM,
    ),
    Bug(
        "lr_anneal_impala",
        IMPALA,
        "frac = 1.0 - (update - 1.0) / args.num_updates",
        "frac = 1.0 - update / args.num_updates",
        "learning-rate annealing one update early (the last update at learning rate 0)",
        T_IMPALA,
    ),
    Bug(
        "lr_anneal_gridnet",
        GRID,
        "frac = 1.0 - (iteration - 1.0) / args.num_iterations",
        "frac = (iteration - 1.0) / args.num_iterations",
        "the learning rate rises from 0 instead of annealing to 0",
        T_GRID,
    ),
    # rewards
    Bug(
        "zero_sum",
        LSTM,
        "parts = parts - parts[:, :, ::-1].mean(",
        "parts = parts - parts[:, :, :].mean(",
        "zero-sum subtracts the hero's own team's mean, not the enemies'",
        T_LSTM,
    ),
    Bug(
        "surgery_zero_sum",
        SURGERY,
        "parts[:, :, ::-1].mean(-1, keepdims=True)",
        "parts[:, :, ::-1].sum(-1, keepdims=True)",
        "five_surgery's copy of shape_rewards: zero-sum subtracts the enemies' sum, not their mean",
        T_SURGERY,
    ),
    Bug(
        "team_spirit_schedule",
        LSTM,
        "tau = anneal(args.team_spirit_start, args.team_spirit_end, frac)",
        "tau = anneal(args.team_spirit_end, args.team_spirit_start, frac)",
        "team spirit anneals from its end value to its start value",
        T_LSTM,
    ),
    Bug(
        "time_decay_win",
        LSTM,
        "return parts[0] + decay[:, None, None] * parts[1]",
        "return decay[:, None, None] * (parts[0] + parts[1])",
        "time decay applies to the win too",
        T_LSTM,
    ),
    Bug(
        "moba_shaping_denies",
        MOBA,
        '"denies": 0.15,',
        '"denies": 0.2,',
        "a reward-shaping weight of the lane world",
        T_RATINGS,
    ),
    # normalisation
    Bug(
        "update_moments_mean",
        LSTM,
        "new_mean = mean + delta * batch_count / total",
        "new_mean = mean + delta * count / total",
        "the running mean weights the batch by the old count",
        T_LSTM,
    ),
    Bug(
        "surgery_update_moments",
        SURGERY,
        "delta**2 * count * batch_count / total) / total",
        "delta**2 * count * batch_count) / total",
        "five_surgery's copy of update_moments: the cross term of the merged variance without its 1 / total",
        T_SURGERY,
    ),
    # opponent sampling and ratings
    Bug(
        "quality_update",
        LEAGUE,
        "self.eta / (len(self.keys) * self.probabilities()[index])",
        "self.eta / self.probabilities()[index]",
        "the quality update q_i -= eta / p_i, without N",
        T_LEAGUE,
    ),
    Bug(
        "quality_update_on_loss",
        LSTM,
        "pool.record_game(k, score)",
        "pool.record_game(k, 1.0 - score)",
        "matchmaking records the past version's score: a loss lowers its quality",
        T_LSTM,
    ),
    Bug(
        "pfsp_weight",
        LEAGUE,
        "f = (1.0 - self.win_rates()) ** 2",
        "f = (1.0 - self.win_rates()) * 2",
        "PFSP's weight (1 - x) * 2, linear once normalised, not squared",
        T_LEAGUE,
    ),
    Bug("pfsp_decay", LEAGUE, "PFSP_DECAY = 0.99", "PFSP_DECAY = 0.9", "PFSP's win-rate decay per game", T_LEAGUE),
    Bug(
        "trueskill_beta",
        LEAGUE,
        "BETA, TAU, DRAW_PROBABILITY = SIGMA0 / 2,",
        "BETA, TAU, DRAW_PROBABILITY = SIGMA0,",
        "TrueSkill's beta is sigma0, not sigma0 / 2",
        T_LEAGUE,
    ),
    Bug(
        "ratings_key",
        TEAMS,
        'env_id, f"{env.num_heroes}_heroes", *references',
        "env_id, *references",
        "the ratings key leaves out the team size",
        T_RATINGS,
    ),
    # V-trace
    Bug(
        "vtrace_c_clip",
        IMPALA,
        "cs = lam * rhos.clamp(max=c_bar)",
        "cs = lam * rhos",
        "V-trace's traces c_s unclipped",
        T_IMPALA,
    ),
    Bug(
        "vtrace_pg_clip",
        IMPALA,
        "rhos.clamp(max=pg_rho_bar)",
        "rhos.clamp(max=rho_bar)",
        "V-trace's policy-gradient ratios clipped at rho-bar, not rho-bar_pg",
        T_IMPALA,
    ),
    # masks and surgery
    Bug(
        "mask_sampling",
        GRID,
        "noisy = (masked if sample_masked else logits)",
        "noisy = (logits if sample_masked else masked)",
        "invalid-action masking samples from the raw logits",
        T_GRID,
    ),
    Bug(
        "surgery_fold",
        SURGERY,
        'state["encoder.0.bias"] + state["encoder.0.weight"][:, drop] @ x',
        'state["encoder.0.bias"] - state["encoder.0.weight"][:, drop] @ x',
        "fold_inputs subtracts W x from the bias",
        T_SURGERY,
    ),
    Bug(
        "surgery_widen_dense",
        SURGERY,
        "torch.cat([w2, w2.new_zeros(len(w2), extra)], 1)",
        "torch.cat([w2, w2.new_ones(len(w2), extra)], 1)",
        "widen_dense gives the second layer ones, not zeros, from the new units",
        T_SURGERY,
    ),
    # defaults
    Bug(
        "default_gae_lambda",
        LSTM,
        "gae_lambda: float = 0.95",
        "gae_lambda: float = 0.9",
        "Args default gae_lambda 0.9",
        T_LSTM,
    ),
    Bug(
        "default_team_spirit_end",
        LSTM,
        "team_spirit_end: float = 1.0",
        "team_spirit_end: float = 0.8",
        "Args default team spirit's final value 0.8",
        T_LSTM,
    ),
    Bug(
        "default_update_epochs",
        GRID,
        "update_epochs: int = 4",
        "update_epochs: int = 3",
        "Args default update_epochs 3",
        T_GRID,
    ),
    Bug(
        "default_ent_coef",
        GUIDE,
        "ent_coef: float = 0.01",
        "ent_coef: float = 0.02",
        "Args default ent_coef 0.02",
        T_GUIDE,
    ),
    Bug(
        "default_vf_coef",
        IMPALA,
        "vf_coef: float = 0.5",
        "vf_coef: float = 0.25",
        "Args default vf_coef 0.25",
        T_IMPALA,
    ),
    Bug(
        "world_default",
        TEAMS,
        "num_envs=32, bot_fraction=0.2,",
        "num_envs=32, bot_fraction=0.3,",
        "the lane world's default bot_fraction 0.3",
        T_LSTM,
    ),
]


class Stale(Exception):
    """A bug's original text is not in its file exactly once: the tree moved."""


def apply(bug: Bug, text: str) -> str:
    """``text`` (the file's) with ``bug`` applied; :class:`Stale` unless its original text occurs exactly once."""
    if (count := text.count(bug.old)) != 1:
        raise Stale(f"{bug.name}: {bug.old!r} occurs {count} times in {bug.path}, not once")
    return text.replace(bug.old, bug.new)


def tree_files() -> list[str]:
    """The working tree's files as the tests see them: tracked (as they are now) and untracked ones git does not
    ignore."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=pv.ROOT, capture_output=True)
    pv.check(listed.returncode == 0, f"git ls-files failed in {pv.ROOT}: {listed.stderr.decode()}")
    return [name for name in listed.stdout.decode().split("\0") if name and (pv.ROOT / name).is_file()]


def copy_tree(files: list[str], folder: Path) -> None:
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(pv.ROOT / name, folder / name)


def run_tests(folder: Path, paths: list[str], name: str) -> tuple[int, str, float]:
    """The default test command with ``-x`` in ``folder`` (only ``paths`` if given): its exit code, the first failing
    test's id (else pytest's summary, ``512 passed, 3 skipped``: what an escaped bug ran through) and its seconds."""
    # $CLEANFIVE_MUTANT: tests/test_mutants.py, which checks that every bug's original text is in the tree, takes
    # this bug out again (else it, not a test of what the code computes, would catch every bug)
    env = os.environ | {"PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1", "CLEANFIVE_MUTANT": name}
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "-x", "-p", "no:cacheprovider", *paths]
    start = time.time()
    result = subprocess.run(cmd, cwd=folder, capture_output=True, text=True, env=env)
    seconds = time.time() - start
    found = re.search(r"^(?:FAILED|ERROR) (\S+)", result.stdout, re.M)
    summary = re.findall(r"^=+ (.+?) in [\d.]+s", result.stdout, re.M)  # pytest's last line: 32 passed, ...
    lines = (result.stdout + result.stderr).strip().splitlines()
    said = found[1] if found else summary[-1] if summary else lines[-1][:120] if lines else "no output"
    return result.returncode, said, seconds


# test files of the default run that take seconds: each bug runs against them first, and against the whole default run
# only if they all pass (a failure among them is a failure of the default run, which holds them, with its options)
QUICK = [
    "tests/test_golden_defaults.py",
    "tests/test_ppo_maths.py",
    "tests/test_trueskill_league.py",
    "tests/test_reference_ratings.py",
    "tests/test_moba.py",
]


def run_bug(bug: Bug | None, files: list[str], targeted: list[str]) -> dict:
    """Copy the tree, apply ``bug`` (None: the baseline), run the tests; the row of the table."""
    row = {"name": bug.name if bug else "(no bug: baseline)", "path": bug.path if bug else "", "test": "", "seconds": 0}
    with tempfile.TemporaryDirectory(prefix="cleanfive_mutant_") as folder:
        copy_tree(files, Path(folder))
        if bug:
            target = Path(folder) / bug.path
            try:
                target.write_text(apply(bug, target.read_text()))
            except Stale as exc:
                return row | {"result": "stale", "test": str(exc)}
        if bug and not targeted:  # the default run's quick files first: a bug they catch, the default run catches
            rc, test, seconds = run_tests(Path(folder), QUICK, bug.name)
            if rc in (1, 2):
                return row | {"result": "caught", "test": test, "seconds": seconds}
        rc, test, more = run_tests(Path(folder), targeted, bug.name if bug else "")
        seconds = more + (seconds if bug and not targeted else 0)
    result = "passed" if rc == 0 and not bug else "escaped" if rc == 0 else "caught" if rc in (1, 2) else f"error {rc}"
    return row | {"result": result, "test": test, "seconds": seconds}


if __name__ == "__main__":
    args = PARSER.parse_args()
    names = {bug.name for bug in BUGS}
    unknown = sorted(set(args.only or ()) - names)
    pv.check(not unknown, f"--only: no bug {unknown}; --list lists them")
    chosen = [bug for bug in BUGS if not args.only or bug.name in args.only]
    if args.list:
        for bug in chosen:
            print(f"{bug.name:<24} {bug.path:<34} {bug.expect:<34} {bug.what}")
        sys.exit(0)
    code, files, rows = pv.code_version("cleanfive", "tests"), tree_files(), []
    if not args.no_baseline:
        paths = sorted({bug.expect for bug in chosen}) if args.targeted else []
        rows.append(baseline := run_bug(None, files, paths))
        print(f"baseline: {baseline['result']} in {baseline['seconds']:.0f} s {baseline['test']}", flush=True)
        if baseline["result"] != "passed":
            sys.exit(f"the unchanged tree does not pass its tests ({baseline['test']}): no bug can be told caught")
    for bug in chosen:
        rows.append(row := run_bug(bug, files, [bug.expect] if args.targeted else []))
        print(f"{bug.name}: {row['result']} in {row['seconds']:.0f} s {row['test']}", flush=True)
    what = {bug.name: bug.what for bug in BUGS}
    caught = sum(row["result"] == "caught" for row in rows)
    runs = "each against its expected test file only (`--targeted`)" if args.targeted else "the default test run"
    note = f" {caught} of {len(chosen)} bugs caught by {runs}, with `-x`: a caught run stops at its first failure."
    table = [
        *pv.header(PARSER, args, code, "", note),
        "| bug | file | what it changes | result | first failing test (or what passed) | s |",
    ]
    table.append("|---|---|---|---|---|---:|")
    for row in rows:
        cells = [
            f"`{row['name']}`",
            f"`{row['path']}`" if row["path"] else "",
            what.get(row["name"], ""),
            row["result"],
        ]
        table.append(f"| {' | '.join(cells)} | {row['test'].replace('|', '/')} | {row['seconds']:.0f} |")
    print("\n".join(table))
    if not args.no_docs and not args.only:
        pv.write_block(pv.ROOT / "docs" / "benchmarks.md", "mutants", "\n".join(table))
    sys.exit(0 if all(row["result"] in ("caught", "passed") for row in rows) else 1)
