"""Repository-level checks: lint, docs build, and the CI entry point's exit-code handling."""

import os
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
