"""The list of deliberate bugs of benchmark/mutants.py, checked on every test run without running a bug: each one is
still there to apply (its original text in its file exactly once: a stale list fails here, not as a bug "caught"),
changes exactly one line, and leaves its file ruff-clean and every line the docs cite in place, so that the test run
can catch it only by what the code computes, not by lint or by the docs' line citations. In the copy that
benchmark/mutants.py runs, $CLEANFIVE_MUTANT names the bug it applied: these checks take it out again, so that they are
not what catches it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "benchmark"))
import mutants  # noqa: E402

LINE_REF = re.compile(r"\(lines? (\d+)(?:–(\d+))?: `([^`]+)`\)")  # as tests/test_repo.py reads the docs' citations
APPLIED = {bug.path: bug for bug in mutants.BUGS if bug.name == os.environ.get("CLEANFIVE_MUTANT")}


def original(path: str) -> str:
    """The file ``path`` as the tree holds it; in benchmark/mutants.py's copy, without the bug applied there."""
    text = (ROOT / path).read_text()
    if bug := APPLIED.get(path):
        assert text.count(bug.new) == 1, f"{bug.name} is not applied once in {path}"
        text = text.replace(bug.new, bug.old)
    return text


def test_the_list_has_twenty_bugs_with_unique_names_and_existing_expected_tests():
    names = [bug.name for bug in mutants.BUGS]
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert all((ROOT / bug.expect).is_file() and (ROOT / bug.path).is_file() for bug in mutants.BUGS)


def test_every_bug_applies_once_and_changes_one_line():
    for bug in mutants.BUGS:
        text = original(bug.path)
        changed = mutants.apply(bug, text)  # Stale unless the original text is there exactly once
        before, after = text.splitlines(), changed.splitlines()
        assert len(before) == len(after), bug.name
        assert sum(a != b for a, b in zip(before, after, strict=True)) == 1, bug.name


def test_a_bug_whose_text_is_gone_or_repeated_is_stale():
    bug = mutants.BUGS[0]
    with pytest.raises(mutants.Stale, match="0 times"):
        mutants.apply(bug, "")
    with pytest.raises(mutants.Stale, match="2 times"):
        mutants.apply(bug, bug.old + "\n" + bug.old)


def test_a_bug_leaves_its_file_ruff_clean_and_the_cited_lines_in_place():
    """Only what a bug computes may catch it: lint passes on the changed file and every `(lines A–B: `code`)` of its
    script's docs page still finds its code there."""
    for bug in mutants.BUGS:
        changed = mutants.apply(bug, original(bug.path))
        for cmd in (["check", "--quiet"], ["format", "--check", "--quiet"]):
            lint = subprocess.run(
                [BIN / "ruff", *cmd, "--stdin-filename", bug.path, "-"], input=changed, text=True, cwd=ROOT
            )
            assert lint.returncode == 0, f"{bug.name}: ruff {cmd[0]} fails on the changed {bug.path}"
        page = ROOT / "docs" / f"{Path(bug.path).stem}.md"
        if bug.path.count("/") > 1 or not page.exists():
            continue
        lines = changed.splitlines()
        for first, last, code in LINE_REF.findall(page.read_text()):
            assert code in "\n".join(lines[int(first) - 1 : int(last or first)]), f"{bug.name} moves `{code}`"
