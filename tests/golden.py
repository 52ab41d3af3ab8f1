"""Golden values kept in the repository: what a default or a tiny seeded run must give, so that a change of behaviour
fails a test until the value is renewed on purpose.

``tests/golden/defaults.json`` holds every default of the five scripts' ``Args``, every world's defaults and the
constants of the shared modules (``test_golden_defaults.py``). ``tests/golden/runs.json`` holds, for each machine
class, the ``params_sha256`` that each script's tiny seeded run prints, and values the run measured (the smoke runs of
each script's test file).

To renew after a deliberate change: ``CLEANFIVE_RENEW_GOLDEN=1 uv run --all-extras pytest``, then commit
``tests/golden/`` in the same commit as the change, and say why in its message.
"""

import fcntl
import json
import os
import platform
import tempfile
from pathlib import Path

import pytest
import torch

GOLDEN = Path(__file__).resolve().parent / "golden"
RENEW = os.environ.get("CLEANFIVE_RENEW_GOLDEN") == "1"


def machine_class() -> str:
    """The runs' float arithmetic depends on the processor's maker and widest vector instructions and on torch's
    version: MKL picks its kernels by both, and an Intel and an AMD processor with AVX-512 end a tiny run with other
    parameters (issue 87's sitting of 2026-12-07: every tiny-run hash differed on an Intel Xeon from the AMD EPYC's)."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    flags = next((line for line in cpuinfo if line.startswith("flags")), "")
    vendor_id = next((line.split(":")[1].strip() for line in cpuinfo if line.startswith("vendor_id")), "")
    vendor = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}.get(vendor_id, "other")
    isa = "avx512" if " avx512f" in flags else "avx2" if " avx2" in flags else "other"
    return f"{platform.machine()}-{vendor}-{isa}-torch{torch.__version__.split('+')[0]}"


def _update(path: Path, change) -> None:
    """Read-modify-write one golden file under a lock (two test workers may renew at once)."""
    with open(Path(tempfile.gettempdir()) / f"cleanfive-golden-{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        change(data)
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def check_value(file: str, key: str, got) -> None:
    """``got`` must equal the kept value ``key`` of ``tests/golden/<file>`` (renewed instead under RENEW)."""
    path = GOLDEN / file
    if RENEW:
        _update(path, lambda data: data.__setitem__(key, got))
        return
    kept = json.loads(path.read_text())
    assert key in kept, f"no golden value {key!r} in tests/golden/{file}: renew with CLEANFIVE_RENEW_GOLDEN=1"
    assert got == kept[key], f"{key} changed (tests/golden/{file}); if on purpose, renew with CLEANFIVE_RENEW_GOLDEN=1"


def check_run(key: str, stdout: str | None, **values) -> None:
    """The last ``params_sha256=`` of a tiny run's output (None: a run that trains nothing), and any ``values`` it
    measured (ratings, returns), equal those kept for this machine class.

    A class with no kept runs skips with a line saying so (the determinism tests still run there)."""
    got = dict(values)
    if stdout is not None:
        hashes = [line.rsplit("params_sha256=", 1)[1].split()[0] for line in stdout.splitlines() if "sha256=" in line]
        assert hashes, f"{key}: the run printed no params_sha256"
        got["params_sha256"] = hashes[-1]
    path, cls = GOLDEN / "runs.json", machine_class()
    if RENEW:
        _update(path, lambda data: data.setdefault(cls, {}).__setitem__(key, got))
        return
    kept = json.loads(path.read_text())
    if cls not in kept:
        pytest.skip(f"no golden runs kept for machine class {cls} (kept: {sorted(kept)}): determinism only")
    assert key in kept[cls], f"no golden run {key!r} for {cls}: renew with CLEANFIVE_RENEW_GOLDEN=1"
    assert got == kept[cls][key], (
        f"{key}: the tiny run changed on {cls} (tests/golden/runs.json): {got} != {kept[cls][key]}; "
        "if on purpose, renew with CLEANFIVE_RENEW_GOLDEN=1 and say why in the commit"
    )
