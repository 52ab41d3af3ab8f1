"""Set-up for the whole test session.

The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml). Each worker, and each script a test starts
in a subprocess, gets one torch thread: two workers with two threads each on a 2-core machine slow torch's
backward passes down many times over.
"""

import os

os.environ["OMP_NUM_THREADS"] = "1"  # read by torch when it is first imported, and inherited by subprocesses
