"""Repository-level checks: lint, docs build, and the CI entry point's exit-code handling."""

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

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


def test_readme_main_command_points_at_a_script():
    readme = (ROOT / "README.md").read_text()
    assert "uv run python cleanfive/ppo_lstm_selfplay.py" in readme


SCRIPTS = sorted(p.stem for p in (ROOT / "cleanfive").glob("*.py") if p.stem not in ("__init__", "trueskill_league"))
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
        assert code in "\n".join(lines[first - 1 : last]), (
            f"docs/{name}.md cites lines {first}–{last} of cleanfive/{name}.py for `{code}`, which is now at {now}"
        )


@pytest.mark.parametrize("name", sorted(p.name for p in (ROOT / "benchmark").glob("*.py") if p.name != "provenance.py"))
def test_benchmark_scripts_import_and_parse_their_flags(name):
    """Every benchmark still imports (provenance helpers, the script's own imports) and answers --help."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmark" / name), "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


def test_over_seeds_spread_counts_only_seeds_with_a_value():
    sys.path.insert(0, str(ROOT / "benchmark"))
    from provenance import over_seeds

    assert over_seeds([1.0, float("nan"), 3.0], ".2f") == "2.00 ± 1.00 (2/3 seeds)"  # std of {1, 3} is 1
    assert over_seeds([120.0, float("inf"), 240.0], ".1f", scale=60) == "3.0 ± 1.0 (2/3 seeds)"
    assert over_seeds([5.0], ".3g") == "5 (1/1 seeds)"
    assert over_seeds([float("nan"), float("nan")]) == "not reached (0/2)"


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
    result = subprocess.run([*cmd, "--labels", "s1", "--no-docs"], capture_output=True, text=True, cwd=ROOT)
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
    and a file trained with another budget is not reused."""
    import json

    def kept(seed, sparse, steps=100_000):
        summary = {"sparse_return": sparse, "t_first": 10.0 * seed, "plo_skips_main": 0.0, "SPS": 100.0}
        summary |= {"eval_sparse_return": sparse, "wall": 60.0, "total_timesteps": steps, "extra": []}
        summary |= {"code": "abc1234", "date": f"2026-01-0{seed} 00:00 UTC", "machine": "test machine", "load": 1.0}
        (tmp_path / f"LearnToAttack__shaped__seed{seed}.json").write_text(json.dumps(summary))

    kept(1, 9.0)
    kept(2, 11.0)
    kept(3, 0.0, steps=50_000)  # another budget: not one of the asked runs
    cmd = [sys.executable, str(ROOT / "benchmark" / "ppo_action_guidance_table81.py"), "--from-results", "--no-docs"]
    cmd += ["--results", str(tmp_path), "--tasks", "LearnToAttack", "--rows", "shaped", "--seeds", "1", "2", "3"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "from 2 of the 3 runs asked for" in result.stdout
    assert "| shaped reward (second baseline) | 10.00 ± 1.00 (2/3) / 10.00 ± 0.00 |" in result.stdout
    assert "from 2026-01-01 00:00 UTC to 2026-01-02 00:00 UTC at commit(s) `abc1234`" in result.stdout
    result = subprocess.run([*cmd[:-3], "3"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 1 and "no kept results" in result.stderr
