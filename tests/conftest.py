"""Set-up for the whole test session.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml). Each worker, and each script a test starts
in a subprocess, gets one torch thread: two workers with two threads each on a 2-core machine slow torch's
backward passes down many times over.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"  # read by torch when it is first imported, and inherited by subprocesses

# The longest files first: `--dist loadfile` hands whole files to the two workers in collection order, and a long file
# handed out last leaves one worker idle while the other finishes it.
LONGEST_FIRST = ["test_reliability.py", "test_ppo_lstm_selfplay.py", "test_five_surgery.py", "test_cleanba_impala.py"]


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: LONGEST_FIRST.index(item.path.name) if item.path.name in LONGEST_FIRST else 99)
