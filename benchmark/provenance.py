"""What every benchmark states beside its table: the code measured, the machine, the spread over seeds, and where the
table goes.

Imported by the scripts in this folder (run as ``python benchmark/<name>.py``, which puts this folder on the path).
"""

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def code_version(*paths: str | Path) -> str:
    """The short commit of HEAD, with ``+dirty`` when any of ``paths`` (the code being measured) differs from it."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", *map(str, paths)], cwd=ROOT, capture_output=True, text=True)
    return (commit.stdout.strip() or "none") + ("+dirty" if dirty.stdout.strip() else "")


def machine() -> str:
    """Platform, CPU architecture, core count and Python version, in one phrase."""
    return (
        f"{platform.platform()} ({platform.machine()}), {os.cpu_count()} CPU cores, Python {platform.python_version()}"
    )


def over_seeds(values: list[float], spec: str = ".1f", scale: float = 1.0) -> str:
    """mean ± std of ``values / scale`` over the seeds with a finite value (format ``spec``), and how many had one."""
    arr = np.array(values, dtype=float) / scale
    ok = arr[np.isfinite(arr)]
    if ok.size == 0:
        return f"not reached (0/{arr.size})"
    spread = f" ± {ok.std():{spec}}" if ok.size > 1 else ""
    return f"{ok.mean():{spec}}{spread} ({ok.size}/{arr.size} seeds)"


def usage_error(message: str) -> NoReturn:
    """One line that says what to do, and exit code 2, as every cleanfive script does for a user's mistake."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def require_block(doc: Path, begin: str, end: str) -> None:
    """Stop now, not after hours of training, when ``doc`` lacks the markers its table is to be written between."""
    text = doc.read_text() if doc.exists() else ""
    if begin not in text or end not in text:
        usage_error(f"{doc} has no {begin} and {end} markers; add them first")


def write_block(doc: Path, begin: str, end: str, text: str) -> None:
    """Replace what lies between the ``begin`` and ``end`` markers of ``doc`` by ``text``."""
    content = doc.read_text()
    doc.write_text(
        content[: content.index(begin)] + f"{begin}\n{text}\n{end}" + content[content.index(end) + len(end) :]
    )
    print(f"wrote {doc.relative_to(ROOT) if doc.is_relative_to(ROOT) else doc}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def load_kept(path: Path, **expected) -> dict | None:
    """The result kept in ``path`` (JSON), if it exists and its fields equal ``expected`` (budget, flags, ...)."""
    if not path.exists():
        return None
    kept = json.loads(path.read_text())
    return kept if all(kept.get(key) == value for key, value in expected.items()) else None


def keep(path: Path, result: dict, code: str) -> dict:
    """``result`` stamped with the code measured, the date, the machine and its load (what ``kept_provenance``
    reads), written to ``path`` as JSON atomically: an interrupted benchmark never leaves half a result."""
    result = result | {"code": code, "date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"}
    result |= {"machine": machine(), "load": os.getloadavg()[0]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result, indent=1) + "\n")
    tmp.replace(path)
    return result


def kept_provenance(kept: list[dict]) -> str:
    """When, at which commits, on which machines and under what load kept results were trained, in one phrase."""
    dates, loads = sorted(run["date"] for run in kept), [run["load"] for run in kept]
    codes = ", ".join(f"`{code}`" for code in sorted({run["code"] for run in kept}))
    return (
        f"trained from {dates[0]} to {dates[-1]} at commit(s) {codes} "
        f"on {', '.join(sorted({run['machine'] for run in kept}))}; 1-minute load average at the end of a run "
        f"{min(loads):.1f}-{max(loads):.1f} (2: both cores busy)"
    )
