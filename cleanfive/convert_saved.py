# docs: docs/arena.md#model-files (model and checkpoint files hold data, never code)
"""Bring a model or checkpoint written by an older cleanfive script to today's format, in place.

The scripts read files of today's format only; each change of the format since is one step of `upgrade`, applied in
order, a step doing nothing to a file that already has it:

1. before 2026-11-27, files held NumPy arrays and scalars as pickled objects, which `torch.load(weights_only=True)`
   (what every cleanfive script now uses) refuses: this reads them allowing NumPy's arrays, dtypes and scalars and
   nothing else (it still never runs code from the file) and writes the arrays as tensors ({"__ndarray__": tensor});
2. before issue 25, a file of ppo_lstm_selfplay.py named no script: one whose network is that script's (a hero
   embedding, no input columns of five_surgery.py) gets "script";
3. each flag added since a file was written gets the value its run had (ADDED_FLAGS): a ppo_lstm_selfplay.py file
   from before --square-head (f926950) was trained without the head, one from before --random-openings (issue 88)
   without random openings;
4. a checkpoint's matchmaking state from before 0140671 named the learner's side "side": renamed "learner_side";
5. each flag removed since gives up its value (REMOVED_FLAGS): --bot-ladder and --bot-ladder-top left
   ppo_lstm_selfplay.py in issue 87, and with them each process's win rates against the bots in a checkpoint, and
   --pool-sampling both Five scripts (OpenAI Five's quality scores stay); a checkpoint of a run that used another
   value is not converted (resume it with the script at `a4d57ae`). --lstm-skip (a residual around the LSTM) left
   ppo_lstm_selfplay.py after `eebd269`: a model or checkpoint trained with it is not converted (play or resume it
   with the script at `eebd269`). The switches --norm-obs, --norm-reward and --zero-sum left both Five scripts after
   `eebd269` (those parts of the recipe are always on): a model trained with one off plays as before (its observation
   statistics stayed at their start), a checkpoint of such a run is not converted;
6. the sizes a script derives in runtime and no longer keeps in `Args` are dropped (DROPPED_FIELDS), γ among them,
   and so is --quiet, which changed no run and left all five scripts in issue 87 (a flag the project's rule for a
   reference script does not keep: no paper, no CleanRL convention, no default);
7. the converted file records the sha256 of each earlier version of itself (`converted_from`), so that a benchmark
   that names a model by its file's digest (`benchmark/ppo_lstm_selfplay_learning.py`) still knows it.

The original is kept as PATH.old.

    uv run python cleanfive/convert_saved.py runs/<run>/checkpoint.pt
"""

import hashlib
import os
import pickle
import sys
from dataclasses import dataclass

import numpy as np
import torch
import tyro

NDARRAY = "__ndarray__"  # as in every script's RUN MANAGEMENT block
NUMPY_DATA = [np._core.multiarray._reconstruct, np._core.multiarray.scalar, np.ndarray, np.dtype]
NUMPY_DATA += [getattr(np.dtypes, name) for name in dir(np.dtypes) if name.endswith("DType")]
# each script's flags added after it first saved files, with the value a run from before the flag had
ADDED_FLAGS = {"ppo_lstm_selfplay.py": dict(square_head=False, random_openings=False)}
# each script's flags removed since, with their value in a run that did without them (a checkpoint of a run with
# another value is not converted: the script at LAST_WITH[flag] resumes it)
REMOVED_FLAGS = {
    "ppo_lstm_selfplay.py": dict(bot_ladder=0.0, bot_ladder_top=0, pool_sampling="quality", lstm_skip=False)
}
REMOVED_FLAGS |= {"five_surgery.py": dict(pool_sampling="quality")}
for script in ("ppo_lstm_selfplay.py", "five_surgery.py"):  # parts of the recipe now always on (issue 87)
    REMOVED_FLAGS[script] |= dict(norm_obs=True, norm_reward=True, zero_sum=True)
LAST_WITH = dict(bot_ladder="a4d57ae", bot_ladder_top="a4d57ae", pool_sampling="a4d57ae")
LAST_WITH |= dict.fromkeys(("lstm_skip", "norm_obs", "norm_reward", "zero_sum"), "eebd269")
NETWORK_FLAGS = ("lstm_skip",)  # removed flags that shaped the network: a model with another value is refused too
TEAM_SCRIPTS = ("ppo_lstm_selfplay.py", "five_surgery.py")  # their checkpoints hold each process's matchmaking
# fields no script keeps in Args any more, dropped whatever their value (issue 87): --quiet (it changed no run), and
# the sizes the two Five scripts derive in runtime
SCRIPTS = (*TEAM_SCRIPTS, "ppo_gridnet_masked.py", "ppo_action_guidance.py", "cleanba_impala.py")
DROPPED_FIELDS = {script: ("quiet",) for script in SCRIPTS}
for script in TEAM_SCRIPTS:
    DROPPED_FIELDS[script] += ("num_players", "num_sequences", "minibatch_sequences", "gamma")
CONVERTED_FROM = "converted_from"  # the sha256 of each earlier version of the file, oldest first


@dataclass
class Args:
    paths: tyro.conf.Positional[tuple[str, ...]]  # --save-model files or checkpoint.pt files of cleanfive scripts


def to_plain(tree):
    """`tree` as tensors and plain values only: NumPy arrays as {NDARRAY: tensor}, NumPy scalars as Python numbers."""
    if isinstance(tree, np.ndarray):
        return {NDARRAY: torch.from_numpy(tree.copy())}
    if isinstance(tree, np.generic):
        return tree.item()
    if isinstance(tree, dict):
        return type(tree)((key, to_plain(value)) for key, value in tree.items())
    return type(tree)(to_plain(value) for value in tree) if isinstance(tree, list | tuple) else tree


def upgrade(saved: dict) -> dict:
    """A file's contents (plain data) brought to today's format: steps 2 to 6 of the module's docstring. Raises
    ValueError for a checkpoint that today's script cannot resume as its run went on (a removed flag not at the value
    of a run without it)."""
    saved = dict(saved)
    model = saved.get("model", {})
    if "script" not in saved and "hero_embedding.weight" in model and "input_index" not in model:
        saved["script"] = "ppo_lstm_selfplay.py"
    if "args" in saved:
        saved["args"] = {**ADDED_FLAGS.get(saved.get("script"), {}), **saved["args"]}
        for flag, value in REMOVED_FLAGS.get(saved.get("script"), {}).items():
            if saved["args"].pop(flag, value) != value and ("ranks" in saved or flag in NETWORK_FLAGS):
                raise ValueError(
                    f"its run used --{flag.replace('_', '-')}: play or resume it with the script at {LAST_WITH[flag]}"
                )
        for field in DROPPED_FIELDS.get(saved.get("script"), ()):
            saved["args"].pop(field, None)
    if saved.get("script") in TEAM_SCRIPTS and "ranks" in saved:  # a checkpoint: each process's matchmaking state
        ranks = [dict(local) for local in saved["ranks"]]
        for local in ranks:
            if "side" in local:
                local["learner_side"] = local.pop("side")
            local.pop("bot_win_rate", None)  # (--bot-ladder's)
        saved["ranks"] = ranks
    return saved


if __name__ == "__main__":
    args = tyro.cli(Args)
    for path in args.paths:
        try:
            with torch.serialization.safe_globals(NUMPY_DATA):
                saved = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            if "GLOBAL" not in str(exc):  # not a refused class or function: not a pickle at all
                print(f"error: cannot read {path} ({exc}); pass a cleanfive model or checkpoint", file=sys.stderr)
                sys.exit(2)
            reason = " ".join(str(exc).split())[:300]
            print(
                f"error: {path} holds objects other than data and NumPy arrays; not converted ({reason})",
                file=sys.stderr,
            )
            sys.exit(2)
        except (OSError, RuntimeError) as exc:
            print(
                f"error: cannot read {path} ({type(exc).__name__}: {exc}); pass a cleanfive model or checkpoint",
                file=sys.stderr,
            )
            sys.exit(2)
        if not isinstance(saved, dict):
            print(f"error: {path} holds no cleanfive model or checkpoint (a {type(saved).__name__})", file=sys.stderr)
            sys.exit(2)
        try:
            today = upgrade(to_plain(saved))
        except ValueError as exc:
            print(f"error: {path} is not converted: {exc}", file=sys.stderr)
            sys.exit(2)
        with open(path, "rb") as file:
            today[CONVERTED_FROM] = [*today.get(CONVERTED_FROM, []), hashlib.sha256(file.read()).hexdigest()]
        os.replace(path, path + ".old")
        torch.save(today, path)
        print(f"converted {path} (the original is kept as {path}.old)")
