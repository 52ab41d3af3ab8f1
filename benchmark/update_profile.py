"""Where each script's training time goes, and whether it is bound by arithmetic or by overhead: the GFLOP/s its
network achieves against this machine's own peak.

Each case of benchmark/speed.py that trains one script of this tree (c4, lane, gridnet, impala, guidance; football
when named) runs that script's ``__main__`` twice, each time in a fresh process and an empty folder, at the case's
flags, told to train ``--updates`` + 1 updates (so that the final evaluation of ppo_lstm_selfplay.py never comes)
and stopped earlier:

1. timed, stopped after ``--updates`` updates: the steady steps/s between the first and the last-but-one update,
   measured as benchmark/speed.py does (at the ``charts/SPS`` events); those updates split into the rollout (from
   an update's start to the first forward pass with gradients) and the update (from there to its end, of which
   ``backward()``); torch.profiler (CPU, shapes, FLOPs) over the last update for the top ops by self CPU time, and
   the share of that update spent in matrix products, convolutions and LSTM layers; then the peak: a 1024x1024
   float32 matmul loop with the torch threads the script set.
2. counted, stopped after 2 updates: the FLOPs of every matrix product and convolution, forward and backward
   (torch.utils.flop_counter's formulas, and 2 x steps x batch x the weights for oneDNN's LSTM layer, backward
   twice that), in every thread, over the second update, per environment step.

Achieved GFLOP/s = FLOPs per step x steps/s. Writes the table into docs/speed.md and keeps each case in
benchmark/results/profile/<case>.json, from which ``--from-results`` remakes it.

    uv run --all-extras python benchmark/update_profile.py
    uv run --all-extras python benchmark/update_profile.py --cases football --block profile-football \\
        --results benchmark/results/profile_football
"""

import json
import multiprocessing
import os
import runpy
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor

import provenance as pv
import speed

CASES = ["c4", "lane", "gridnet", "impala", "guidance", "football"]  # speed.py's cases that train one script
DEFAULT_CASES = [case for case in CASES if case not in speed.NAMED_ONLY]
ARITHMETIC = ("mm", "conv", "rnn_layer")  # the ops whose names hold these do the counted FLOPs
PARSER = pv.parser(__file__, __doc__, extra=False, results="profile")
PARSER.add_argument(
    "--cases", nargs="+", choices=CASES, default=DEFAULT_CASES, help="cases to profile (default: all but football)"
)
PARSER.add_argument("--block", default="profile", help="docs block to write in docs/speed.md")
PARSER.add_argument("--updates", type=int, help="updates of the timed run (default: the case's own in speed.py)")


class Enough(BaseException):
    """Raised at the update the measurement ends with: it passes through the scripts' ``except Exception``."""


def lstm_flops(x, w_ih, w_hh, *args, **kwargs) -> int:
    """oneDNN's LSTM layer: a multiply-add per weight per row of ``x`` (steps x batch rows)."""
    return 2 * (x.numel() // x.shape[-1]) * (w_ih.numel() + w_hh.numel())


def flop_counter(total: list[int], on: threading.Event):
    """A dispatch mode that adds the FLOPs of each op it sees to ``total[0]`` while ``on`` is set."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    formulas = flop_registry | {aten.mkldnn_rnn_layer: lstm_flops}
    formulas[aten.mkldnn_rnn_layer_backward] = lambda *args, **kwargs: 2 * lstm_flops(*args)

    class CountFlops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if on.is_set() and (formula := formulas.get(func._overloadpacket)):
                total[0] += formula(*args, **(kwargs or {}), out_val=out)
            return out

    return CountFlops


def peak_gflops(bursts: int = 10, seconds: float = 0.3) -> float:
    """GFLOP/s of a 1024x1024 float32 matmul loop with torch's current threads: the best of ``bursts`` bursts, so
    that other work on the machine lowers it less."""
    import torch

    a, b, best = torch.randn(1024, 1024), torch.randn(1024, 1024), 0.0
    a @ b
    for _ in range(bursts):
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            a @ b
            n += 1
        best = max(best, 2 * 1024**3 * n / elapsed / 1e9)
    return best


def child(argv: list[str], updates: int, counted: bool) -> dict:
    """Run ``argv`` (a script and its flags) in this process until ``updates`` updates are done; what it measured."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # no "gpuGetDeviceCount failed" line from the profiler
    import torch
    from torch.utils.tensorboard import SummaryWriter

    os.chdir(tempfile.mkdtemp(prefix="profile-"))
    sys.path.insert(0, str(pv.ROOT))
    marks, state, flops, on = [], {"grad_at": None, "backward": 0.0}, [0], threading.Event()
    profiler = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True, with_flops=True
    )
    add_scalar, backward, thread_run = SummaryWriter.add_scalar, torch.Tensor.backward, threading.Thread.run

    def marked(self, tag, value, global_step=None, *args, **kwargs):
        add_scalar(self, tag, value, global_step, *args, **kwargs)
        if tag != "charts/SPS":
            return
        marks.append({"time": time.time(), "step": global_step, "flops": flops[0], "threads": torch.get_num_threads()})
        marks[-1] |= {"grad_at": state["grad_at"], "backward": state["backward"]}
        state.update(grad_at=None, backward=0.0)
        (on.set if counted and len(marks) == 1 else on.clear)()  # count the second update only
        if not counted and len(marks) == updates - 1:
            profiler.start()
        if len(marks) == (2 if counted else updates):
            raise Enough

    def first_grad_forward(module, inputs):
        if state["grad_at"] is None and torch.is_grad_enabled():
            state["grad_at"] = time.time()

    def timed_backward(self, *args, **kwargs):
        start = time.time()
        backward(self, *args, **kwargs)
        state["backward"] += time.time() - start

    SummaryWriter.add_scalar = marked
    if counted:
        CountFlops = flop_counter(flops, on)

        def counted_run(self):  # every thread the script starts counts too (cleanba_impala.py's actors)
            with CountFlops():
                thread_run(self)

        threading.Thread.run = counted_run
        CountFlops().__enter__()
    else:
        torch.nn.modules.module.register_module_forward_pre_hook(first_grad_forward)
        torch.Tensor.backward = timed_backward
    sys.argv = argv
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except Enough:
        pass
    if counted:
        return {"flops": marks[1]["flops"] - marks[0]["flops"], "steps": marks[1]["step"] - marks[0]["step"]}
    profiler.stop()
    ops = sorted(profiler.key_averages(), key=lambda op: -op.self_cpu_time_total)
    top = [(op.key, op.self_cpu_time_total / 1e6) for op in ops]
    arithmetic = sum(seconds for key, seconds in top if any(word in key for word in ARITHMETIC))
    return {"marks": marks, "top": top[:6], "arithmetic": arithmetic, "peak": peak_gflops()}


def in_fresh_process(*args) -> dict:
    """:func:`child` in a new interpreter (its own imports, threads and JVM)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(child, *args).result()


def run_case(case: str, args) -> dict:
    """The timed and the counted run of ``case``, kept in ``--results``/<case>.json."""
    script, flags, steps, updates = speed.CASES[case]
    updates = args.updates or updates
    argv = [str(pv.ROOT / "cleanfive" / script), *flags, "--total-timesteps", str(steps * (updates + 1))]
    command = speed.shown([sys.executable, *argv])
    print(f"$ {command}", flush=True)
    timed, counted = in_fresh_process(argv, updates, False), in_fresh_process(argv, updates, True)
    window, profiled = timed["marks"][:-1], timed["marks"][-1]["time"] - timed["marks"][-2]["time"]
    seconds = window[-1]["time"] - window[0]["time"]
    rollout = sum((m["grad_at"] or m["time"]) - before["time"] for before, m in zip(window, window[1:], strict=False))
    result = {"case": case, "command": command, "updates": updates, "threads": window[0]["threads"]}
    result |= {"sps": (window[-1]["step"] - window[0]["step"]) / seconds, "rollout": rollout / seconds}
    result |= {"backward": sum(m["backward"] for m in window[1:]) / seconds, "peak": timed["peak"]}
    result |= {"flops_per_step": counted["flops"] / counted["steps"], "arithmetic": timed["arithmetic"] / profiled}
    result |= {
        "top": [(key, seconds / profiled) for key, seconds in timed["top"]],
        "code": speed.this_tree(),
    }
    result |= {"date": pv.now(), "machine": pv.machine(), "load": os.getloadavg()[0]}
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / f"{case}.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def row(kept: dict) -> str:
    """One table row of a kept case."""
    achieved = kept["flops_per_step"] * kept["sps"] / 1e9
    split = f"{kept['rollout']:.0%} / {1 - kept['rollout']:.0%} ({kept['backward']:.0%})"
    top = ", ".join(f"`{key}` {share:.0%}" for key, share in kept["top"][:4])
    cells = [kept["case"], kept["threads"], f"{kept['sps']:.0f}", f"{kept['flops_per_step'] / 1e6:.2f}"]
    cells += [f"{achieved:.2f}", f"{kept['peak']:.0f}", f"{achieved / kept['peak']:.1%}", split]
    return "| " + " | ".join(map(str, [*cells, f"{kept['arithmetic']:.0%}", top])) + " |"


def main() -> None:
    args = PARSER.parse_args()
    pv.check(args.updates is None or args.updates >= 3, "--updates must be 3 or more (two for the speed, one profiled)")
    if not args.no_docs:
        pv.markers(speed.DOC, args.block)
    started, load_start = time.time(), os.getloadavg()[0]
    if args.from_results:
        settings = {case: args.updates or speed.CASES[case][3] for case in args.cases}
        kept = [k for case in args.cases if (k := pv.load_kept(args.results / f"{case}.json", updates=settings[case]))]
    else:
        kept = [run_case(case, args) for case in args.cases]
    pv.check(bool(kept), f"no results of {args.cases} with these --updates in {args.results}")
    if args.from_results:
        code, source = None, f"; {pv.kept_provenance(kept)}."
    else:
        code = speed.this_tree()
        source = f"; 1-minute load average {load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
        source += f", {(time.time() - started) / 60:.0f} min in all."
    note = (
        ". MFLOP per step: matrix products, convolutions and LSTM layers, forward and backward, per environment step"
        " (the second update); achieved = that x steps/s (the steady speed); peak: a 1024x1024 float32 matmul with the"
        " script's torch threads; rollout / update (backward): shares of the steady updates' wall time; matmul, conv,"
        " LSTM: their ops' share of one profiled update's wall time, as are the top ops' (self CPU time)."
    )
    lines = [*pv.header(PARSER, args, code, source, note)]
    lines += [
        "| case | torch threads | steps/s | MFLOP per step | achieved GFLOP/s | peak GFLOP/s | achieved ÷ peak "
        "| rollout / update (backward) | matmul, conv, LSTM | top ops by self CPU time |",
        "|---" * 10 + "|",
    ]
    lines += [row(k) for k in kept]
    lines += ["", "Commands (each in an empty folder):", ""]
    lines += [f"- {k['case']}, {k['updates']} updates: `{k['command']}`" for k in kept]
    table = "\n".join(lines)
    print(table)
    if not args.no_docs:
        pv.write_block(speed.DOC, args.block, table)


if __name__ == "__main__":
    main()
