"""Repository-level checks: lint, docs build, and the CI entry point's exit-code handling."""

import contextlib
import hashlib
import importlib
import io
import json
import math
import os
import re
import runpy
import shlex
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def test_ruff_lint_and_format_clean():
    subprocess.run([BIN / "ruff", "check", str(ROOT)], check=True, cwd=ROOT)
    subprocess.run([BIN / "ruff", "format", "--check", str(ROOT)], check=True, cwd=ROOT)


def test_docs_build_strict(tmp_path):
    subprocess.run(
        [BIN / "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        check=True,
        cwd=ROOT,
    )
    assert (tmp_path / "site" / "index.html").exists()
    # a list right after a paragraph's line (no blank line between) renders as that paragraph's text
    for page in (tmp_path / "site").rglob("*.html"):
        for paragraph in re.findall(r"<p>(.*?)</p>", page.read_text(), re.S):
            assert "\n- " not in paragraph, f"{page.relative_to(tmp_path)}: a list in a paragraph: {paragraph[:80]}"


@pytest.mark.parametrize(("pytest_exit", "ci_fails"), [(0, False), (1, True), (2, True), (5, True)])
def test_ci_run_exit_codes(tmp_path, pytest_exit, ci_fails):
    """.ci/run must fail when tests fail and when pytest collects nothing (exit 5)."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    fake_uv = fake_bin / "uv"
    fake_uv.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "args"}\nexit {pytest_exit}\n')
    fake_uv.chmod(fake_uv.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{fake_bin}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True)
    assert (result.returncode != 0) == ci_fails
    # CI runs exactly the README's test command
    assert (tmp_path / "args").read_text().strip() == "run --all-extras pytest"
    readme = (ROOT / "README.md").read_text()
    assert "uv run --all-extras pytest" in readme


# convert_saved.py: a one-off converter of old model files (docs/arena.md, Model files), not a script with a page
SCRIPTS = sorted(
    p.stem for p in (ROOT / "cleanfive").glob("*.py") if p.stem not in ("__init__", "trueskill_league", "convert_saved")
)
TOOLS = ("arena", "convert_saved")  # programs that play or convert saved models: no run management, no resume
LINE_REF = re.compile(r"\(lines? (\d+)(?:–(\d+))?: `([^`]+)`\)")


@pytest.mark.parametrize("name", SCRIPTS)
def test_implementation_details_cite_the_lines_that_hold_them(name):
    """Every numbered implementation detail of a script's docs page names a line range and a piece of code in it.

    When the script changes and the code moves, this fails and says where the code is now.
    """
    doc = (ROOT / "docs" / f"{name}.md").read_text()
    assert "## Implementation details" in doc, f"docs/{name}.md has no 'Implementation details' section"
    section = doc.split("## Implementation details", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"(?m)^\d+\. \*\*.*$", section)
    assert items, f"docs/{name}.md lists no numbered implementation details"
    lines = (ROOT / "cleanfive" / f"{name}.py").read_text().splitlines()
    for item in items:
        ref = LINE_REF.search(item)
        assert ref, f"docs/{name}.md: this detail names no `(lines A–B: `code`)`: {item[:100]}"
        first, last, code = int(ref[1]), int(ref[2] or ref[1]), ref[3]
        now = [i + 1 for i, line in enumerate(lines) if code in line]
        assert first <= last <= len(lines), f"docs/{name}.md cites lines {first}–{last} of a {len(lines)}-line file"
        assert code in "\n".join(lines[first - 1 : last]), (
            f"docs/{name}.md cites lines {first}–{last} of cleanfive/{name}.py for `{code}`, which is now at {now}"
        )


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_line_citation_on_a_scripts_page_holds(name):
    """Every line number a script's docs page gives, in prose too, is a checked citation `(lines A–B: `code`)` whose
    code lies in those lines of the script (another file's code is named, not cited by line)."""
    doc = (ROOT / "docs" / f"{name}.md").read_text()
    lines = (ROOT / "cleanfive" / f"{name}.py").read_text().splitlines()
    cited = [(ref.start(), ref.end()) for ref in LINE_REF.finditer(doc)]
    for mention in re.finditer(r"\blines? \d+", doc):
        assert any(start <= mention.start() < end for start, end in cited), (
            f"docs/{name}.md: `{doc[mention.start() : mention.end() + 20]}...` is not in the checked form "
            "`(lines A–B: `code`)`"
        )
    for ref in LINE_REF.finditer(doc):
        first, last, code = int(ref[1]), int(ref[2] or ref[1]), ref[3]
        now = [i + 1 for i, line in enumerate(lines) if code in line]
        assert first <= last <= len(lines) and code in "\n".join(lines[first - 1 : last]), (
            f"docs/{name}.md cites lines {first}–{last} of cleanfive/{name}.py for `{code}`, which is now at {now}"
        )


sys.path.insert(0, str(ROOT / "benchmark"))  # the benchmarks import their provenance helper from their folder
import provenance  # noqa: E402

BENCHMARKS = sorted(p.stem for p in (ROOT / "benchmark").glob("*.py") if p.name != "provenance.py")
SCRIPT = re.compile(r"((?:benchmark|cleanfive)/\w+\.py)(.*)", re.S)  # a script and what follows it


def benchmark(name: str):
    """The module of benchmark/<name>.py, imported without running it."""
    return importlib.import_module(name)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_scripts_import_and_describe_their_flags(name):
    """Every benchmark imports (provenance helpers, the script's own imports), says what it does, and every flag of
    its parser says what it is for."""
    parser = benchmark(name).PARSER
    assert parser.description and len(parser.description.split()) >= 10, f"benchmark/{name}.py describes nothing"
    for action in parser._actions:
        assert action.help and action.help.strip(), f"benchmark/{name}.py: {action.option_strings} has no help"
        assert all(option in parser.format_help() for option in action.option_strings)


def documented_commands() -> list[tuple[str, str, list[str] | None]]:
    """(where, script, words after it) of every command of a benchmark/*.py or cleanfive/*.py script in README.md and
    docs/*.md: each line of a fenced code block that names one (backslash continuations joined, # comments dropped),
    and each inline code span that starts with one, or with `uv run ... python` and one (words None: the script's
    name alone, a mention)."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)
        lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
        spans = re.findall(
            r"`((?:uv run [^`]*?python )?(?:benchmark|cleanfive)/\w+\.py[^`]*)`",
            re.sub(r"^```.*?^```", "", text, flags=re.S | re.M),
        )
        for command in [*lines, *spans]:
            if match := SCRIPT.search(command):
                words = shlex.split(match[2], comments=True)  # a bare name is a mention, not a command: None
                words = None if not words and command.startswith(match[1]) else words
                found.append((f"{page.relative_to(ROOT)}: {command[:100]}", match[1], words))
    return found


def git_history() -> bool:
    """Whether this tree is a git checkout (a copy of its files is not: --script-at has no commits to read there)."""
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode == 0


def test_documented_commands_run_as_written():
    """Every command the docs print names a script that exists and passes only flags that it accepts: a benchmark's
    own flags parse with its parser (values and choices included), and the flags after `--` (and a cleanfive
    script's flags) are fields of the training script's `Args`. Cheap: no script is run."""
    commands = documented_commands()
    undocumented = {f"benchmark/{name}.py" for name in BENCHMARKS} - {script for _, script, _ in commands}
    assert not undocumented, f"no command of {sorted(undocumented)} in the docs"
    for where, script, words in commands:
        assert (ROOT / script).is_file(), f"{where}: {script} does not exist"
        if words is None:
            continue
        own, extra = (words[: words.index("--")], words[words.index("--") + 1 :]) if "--" in words else (words, [])
        if script.startswith("cleanfive/"):
            own, extra, trainers = [], words, [ROOT / script]
        else:
            module = benchmark(Path(script).stem)
            try:
                parsed = module.PARSER.parse_args(own)
            except SystemExit as exc:
                pytest.fail(f"{where}: {script} rejects {own} (exit code {exc.code})")
            trainers = [getattr(module, name) for name in ("SCRIPT", "PARENT", "SURGERY") if hasattr(module, name)]
            if getattr(parsed, "script_at", None):  # the script of that commit trains: its flags
                if not git_history():  # a copy of the tree without it (benchmark/mutants.py's): nothing to read
                    continue
                trainers = [provenance.script_at(parsed.script_at, trainer) for trainer in trainers]
        flags = {word.split("=")[0] for word in extra if re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", word)}
        for trainer in trainers if flags else []:
            unknown = flags - provenance.script_flags(trainer)
            assert not unknown, f"{where}: {trainer.name} has no {sorted(unknown)}"


def test_learning_plots_show_each_bots_mean_over_the_seeds_with_a_band():
    """benchmark/ppo_lstm_selfplay_learning.py's plots: one line a bot, the mean of the seeds' lines (each interpolated
    within its own span onto a common grid), and a band over the seeds' range; a single seed draws its line alone."""
    module = benchmark("ppo_lstm_selfplay_learning")
    fig, ax = provenance.subplots()
    module.mean_band(ax, [([0, 10], [0.0, 1.0]), ([0, 5, 10], [0.2, 0.2, 0.2])], "C0", "vs random", points=11)
    (line,) = ax.get_lines()
    x, y = line.get_data()
    assert x[5] == 5 and abs(y[5] - (0.5 + 0.2) / 2) < 1e-9 and line.get_label() == "vs random"
    assert len(ax.collections) == 1  # the band
    fig, ax = provenance.subplots()
    module.mean_band(ax, [([2, 4], [0.1, 0.3])], "C1", "vs greedy", points=3)
    assert ax.get_lines()[0].get_data()[1].tolist() == [0.1, 0.2, 0.3] and not ax.collections


# (the reports of runs and models take files, not a table's settings)
REPORTS = ("ppo_lstm_selfplay_scores", "connect4_tactics", "bundled_models", "board_table")


@pytest.mark.parametrize("name", [name for name in BENCHMARKS if name not in REPORTS])
def test_the_command_a_table_prints_gives_back_its_arguments(name):
    """The command line above a table (provenance.command) parses back to the arguments that made the table, for the
    defaults and for every documented command (--no-docs and --jobs aside: they do not change the table)."""
    module = benchmark(name)
    for words in [
        [],
        *(words for _, script, words in documented_commands() if words and script.endswith(f"/{name}.py")),
    ]:
        args = module.PARSER.parse_args(words)
        again = module.PARSER.parse_args(shlex.split(provenance.command(module.PARSER, args))[5:])
        assert {**vars(again), "no_docs": 0, "jobs": 0} == {**vars(args), "no_docs": 0, "jobs": 0}, words


def test_every_block_lives_on_one_page_and_its_benchmark_finds_it():
    """A generated block may move from the page its benchmark names (a script page) to another (the research log):
    provenance.block_page still finds it there, and no block name is on two pages, so it cannot pick the wrong one."""
    pages = {}
    for page in sorted((ROOT / "docs").glob("*.md")):
        for name in re.findall(r"<!-- BENCHMARK:(\S+) BEGIN -->", page.read_text()):
            assert name not in pages, f"block {name} is on {pages[name].name} and {page.name}"
            pages[name] = page
    assert "connect4_d6109ad" in pages and "connect4" in pages
    for name, page in pages.items():
        assert provenance.block_page(ROOT / "docs" / "ppo_lstm_selfplay.md", name) == page, name


def test_over_seeds_spread_counts_only_seeds_with_a_value():
    from provenance import over_seeds

    assert over_seeds([1.0, float("nan"), 3.0], ".2f") == "2.00 ± 1.00 (2/3 seeds)"  # std of {1, 3} is 1
    assert over_seeds([120.0, float("inf"), 240.0], ".1f", scale=60) == "3.0 ± 1.0 (2/3 seeds)"
    assert over_seeds([5.0], ".3g") == "5 (1/1 seeds)"
    assert over_seeds([float("nan"), float("nan")]) == "not reached (0/2)"


def test_a_ladder_runs_eval_line_gives_its_rung_and_its_bots():
    from provenance import eval_row

    line = "eval time=9.5s global_step=4096 trueskill_mu=1.20 sigma=0.80 win_vs_random=0.50 bots_in_play=2"
    assert eval_row(line) == {"time": 9.5, "step": 4096, "mu": 1.2, "random": 0.5, "bots_in_play": 2}
    assert "bots_in_play" not in eval_row(line.removesuffix(" bots_in_play=2"))
    ladder_bots = benchmark("ppo_lstm_selfplay_learning").ladder_bots
    extra = ["--bot-opponents", "random", "vmas_ai50", "--bot-ladder", "0.5", "--save-model"]
    assert ladder_bots(extra) == ["random", "vmas_ai50"]
    assert ladder_bots(extra[:3]) == [] and ladder_bots(extra[3:]) == []  # no ladder; the world's own bots


def test_the_learning_benchmark_names_the_seeds_its_budget_stopped():
    stopped_by_budget = benchmark("ppo_lstm_selfplay_learning").stopped_by_budget
    rows = [{"step": 393216}, {"step": 9043968}]
    found = {1: {"rows": rows}, 2: {"rows": rows, "model": "runs/x/model.pt"}, 3: None, 4: {"rows": []}}
    assert stopped_by_budget(found, ["--save-model"]) == ["seed 1 at 9.04M steps"]
    assert stopped_by_budget(found, []) == []  # without --save-model no run saves a model: none is told apart


def test_the_learning_benchmark_keeps_a_run_that_ended_within_another_budget(tmp_path, monkeypatch):
    """--from-results with another --minutes: a kept run that ended (its model saved) before this budget would have
    stopped it is the same run, and the table names its budget; one that used more than this budget is not."""
    bench = benchmark("ppo_lstm_selfplay_learning")
    monkeypatch.setattr(bench, "final_table", lambda model, seed, args: {"games": 8})
    args = bench.PARSER.parse_args(["--seeds", "1", "--clock", "cpu", "--jobs", "2", "--from-results"])
    args.results = tmp_path
    identity = {"env_id": args.env_id, "seed": 1, "minutes": 125.0, "clock": "cpu", "threads": 1, "extra": []}
    run = identity | {"rows": [{"step": 4096, "cpu": 6027.5, "time": 6074.4}], "model": "m", "final": {"games": 8}}
    bench.pv.keep(tmp_path / "block" / "seed1.json", run | {"date": "2026-11-29 10:47 UTC", "code": "abc1234"})
    for minutes, kept in [(200.0, True), (125.0, True), (100.5, True), (100.0, False)]:
        args.minutes = minutes
        assert (bench.kept_or_train(1, "block", args) is not None) == kept, minutes
    assert bench.other_budget_seeds({1: run, 2: None}, 200.0) == ["seed 1 (budget 125, ended at 100.5)"]
    assert bench.other_budget_seeds({1: run}, 125.0) == []


def test_the_learning_benchmark_keeps_which_file_its_final_table_played(tmp_path, monkeypatch):
    """A final table names the file it played by its SHA-256: a table can be matched to a model kept elsewhere."""
    bench = benchmark("ppo_lstm_selfplay_learning")
    monkeypatch.setattr(bench.board_table, "final_table", lambda model, games, seed: {"games": games})
    monkeypatch.setattr(
        bench.connect4_judge, "judge", lambda model: {"judged": model}
    )  # (tests/test_connect4_judge.py)
    model = tmp_path / "model.cleanfive_model"
    model.write_bytes(b"weights")
    args = bench.PARSER.parse_args(["--env-id", "ConnectFour-v1", "--final-games", "8"])
    final = bench.final_table(str(model), 1, args)
    assert final == {
        "games": 8,
        "model_sha256": hashlib.sha256(b"weights").hexdigest(),
        "judge": {"judged": str(model)},
    }


def test_a_resumable_learning_run_stopped_midway_goes_on_from_its_checkpoint(tmp_path, monkeypatch):
    """--resumable: the first sitting is stopped after its second evaluation, whose checkpoint was not yet written;
    the second goes on from the first one's (global_step 2048), drops the kept evaluation after it, adds the clocks
    of the first evaluation to its own and keeps the first sitting's start (its budget may have grown); the kept rows
    go once the run has ended, and stay when the budget stops a run (a larger one goes on from there)."""
    bench = benchmark("ppo_lstm_selfplay_learning")
    args = bench.PARSER.parse_args(["--seeds", "1", "--clock", "cpu", "--resumable", "--", "--eval-every", "2"])
    args.extra += ["--save-model"]
    checkpoint = tmp_path / "runs" / "ConnectFour-v1__ppo_lstm_selfplay__block__1__7" / "checkpoint.pt"
    other = tmp_path / "runs" / "ConnectFour-v1__ppo_lstm_selfplay__other__1__9"  # another block's run of seed 1
    so_far = tmp_path / "block" / "seed1.so_far.json"
    identity = {"seed": 1, "extra": args.extra, "code": "abc1234", "minutes": 30.0}
    first = [("eval time=10.0s global_step=2048 trueskill_mu=1.00 sigma=2.00 win_vs_random=0.50", 8.0)]
    first += [("eval time=20.0s global_step=4096 trueskill_mu=2.00 sigma=1.90 win_vs_random=0.60", 16.0)]
    first += [("stop", None)]  # killed before the second evaluation's checkpoint
    second = [("resumed from x at update 2 (global_step 2048)", 1.0)]
    second += [("eval time=11.0s global_step=4096 trueskill_mu=3.00 sigma=1.80 win_vs_random=0.70", 9.0)]
    second += [("model saved to runs/m.cleanfive_model", 10.0)]
    commands = []

    def sitting(lines):
        def stream(cmd, threads):  # as the script: its run's folder from the start, a checkpoint after each evaluation
            commands.append(cmd)
            assert cmd[cmd.index("--exp-name") + 1] == "ppo_lstm_selfplay__block"
            checkpoint.parent.mkdir(parents=True, exist_ok=True)
            other.mkdir(exist_ok=True)
            os.utime(other, (time.time() + 5, time.time() + 5))  # the newest folder of seed 1
            for line, cpu in lines:
                if line == "stop":
                    raise KeyboardInterrupt
                yield line, cpu
                if cpu == 8.0:
                    checkpoint.write_text("the checkpoint of global_step 2048")

        return stream

    monkeypatch.setattr(bench.pv, "ROOT", tmp_path)
    monkeypatch.setattr(bench, "final_table", lambda model, seed, args: {"games": 8})
    monkeypatch.setattr(bench.pv, "stream", sitting(first))
    with pytest.raises(KeyboardInterrupt):
        bench.run_seed(1, args, so_far, identity)
    kept = json.loads(so_far.read_text())
    assert [row["step"] for row in kept["rows"]] == [2048, 4096] and kept["checkpoint"] == str(checkpoint)
    monkeypatch.setattr(bench.pv, "stream", sitting(second))
    run = bench.run_seed(1, args, so_far, identity | {"minutes": 45.0})  # a larger budget for the second sitting
    assert commands[0][commands[0].index("--save-every") + 1] == "2" and "--resume" not in commands[0]
    assert commands[1][commands[1].index("--resume") + 1] == str(checkpoint)
    assert [(row["step"], row["time"], row["cpu"], row["mu"]) for row in run["rows"]] == [
        (2048, 10.0, 8.0, 1.0),
        (4096, 21.0, 17.0, 3.0),  # the second sitting's clocks after those of the checkpoint's evaluation
    ]
    assert run["resumed"] == [2048] and run["started"] == kept["started"] and run["final"] == {"games": 8}
    assert not so_far.exists()
    monkeypatch.setattr(bench.pv, "stream", sitting(first[:1]))
    args.minutes = 0.1  # 6 s of the run's own clock: stopped by the budget at its first evaluation (8 s)
    assert "model" not in bench.run_seed(1, args, so_far, identity | {"minutes": 0.1})
    assert so_far.exists()  # kept: a larger budget goes on from its checkpoint
    assert bench.resumed_seeds({1: run, 2: None, 3: {"rows": []}}) == ["seed 1 at step 2,048"]


def in_process(cmd):
    """`cmd` ([python, benchmark/<name>.py, *flags]) run in this process, from the repository's root, as a fresh
    interpreter would run it but without its 3 s of imports: a CompletedProcess with the exit code, stdout and
    stderr (a benchmark's messages and tables go through sys.stdout and sys.stderr)."""
    assert cmd[0] == sys.executable and Path(cmd[1]).parent == ROOT / "benchmark", cmd
    out, err, argv = io.StringIO(), io.StringIO(), sys.argv
    sys.argv = [str(c) for c in cmd[1:]]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(ROOT):
            runpy.run_path(str(cmd[1]), run_name="__main__")
        code = 0
    except SystemExit as stop:  # sys.exit(message) prints it and exits 1, as the interpreter does
        code = stop.code if isinstance(stop.code, int) or stop.code is None else 1
        err.write("" if isinstance(stop.code, int) or stop.code is None else f"{stop.code}\n")
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess(cmd, code or 0, out.getvalue(), err.getvalue())


def test_scores_report_averages_the_last_fraction_of_each_run(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "runs" / "Moba5v5-v0__ppo_lstm_selfplay__1__0"
    writer = SummaryWriter(str(run))
    for step, (towers, deaths) in zip(
        [100, 200, 300, 400], [(0.0, 4.0), (1.0, 3.0), (5.0, 2.0), (7.0, 0.0)], strict=True
    ):
        writer.add_scalar("scores/tower1", towers, step)
        writer.add_scalar("scores/deaths", deaths, step)
    for step, outcome, length in [(100, 1.0, 50), (300, 1.0, 120), (300, -1.0, 80), (400, 0.0, 800), (400, 1.0, 200)]:
        writer.add_scalar("charts/episodic_return", outcome, step)  # one point per game, several at one step
        writer.add_scalar("charts/episodic_length", length, step)
    writer.close()
    cmd = [sys.executable, str(ROOT / "benchmark" / "ppo_lstm_selfplay_scores.py"), str(run), "--fraction", "0.5"]
    result = in_process([*cmd, "--labels", "s1", "--no-docs"])
    assert result.returncode == 0, result.stderr[-2000:]
    # the last half of 400 steps holds the points at 200, 300 and 400
    assert "| `tower1` | 4.33 |" in result.stdout
    assert "| `deaths` | 1.67 |" in result.stdout
    assert "| points read (steps where games ended) | 3 |" in result.stdout
    assert "episodic_return" not in result.stdout
    # the games that ended at steps 300 and 400 (the one at 100 is outside the last half)
    assert "| games ended in those steps: won / lost / drawn | 2 / 1 / 1 |" in result.stdout
    assert "| their length in steps: mean (min–max) | 300 (80–800) |" in result.stdout


def test_table81_tabulates_kept_runs_and_counts_the_missing_ones(tmp_path):
    """--from-results builds Table 8.1 from the kept per-run files alone: a seed without a file is counted as missing,
    and a file trained with another budget is not reused; the runs' dates span their starts where they were stamped."""
    import json

    def kept(seed, sparse, steps=100_000, **started):
        summary = {"sparse_return": sparse, "t_first": 10.0 * seed, "plo_skips_main": 0.0, "SPS": 100.0}
        summary |= {"eval_sparse_return": sparse, "wall": 60.0, "total_timesteps": steps, "extra": []}
        summary |= {"code": "abc1234", "date": f"2026-01-0{seed} 00:00 UTC", "machine": "test machine", "load": 1.0}
        (tmp_path / f"LearnToAttack__shaped__seed{seed}.json").write_text(json.dumps(summary | started))

    kept(1, 9.0)
    kept(2, 11.0)
    kept(3, 0.0, steps=50_000)  # another budget: not one of the asked runs
    cmd = [sys.executable, str(ROOT / "benchmark" / "ppo_action_guidance_table81.py"), "--from-results", "--no-docs"]
    cmd += ["--results", str(tmp_path), "--tasks", "LearnToAttack", "--rows", "shaped", "--seeds", "1", "2", "3"]
    result = in_process(cmd)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "from 2 of the 3 runs asked for" in result.stdout
    assert "| shaped reward (second baseline) | 10.00 ± 1.00 (2/3) / 10.00 ± 0.00 |" in result.stdout
    assert "ended 2026-01-01 00:00 UTC to 2026-01-02 00:00 UTC at commit(s) `abc1234`" in result.stdout
    kept(1, 9.0, started="2025-12-31 23:00 UTC")
    kept(2, 11.0, started="2026-01-01 23:00 UTC")
    result = in_process(cmd)
    assert "trained from 2025-12-31 23:00 UTC to 2026-01-02 00:00 UTC at commit(s) `abc1234`" in result.stdout
    result = in_process([*cmd[:-3], "3"])
    assert result.returncode == 2 and "no kept results" in result.stderr


def test_rerun_tabulates_kept_arms(tmp_path):
    """--from-results builds the rerun table from the kept arms alone: the target is (a)'s final mu, each arm's
    first evaluation at or above it gives its steps and CPU time, and an (a) kept for another v0 model is not used."""
    import argparse
    import json

    rerun = benchmark("five_surgery_rerun")
    defaults = argparse.Namespace(extra=[], v0_steps=2_500_000, surgery_steps=500_000, scratch_steps=3_000_000)
    defaults.surgery_flags, defaults.bot_fraction = "--add-inputs --add-actions", 0.2

    def kept(arm, evals, model="runs/v0/model", seed=1, **fields):
        result = {"flags": rerun.arm_flags(defaults, seed, arm, model), "cpu": evals[-1][1], "wall": evals[-1][0]}
        result["evals"] = [{"time": t, "cpu": c, "step": s, "mu": mu} for t, c, s, mu in evals]
        result |= {"model": model, "check": (0.0, 0.5), "references": {"push": 8.0, "random": 0.0}, "load": 1.0}
        result |= {"code": "abc1234", "date": "2026-01-01 00:00 UTC", "machine": "test machine"} | fields
        (tmp_path / f"seed{seed}__{arm}.json").write_text(json.dumps(result))

    kept("v0", [(60, 50, 1_000_000, 3.0), (3000, 2400, 2_500_000, 9.0)])
    kept("a", [(30, 20, 2048, 2.0), (300, 240, 250_000, 6.5), (600, 480, 500_000, 6.0)])
    kept("b", [(1200, 1000, 1_000_000, 2.0), (2400, 2000, 2_000_000, 6.2), (3600, 3000, 3_000_000, 7.0)])
    kept("v0", [(3000, 2400, 2_500_000, 9.0)], seed=2)  # seed 2 has no (a) and (b) yet
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- BENCHMARK:rerun BEGIN -->\n<!-- BENCHMARK:rerun END -->\n")
    cmd = [sys.executable, str(ROOT / "benchmark" / "five_surgery_rerun.py"), "--from-results", "--seeds", "1", "2"]
    cmd += ["--results", str(tmp_path), "--doc", str(doc), "--plot", str(tmp_path / "plot.png")]
    result = in_process(cmd)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "from 1 of 2 seeds with all three arms kept" in result.stdout
    for row in [
        "| target: final TrueSkill μ of (a) on Moba5v5-v1 | 6 | — |",
        "| (a) surgery: M steps after the switch to reach it | 0.25 | — |",  # 6.5 at 250k is the first >= 6
        "| (a) surgery: M steps in total (Moba5v5-v0 training included) | 2.75 | — |",
        "| (b) from scratch: M steps to reach it | 2 | — |",
        "| (b) steps ÷ (a) steps after the switch | 8 | — |",
        "| (b) CPU minutes ÷ (a) CPU minutes in total | 0.758 | — |",  # 2000 / (240 + 2400)
    ]:
        assert row in result.stdout
    assert "| target: final TrueSkill μ of (a) on Moba5v5-v1 | 6 | — |" in doc.read_text()
    kept("a", [(600, 480, 500_000, 6.0)], model="runs/another/model")  # operated on another v0: not this seed's
    result = in_process(cmd)
    assert result.returncode == 2 and "no seed has all three arms kept" in result.stderr
    # a flag after -- that one of the two scripts lacks stops the run before any training
    bad = [*cmd[:2], "--seeds", "3", *cmd[6:], "--", "--hidden-size", "64"]  # the surgery takes v0's network
    result = in_process(bad)
    assert result.returncode == 2 and "--hidden-size after -- is not a flag of five_surgery.py" in result.stderr
    assert not (tmp_path / "seed3__v0.json").exists()


def test_ablations_tabulate_kept_curves(tmp_path):
    """--from-results builds the ablation table from kept curves: speedup(T) is the baseline's versions to reach T
    over the experiment's, and curves kept with another budget are not used."""
    import json

    curves = {"defaults": [0, 1, 2, 3], "policy-lag_1": [0, 2, 3, 3], "policy-lag_4": [0, 0, 0, 0]}
    curves["policy-lag_8"] = curves["defaults"]
    for name, mu in curves.items():
        flags = [] if name == "defaults" else ["--policy-lag", name.rsplit("_", 1)[1]]
        for seed in (1, 2):
            result = {"versions": [1, 2, 3, 4], "mu": mu, "flags": flags, "extra": [], "updates": 4, "eval_every": 1}
            result |= {"seed": seed, "wall": 60.0, "code": "abc1234", "date": "2026-01-01 00:00 UTC", "load": 1.0}
            (tmp_path / "ConnectFour-v1").mkdir(exist_ok=True)
            path = tmp_path / "ConnectFour-v1" / f"ablation_{name}__seed{seed}.json"
            path.write_text(json.dumps(result | {"machine": "test machine"}))
    cmd = [sys.executable, str(ROOT / "benchmark" / "ppo_lstm_selfplay_ablations.py"), "--from-results", "--no-docs"]
    cmd += ["--results", str(tmp_path), "--groups", "staleness", "--seeds", "1", "2", "--eval-every", "1"]
    cmd += ["--thresholds", "2", "--updates"]
    result = in_process([*cmd, "4"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| staleness (policy lag, versions) | 0 (b) | 1.00 ± 0.00 (2/2) | 3.00 ± 0.00 |" in result.stdout
    assert "| staleness (policy lag, versions) | 1 | 1.50 ± 0.00 (2/2) |" in result.stdout  # version 3 / version 2
    assert "| staleness (policy lag, versions) | 4 | —, 2 never reached T |" in result.stdout
    assert "| staleness (policy lag, versions) | 8 | 1.00 ± 0.00 (2/2) |" in result.stdout
    result = in_process([*cmd, "5"])  # another budget
    assert result.returncode == 2 and "8 of the 8 runs are not kept" in result.stderr
    result = in_process([*cmd, "4", "--", "--policy-lag", "2"])
    assert result.returncode == 2 and "--policy-lag after -- would override" in result.stderr  # not every arm lag 2


def test_versions_to_reach_and_speedup():
    """Equation 2 of OpenAI Five's Appendix M, which the ablations table reports."""
    versions = list(range(0, 12))
    base = (versions, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 120])
    exp = (versions, [0, 10, 20, 40, 100, 90, 130, 140, 150, 160, 170, 180])
    assert provenance.versions_to_reach(*base, 100) == 10.0
    assert provenance.versions_to_reach(*exp, 100) == 4.0
    assert provenance.speedup(base, exp, 100) == pytest.approx(2.5)
    assert provenance.speedup(exp, base, 100) == pytest.approx(0.4)
    assert provenance.versions_to_reach(*base, 500) == math.inf
    assert provenance.speedup(base, exp, 130) == math.inf  # experiment reaches 130 at 6, baseline never
    assert provenance.speedup(exp, base, 130) == 0.0  # baseline reaches it, experiment never
    assert math.isnan(provenance.speedup(base, exp, 500))
    assert provenance.speedup(base, ([0, 5], [10, 10]), 1) == math.inf  # experiment already there at version 0
    assert math.isnan(provenance.speedup(base, exp, -1))  # both at version 0
    with pytest.raises(ValueError):
        provenance.versions_to_reach([1, 2], [1.0], 0)


def test_every_script_carries_the_same_run_management_block():
    """The block marked RUN MANAGEMENT is byte for byte the same in every script, so no diff between two shows it, and
    it is at most 70 lines (issue 87), so that the algorithm comes soon."""
    blocks = {}
    for path in sorted((ROOT / "cleanfive").glob("*.py")):
        text = path.read_text()
        if "if __name__ == " in text and path.stem not in TOOLS:
            start, end = text.find("# RUN MANAGEMENT"), text.find("# END OF RUN MANAGEMENT")
            assert 0 <= start < end, f"{path.name} has no RUN MANAGEMENT block"
            blocks[path.name] = text[start:end]
            assert text[start:end].count("\n") + 1 <= 70, f"{path.name}: the RUN MANAGEMENT block is over 70 lines"
    assert len(blocks) == 5 and len(set(blocks.values())) == 1, f"the block differs in {sorted(blocks)}"


def test_speed_gpu_tabulates_kept_runs_and_needs_cuda_to_run(tmp_path):
    """speed.py --gpu --from-results: the CPU-vs-GPU rows of the kept cases, B ÷ A of the medians, and envpool's
    ceiling line; --gpu without a CUDA device (and not --from-results) exits 2 with one line."""
    import json

    def kept(case, cpu, gpu):
        sides = [
            {"label": label, "command": "python x", "runs": [{"sps": v, "first_update": 1.0, "wall": 2.0} for v in vs]}
            for label, vs in (("CPU", cpu), ("GPU", gpu))
        ]
        result = {"case": case, "updates": 4, "rounds": 2, "sides": sides, "code": "abc1234", "load": 1.0}
        (tmp_path / f"{case}.json").write_text(json.dumps(result | {"date": "2026-01-01 00:00 UTC", "machine": "m"}))

    kept("c4", [100, 300], [400, 600])  # medians 200 and 500
    (tmp_path / "ceiling.txt").write_text("envpool's ceiling here: 1000 steps/s\n")
    cmd = [sys.executable, str(ROOT / "benchmark" / "speed.py"), "--gpu", "--no-docs", "--results", str(tmp_path)]
    result = in_process([*cmd, "--cases", "c4", "--from-results"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "| c4 | CPU | GPU | 100, 300 | 400, 600 | 2.50 |" in result.stdout
    assert "envpool's ceiling here: 1000 steps/s." in result.stdout
    import torch

    if not torch.cuda.is_available():
        result = in_process([*cmd, "--cases", "c4"])
        assert result.returncode == 2 and "--gpu: torch sees no CUDA device" in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_connect4_tactics_says_in_one_line_when_a_model_cannot_be_read(tmp_path):
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a model")
    for path in (tmp_path / "missing.cleanfive_model", foreign):
        cmd = [sys.executable, str(ROOT / "benchmark" / "connect4_tactics.py"), "--models", str(path)]
        result = in_process(cmd)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"cannot read --models {path}" in result.stderr


def test_connect4_tactics_names_what_lost_each_lost_game(tmp_path):
    """benchmark/connect4_tactics.py: each game an untrained model (random weights, tests/saved_models.py) loses to
    `greedy` has one cause, read at the agent's last move, so the causes add up to the loss rate and none is left
    unexplained ("other")."""
    sys.path.insert(0, str(ROOT / "benchmark"))
    import connect4_tactics
    from board_table import load_agent
    from saved_models import save_selfplay_model

    path = save_selfplay_model(tmp_path / "untrained.cleanfive_model", "ConnectFour-v1", seed=1)
    agent, _ = load_agent(path, ("ConnectFour-v1",))
    result = connect4_tactics.play(agent, "greedy", 128, 0)
    causes = [result[cause] for cause in connect4_tactics.LOSS_CAUSES]
    assert result["loss"] > 0.1 and result["other"] == 0.0
    assert sum(causes) == pytest.approx(result["loss"])
    assert sum(c > 0 for c in causes) >= 3  # a model this weak loses in more than one way
    assert all(result[f"n_block_{k}"] > 0 for k in connect4_tactics.LINES)
    board = -np.ones((5, 6, 7), np.int64)  # (row 0 at the top) for side 1: a line of each kind, both diagonals,
    board[0, 5, 1:5] = board[1, 2:, 6] = 1  # and three stones only in game 4
    board[2, [5, 4, 3, 2], [0, 1, 2, 3]] = board[3, [2, 3, 4, 5], [3, 4, 5, 6]] = board[4, [5, 4, 3], [3, 4, 5]] = 1
    kinds = connect4_tactics.line_kinds(board, np.ones(5, np.int64))
    assert {k: v.tolist() for k, v in kinds.items()} == {
        "vertical": [False, True, False, False, False],
        "horizontal": [True, False, False, False, False],
        "diagonal": [False, False, True, True, False],
    }


def test_connect4_block_supervised_gives_the_accuracy_by_line():
    """benchmark/connect4_block_supervised.py: held-out accuracy by the line the threat would complete, for each
    network, with every held-out position of one threat in at least one kind of line."""
    cmd = [sys.executable, str(ROOT / "benchmark" / "connect4_block_supervised.py"), "--sizes", "300"]
    result = in_process([*cmd, "--steps", "5", "--test", "400"])
    assert result.returncode == 0, result.stderr
    head = next(line for line in result.stdout.splitlines() if line.startswith("| network | vertical"))
    held_out = [int(n.replace(",", "")) for n in re.findall(r"\(([\d,]+) held out\)", head)]
    assert len(held_out) == 3 and sum(held_out) >= 400
    assert sum(line.startswith("| the script's") for line in result.stdout.splitlines()) == 4


def test_script_at_writes_a_commits_script_and_refuses_an_unknown_commit(capsys):
    """The learning harness's --script-at: the script as git holds it at a commit, under its own file name (which its
    saved files carry), and one line where git has none."""
    script = ROOT / "cleanfive" / "ppo_lstm_selfplay.py"
    shown = subprocess.run(["git", "show", "HEAD:cleanfive/ppo_lstm_selfplay.py"], cwd=ROOT, capture_output=True)
    if shown.returncode != 0:
        pytest.skip("a copy of the tree without git history")
    path = provenance.script_at("HEAD", script)
    try:
        assert path.parent == provenance.SCRIPTS_AT / "HEAD" and path.name == script.name  # outside the tree
        assert path.read_bytes() == shown.stdout
    finally:
        path.unlink()
    with pytest.raises(SystemExit) as stop:
        provenance.script_at("no-such-commit", script)
    assert stop.value.code == 2
    assert "git has no no-such-commit:cleanfive/ppo_lstm_selfplay.py" in capsys.readouterr().err


MISSING_TEST = """
import pytest
from needs import MISSING, needs

@needs(MISSING + "a thing this machine lacks")
def test_needs_a_thing():
    pass

def test_skips_at_run_time():
    pytest.skip(MISSING + "another thing")

@pytest.mark.skipif(True, reason="needs a GPU")
def test_a_skip_of_another_kind():
    pass
"""


@pytest.mark.parametrize("ci", ["true", ""])
def test_under_ci_a_test_that_lacks_what_it_needs_fails_naming_it(tmp_path, ci):
    """CI=true (as CI runs .ci/run): a `missing:` skip (tests/needs.py: Java, Chromium, an extra) fails and says what
    is missing; other skips (no GPU) stay skips. Without CI they all skip."""
    (tmp_path / "test_missing.py").write_text(MISSING_TEST)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT / "tests")}
    flags = ["-p", "conftest", "-p", "no:xdist", "-p", "no:cacheprovider", "-o", "addopts=", "-rA"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *flags, str(tmp_path / "test_missing.py")],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    if ci:
        assert result.returncode == 1 and "1 failed, 1 skipped, 1 error" in result.stdout, result.stdout[-2000:]
        assert "cannot run: a thing this machine lacks" in result.stdout
        assert "cannot run: another thing" in result.stdout
    else:
        assert result.returncode == 0 and "3 skipped" in result.stdout, result.stdout[-2000:]


def test_every_skip_for_a_missing_requirement_goes_through_tests_needs():
    """No test file skips on Java, an extra or a browser by a reason of its own, which CI=true would not catch."""
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        text = path.read_text() if path.name != "test_repo.py" else ""
        assert "importorskip" not in text, f"{path.name}: use tests/needs.py (a `missing:` reason) instead"
        assert 'shutil.which("java")' not in text, f"{path.name}: use tests/needs.py's needs_microrts"
        assert "skipif(no_" not in text, f"{path.name}: use tests/needs.py's needs() for what the machine lacks"


def test_the_five_pair_shares_every_helper_but_what_surgery_changes():
    """Every function and class that both Five scripts define is the same text in both, except those surgery
    changes (its Args, its Agent, its argument checks and the one flag its world can use), so that
    `diff ppo_lstm_selfplay.py five_surgery.py` shows model surgery and no drift between copies."""
    import ast

    def defs(name):
        source = (ROOT / "cleanfive" / f"{name}.py").read_text()
        nodes = ast.parse(source).body
        return {
            n.name: ast.get_source_segment(source, n) for n in nodes if isinstance(n, ast.FunctionDef | ast.ClassDef)
        }

    selfplay, surgery = defs("ppo_lstm_selfplay"), defs("five_surgery")
    shared = set(selfplay) & set(surgery)
    assert len(shared) >= 30, sorted(shared)
    drifted = sorted(name for name in shared if selfplay[name] != surgery[name])
    assert drifted == ["Agent", "Args", "check_args", "resolve_args"], drifted
