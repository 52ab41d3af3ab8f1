"""Throughput of cleanfive/cleanba_impala.py: Cleanba's asynchronous schedule vs the same algorithm with --sync.

Runs both modes alternately (``--repeats`` times each, same seed) and tabulates, from the final line each run prints,
the steps per second, their ratio, whether a mode's repeats ended with bit-identical parameters, and the CPU cores
each run had (CPU time / wall time). Writes the table into docs/cleanba_impala.md unless --no-docs.

    uv run --all-extras python benchmark/cleanba_impala_async_vs_sync.py --total-timesteps 4096 --no-docs
"""

import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import provenance as pv

SCRIPT = pv.ROOT / "cleanfive" / "cleanba_impala.py"
DOC = pv.ROOT / "docs" / "cleanba_impala.md"
MODES = {"async (Cleanba, policy lag 1)": [], "sync (`--sync`, policy lag 0)": ["--sync"]}
PARSER = pv.parser(__file__, __doc__)
PARSER.add_argument("--total-timesteps", type=int, default=20480, help="environment steps of each run")
PARSER.add_argument("--repeats", type=int, default=2, help="runs of each mode (interleaved)")
PARSER.add_argument("--seed", type=int, default=1, help="seed of every timed run")


def run_once(flags: list[str]) -> dict:
    """Run the script once in a scratch directory; its final line's numbers and the CPU share it got."""
    cmd = [sys.executable, str(SCRIPT), *flags]
    print("$", " ".join(cmd), flush=True)
    cpu_before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.time()
    with tempfile.TemporaryDirectory() as scratch:
        final = pv.last_line(cmd, "final ", cwd=Path(scratch))
    cpu_after, elapsed = resource.getrusage(resource.RUSAGE_CHILDREN), time.time() - start
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    row = {"steps": int(final["global_step"]), "sps": float(final["SPS"]), "wall": float(final["wall"][:-1])}
    row |= {"sha": final["params_sha256"], "cores": cpu / elapsed}  # CPU seconds per second: the share it had
    print(f"  {row}", flush=True)
    return row


def main() -> None:
    args = PARSER.parse_args()
    # the code being measured: the commit, and whether the script or its env helper differ from it
    code, load_before = pv.code_version(SCRIPT, "cleanfive/envs/atari.py"), os.getloadavg()[0]
    common = ["--seed", str(args.seed), "--total-timesteps", str(args.total_timesteps), *args.extra]
    rows = {mode: [] for mode in MODES}
    for _ in range(args.repeats):
        for mode, flags in MODES.items():
            rows[mode].append(run_once(common + flags))

    import torch  # only for the device line: the runs are subprocesses

    device = f"CUDA {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no GPU"
    source = f", {device}, torch {torch.__version__}; 1-minute load average before the runs: {load_before:.2f}."
    lines = [
        *pv.header(PARSER, args, code, source, " (the script's defaults otherwise; runs alternate between the modes)."),
        "| mode | runs | env steps per run | wall time of the training loop (s) | steps per second "
        "| CPU cores used (CPU time / wall time) | final parameters (sha256, first 12) | repeats bit-identical |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode, runs in rows.items():
        sps, hashes = np.array([r["sps"] for r in runs]), {r["sha"] for r in runs}
        walls, cores = ", ".join(f"{r['wall']:.1f}" for r in runs), ", ".join(f"{r['cores']:.2f}" for r in runs)
        spread, short = f" ± {sps.std():.1f}" if len(runs) > 1 else "", ", ".join(sorted(h[:12] for h in hashes))
        cells = f"{walls} | {sps.mean():.1f}{spread} | {cores} | {short} | {'yes' if len(hashes) == 1 else '**no**'}"
        lines.append(f"| {mode} | {len(runs)} | {runs[0]['steps']} | {cells} |")
    mean_sps = [np.mean([r["sps"] for r in runs]) for runs in rows.values()]  # async, sync
    lines.append(
        f"\nSpeed-up of the asynchronous schedule: **{mean_sps[0] / mean_sps[1]:.2f}×** the steps per second "
        "of `--sync` (ratio of the mean steps per second)."
    )
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(DOC, "async_vs_sync", table)


if __name__ == "__main__":
    main()
