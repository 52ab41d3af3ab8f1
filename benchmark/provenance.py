"""What the benchmarks share: the command, commit, machine and date stamped beside every table, results kept as JSON
(``--from-results`` remakes a table from them alone), the docs block a table goes into, runs of the training scripts,
and speedup (Equation 2 of OpenAI Five's Appendix M). Imported by the scripts in this folder, which
``python benchmark/<name>.py`` puts on the path.
"""

import argparse
import ast
import datetime
import json
import math
import os
import platform
import shlex
import subprocess
import sys
import tempfile
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def parser(file: str, doc: str, docs: bool = True, extra: bool = True, results: str = "") -> argparse.ArgumentParser:
    """The parser of benchmark ``file``: its docstring as help; ``--no-docs`` when it writes into docs/; the training
    script's extra flags after ``--``; ``--from-results`` and ``--results`` (default benchmark/results/<results>/)."""
    p = argparse.ArgumentParser(Path(file).name, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if docs:
        p.add_argument("--no-docs", action="store_true", help="print the table only; do not touch docs/")
    if results:
        p.add_argument("--from-results", action="store_true", help="train nothing: tabulate the kept results")
        p.add_argument("--results", type=Path, default=ROOT / "benchmark" / "results" / results, help="kept runs")
    if extra:
        p.add_argument("extra", nargs="*", help="extra flags for the training script, after --")
    return p


def command(p: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The command line that makes this table again: every option set (a path only when not its default; ``--jobs``
    also with ``--from-results``, as the learning benchmark's kept runs are matched on their torch threads) in the
    parser's order, ``--from-results`` last, then the extra flags after ``--``."""
    words = ["uv", "run", "--all-extras", "python", f"benchmark/{p.prog}"]
    skip = {"extra", "no_docs"}
    for dest, value in sorted(vars(args).items(), key=lambda item: item[0] == "from_results"):
        default_path = isinstance(value, Path) and value == p.get_default(dest)
        if dest in skip or value is None or value is False or default_path:
            continue
        values = value if isinstance(value, list) else [] if value is True else [value]
        words += [f"--{dest.replace('_', '-')}", *(f"{v:g}" if isinstance(v, float) else str(v) for v in values)]
    return shlex.join(words + (["--", *args.extra] if getattr(args, "extra", None) else []))


def code_version(*paths: str | Path) -> str:
    """The short commit of HEAD, with ``+dirty`` when any of ``paths`` (the code being measured) differs from it;
    $CLEANFIVE_COMMIT where the tree is a copy without .git (a device machine's)."""
    if not (ROOT / ".git").exists() and os.environ.get("CLEANFIVE_COMMIT"):
        return os.environ["CLEANFIVE_COMMIT"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", *map(str, paths)], cwd=ROOT, capture_output=True, text=True)
    return (commit.stdout.strip() or "none") + ("+dirty" if dirty.stdout.strip() else "")


def cpu_model() -> str:
    """The CPU's model name and its widest vector extension (AVX-512 or AVX2: machines differ), where Linux says."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "CPU model unknown"
    name = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "CPU model unknown")
    flags = next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), [])
    return f"{name}, {'AVX-512' if 'avx512f' in flags else 'AVX2' if 'avx2' in flags else 'no AVX2'}"


def machine() -> str:
    """Platform, CPU architecture and model, core count, the GPU if torch sees one, and Python version: one phrase."""
    cores = f"{os.cpu_count()} CPU cores"
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_available():  # imported by a benchmark that uses it
        cores += f", GPU {sys.modules['torch'].cuda.get_device_name()}"
    cores += f", Python {platform.python_version()}"
    return f"{platform.platform()} ({platform.machine()}, {cpu_model()}), {cores}"


def now() -> str:
    return f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"


def header(p: argparse.ArgumentParser, args: argparse.Namespace, code: str | None, source: str, note: str) -> list[str]:
    """A table's first lines: the benchmark, the date, the commit and machine of fresh runs (``code``), what
    ``source`` says of the runs; then the command that makes the table again, and ``note``."""
    fresh = f", commit `{code}`, machine: {machine()}" if code else ""
    first = f"Generated by `benchmark/{p.prog}` on {now()}{fresh}{source}"
    return [first, "", f"Command: `{command(p, args)}`{note}", ""]


def over_seeds(values: Sequence[float], spec: str = ".1f", scale: float = 1.0, counts: bool = True) -> str:
    """mean ± std of ``values / scale`` over the seeds with a finite value (format ``spec``), and (``counts``) how many
    had one."""
    arr = np.array(values, dtype=float) / scale
    if (ok := arr[np.isfinite(arr)]).size == 0:
        return f"not reached (0/{arr.size})" if counts else "—"
    spread = f"{ok.mean():{spec}}" + (f" ± {ok.std():{spec}}" if ok.size > 1 else "")
    return spread + (f" ({ok.size}/{arr.size} seeds)" if counts else "")


def seed_table(
    seeds: Sequence[int], rows: list[tuple[str, Sequence[float], str, float]], counts: bool = True
) -> list[str]:
    """Markdown rows ``(label, value per seed, format, scale)``: each seed's value / scale ("—" where it has none),
    then :func:`over_seeds`."""
    header = "| metric | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std |"
    lines = [header, "|---" * (len(seeds) + 2) + "|"]
    for label, values, spec, scale in rows:
        cells = " | ".join(f"{v / scale:{spec}}" if np.isfinite(v) else "—" for v in values)
        lines.append(f"| {label} | {cells} | {over_seeds(values, spec, scale, counts)} |")
    return lines


def first_reach(rows: list[dict], key: str, threshold: float) -> dict:
    """The first of ``rows`` whose ``key`` is at least ``threshold`` ({} if none is)."""
    return next((row for row in rows if row.get(key, -math.inf) >= threshold), {})


def versions_to_reach(versions: Sequence[int], ratings: Sequence[float], threshold: float) -> float:
    """First version (in the given order) whose rating is >= ``threshold``; ``math.inf`` if none is."""
    if len(versions) != len(ratings):
        raise ValueError(f"{len(versions)} versions but {len(ratings)} ratings")
    return next((float(v) for v, r in zip(versions, ratings, strict=True) if r >= threshold), math.inf)


def speedup(baseline: tuple[list, list], experiment: tuple[list, list], threshold: float) -> float:
    """Equation 2: versions for the baseline to first reach ``threshold`` / versions for the experiment, each curve
    ``(versions, ratings)``. Only the baseline never reaching it gives ``inf``; only the experiment never reaching it
    gives ``0.0``; neither reaching it gives ``nan``. An experiment reaching it at version 0 gives ``inf`` (``nan`` if
    the baseline also does)."""
    b, e = versions_to_reach(*baseline, threshold), versions_to_reach(*experiment, threshold)
    if e == 0:  # inf / inf is already nan
        return math.nan if b == 0 else math.inf
    return b / e


def usage_error(message: str) -> NoReturn:
    """One line that says what to do, and exit code 2, as every cleanfive script does for a user's mistake."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def check(ok: bool, message: str) -> None:
    """:func:`usage_error` unless ``ok``."""
    if not ok:
        usage_error(message)


def _marker_pairs(block: str) -> list[tuple[str, str]]:
    """The markers of ``block``, in either style."""
    styles = [(f"BENCHMARK:{block} BEGIN", f"BENCHMARK:{block} END"), (f"BENCHMARK:{block}", f"/BENCHMARK:{block}")]
    return [(f"<!-- {begin} -->", f"<!-- {end} -->") for begin, end in styles]


def block_page(doc: Path, block: str) -> Path:
    """The page that holds ``block``: ``doc`` if it has the block's markers, else the first page of docs/ (the research
    log, say) that has them, as blocks move between pages while their benchmark names the page it first wrote; stop
    now, not after hours of training, if no page has them."""
    pages = [doc, *(page for page in sorted((ROOT / "docs").glob("*.md")) if page.resolve() != doc.resolve())]
    for page in pages:
        text = page.read_text() if page.exists() else ""
        if any(begin in text and end in text for begin, end in _marker_pairs(block)):
            return page
    usage_error(f"{doc} has no <!-- BENCHMARK:{block} BEGIN --> and <!-- BENCHMARK:{block} END --> markers; add them")


def markers(doc: Path, block: str) -> tuple[str, str]:
    """The markers of ``block`` on its page (:func:`block_page`), either style."""
    text = block_page(doc, block).read_text()
    return next((begin, end) for begin, end in _marker_pairs(block) if begin in text and end in text)


def write_block(doc: Path, block: str, text: str) -> None:
    """Replace what lies between the markers of ``block`` on its page (``doc`` or the page it moved to) by ``text``."""
    page = block_page(doc, block)
    (begin, end), content = markers(page, block), page.read_text()
    before, after = content[: content.index(begin)], content[content.index(end) + len(end) :]
    page.write_text(f"{before}{begin}\n{text}\n{end}{after}")
    print(f"wrote {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stream(cmd: list[str], threads: int | None = None) -> Iterator[tuple[str, float]]:
    """Run ``cmd`` in the repository root (``threads`` torch threads if given) and yield every line it prints with
    the run's own CPU seconds so far; stop it if the caller stops reading; exit with its last lines if it fails."""
    print("$", shlex.join(cmd), flush=True)
    env, tail = os.environ | ({"OMP_NUM_THREADS": str(threads)} if threads else {}), deque(maxlen=40)
    with subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        try:
            for line in proc.stdout:
                tail.append(line)
                yield line.strip(), cpu_seconds(proc.pid)
        except GeneratorExit:
            proc.kill()
            raise
    if proc.returncode != 0:
        sys.exit(f"failed with exit code {proc.returncode}: {shlex.join(cmd)}\n{''.join(tail)}")


def fields(line: str) -> dict[str, str]:
    """The ``key=value`` words of a line the scripts print (``summary ...``, ``final ...``, ``eval ...``)."""
    return dict(word.split("=", 1) for word in line.split() if "=" in word)


def eval_row(line: str) -> dict:
    """The wall seconds, step, TrueSkill μ and win rate against each reference of a Five script's ``eval ...`` line;
    with ``--bot-ladder`` also how many of the training bots the bot games draw from (``bots_in_play``)."""
    f = fields(line)
    row = {"time": float(f["time"][:-1]), "step": int(f["global_step"]), "mu": float(f["trueskill_mu"])}
    row |= {"bots_in_play": int(f["bots_in_play"])} if "bots_in_play" in f else {}
    return row | {k.removeprefix("win_vs_"): float(v) for k, v in f.items() if k.startswith("win_vs_")}


def last_line(cmd: list[str], prefix: str, cwd: Path = ROOT) -> dict[str, str]:
    """Run ``cmd`` to its end in ``cwd``; the :func:`fields` of the last line it printed that starts with ``prefix``."""
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0 or not (lines := [x for x in result.stdout.splitlines() if x.startswith(prefix)]):
        sys.exit(f"failed: {shlex.join(cmd)}\n{result.stderr[-2000:]}")
    return fields(lines[-1])


def add_batch_sizes(parser: argparse.ArgumentParser) -> None:
    """The world-speed benchmarks' --batch-sizes (football_speed.py, moba_speed.py)."""
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="+",
        default=[64, 256, 1024, 4096],
        help="games stepped at once, one measurement each",
    )


SCRIPTS_AT = Path(tempfile.gettempdir()) / "cleanfive_scripts_at"  # --script-at's scripts of earlier commits


def script_at(commit: str, script: Path) -> Path:
    """``script`` (a path under the root) as it was at ``commit``, written to SCRIPTS_AT (outside the tree: an old
    script is history, not part of the project) to run with this tree's worlds and helpers: one change's effect, side
    by side with today's script. Written atomically, as the runs of a benchmark's threads each ask for it while others
    may already be starting it. It keeps its file name (in a folder named by the commit): a script writes its name into
    the files it saves, and the arena and the benchmarks read only files that name it."""
    path = SCRIPTS_AT / commit / script.name
    path.parent.mkdir(parents=True, exist_ok=True)
    where = f"{commit}:{script.relative_to(ROOT).as_posix()}"
    shown = subprocess.run(["git", "show", where], cwd=ROOT, capture_output=True, text=True)
    check(shown.returncode == 0, f"git has no {where}; give a commit of this repository that has the script")
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as part:
        part.write(shown.stdout)
    Path(part.name).replace(path)
    return path


def script_flags(script: Path) -> set[str]:
    """The flags tyro makes of a cleanfive script's ``Args`` fields (and ``--no-<flag>`` of the booleans), read from
    its source without importing it."""
    args = next(node for node in ast.parse(script.read_text()).body if getattr(node, "name", "") == "Args")
    flags = {"--help"}
    for node in (node for node in args.body if isinstance(node, ast.AnnAssign)):
        name = node.target.id.replace("_", "-")
        flags |= {f"--{name}", f"--no-{name}"} if ast.unparse(node.annotation) == "bool" else {f"--{name}"}
    return flags


def scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of a TensorBoard run directory: tag -> [(step, value), ...]."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def subplots(*args, **kwargs) -> tuple:
    """matplotlib's ``subplots`` without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_plot(fig, path: Path) -> None:
    """A grid and a legend on every axis of ``fig`` (where the caller placed none), then save it to ``path``."""
    for ax in fig.axes:
        ax.grid(alpha=0.3)
        if ax.get_legend() is None:
            ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def load_kept(path: Path, **expected) -> dict | None:
    """The result kept in ``path`` (JSON), if it exists and its fields equal ``expected`` (budget, flags, ...)."""
    kept = json.loads(path.read_text()) if path.exists() else None
    return kept if kept is not None and all(kept.get(k) == v for k, v in expected.items()) else None


def kept_or_run(path: Path, label: str, expected: dict, kept_only: bool, train: Callable, code: tuple) -> dict | None:
    """The result kept in ``path`` if its fields equal ``expected``; else None if ``kept_only``; else ``train()``
    with ``expected``, stamped with the commit of the ``code`` measured, the date, the machine and its load (what
    :func:`kept_provenance` reads), written atomically: an interrupted benchmark never leaves half a result (a
    ``train()`` that went on from an earlier sitting gives that sitting's start)."""
    if (kept := load_kept(path, **expected)) is not None:
        print(f"  {label}: kept from {kept['date']} (commit {kept['code']})", flush=True)
        return kept
    if kept_only:
        return None
    stamp = {"code": code_version(*code), "started": now()}  # the code that trains, before it does
    result = stamp | train() | expected | {"date": now(), "machine": machine(), "load": os.getloadavg()[0]}
    keep(path, result)
    return result


def keep(path: Path, result: dict) -> None:
    """Write ``result`` to ``path`` as JSON, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".tmp").write_text(json.dumps(result, indent=1) + "\n")
    path.with_suffix(".tmp").replace(path)


def kept_provenance(kept: list[dict]) -> str:
    """When, at which commits, on which machines and under what load kept results were trained, in one phrase (runs
    kept before their start was stamped give their end dates only)."""
    dates, loads = sorted(run["date"] for run in kept), [run["load"] for run in kept]
    starts = sorted(run["started"] for run in kept if "started" in run)
    when = (
        f"trained from {starts[0]} to {dates[-1]}" if len(starts) == len(kept) else f"ended {dates[0]} to {dates[-1]}"
    )
    codes, machines = sorted({run["code"] for run in kept}), sorted({run["machine"] for run in kept})
    return (
        f"{when} at commit(s) {', '.join(f'`{c}`' for c in codes)} on "
        f"{', '.join(machines)}; 1-minute load average at the end of a run {min(loads):.1f}-"
        f"{max(loads):.1f} (n: n cores busy)"
    )
