"""``python -m torch.distributed.run ... tests/threads_at_exit.py SCRIPT FLAGS`` runs SCRIPT with FLAGS as its own
``__main__``, then prints ``threads at exit: NAMES`` (this process's threads, from /proc/self/task) to stderr. No gloo
thread may outlive a script's destroy_process_group: one still dropping a collective's tensors while the interpreter
shuts down aborts the process (std::terminate), a race that a test of the exit code sees only now and then."""

import os
import re
import runpy
import sys

WRAPPER = os.path.abspath(__file__)


def assert_no_gloo_thread_left(stderr: str, processes: int = 2) -> None:
    """Each of the ``processes`` printed its threads at exit (``stderr``: torchrun's), none of them gloo's."""
    left = re.findall(r"threads at exit: (.*)", stderr)
    assert len(left) == processes and not any("gloo" in names for names in left), left


if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
    names = sorted(open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task"))
    # one write of a line under 4 KiB: atomic on the pipe both processes share, so their lines do not interleave
    # (print wrote its pieces separately, and CI once read "threads at exit:threads at exit: ...")
    sys.stderr.flush()
    os.write(sys.stderr.fileno(), f"threads at exit: {' '.join(names)}\n".encode())
