"""Set-up for the whole test session.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml). Each worker, and each script a test starts
in a subprocess, gets one torch thread: two workers with two threads each on a 2-core machine slow torch's
backward passes down many times over.
"""

import os

import pytest
from needs import MISSING

os.environ["OMP_NUM_THREADS"] = "1"  # read by torch when it is first imported, and inherited by subprocesses

# The longest files first: `--dist loadfile` hands whole files to the two workers in collection order, and a long file
# handed out last leaves one worker idle while the other finishes it.
LONGEST_FIRST = ["test_reliability.py", "test_ppo_lstm_selfplay.py", "test_five_surgery.py", "test_cleanba_impala.py"]


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST else 99)


CI = os.environ.get("CI") == "true"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI=true a skip for something the machine lacks (tests/needs.py: a reason starting "missing: ") fails,
    naming what is missing: CI must not pass by skipping the µRTS, VMAS or browser tests."""
    outcome = yield
    report = outcome.get_result()
    if CI and report.skipped and isinstance(report.longrepr, tuple) and MISSING in report.longrepr[2]:
        report.outcome = "failed"
        report.longrepr = f"CI=true and this test cannot run: {report.longrepr[2].split(MISSING, 1)[1]}"
