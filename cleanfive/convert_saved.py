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
   from before --square-head (f926950) was trained without the head;
4. a checkpoint's matchmaking state from before 0140671 named the learner's side "side": renamed "learner_side";
5. a ppo_lstm_selfplay.py or five_surgery.py checkpoint from before --bot-ladder (5dd86f3) gets each process's win
   rates against the bots, zeros (its run did not climb a ladder).

The original is kept as PATH.old.

    uv run python cleanfive/convert_saved.py runs/<run>/checkpoint.pt
"""

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
ADDED_FLAGS = {"ppo_lstm_selfplay.py": dict(square_head=False)}
TEAM_SCRIPTS = ("ppo_lstm_selfplay.py", "five_surgery.py")  # their checkpoints hold matchmaking and bot win rates


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


def num_bots(args: dict) -> int:
    """How many bots the bot games of a team script's run of `args` drew from: its --bot-opponents, else its
    references, else its world's."""
    if args.get("bot_opponents") or args.get("references"):
        return len(args.get("bot_opponents") or args["references"])
    from cleanfive.envs.teams import make_team_env

    return len(make_team_env(args["env_id"], 1, 0, args.get("num_heroes")).bot_names)


def upgrade(saved: dict) -> dict:
    """A file's contents (plain data) brought to today's format: steps 2 to 5 of the module's docstring."""
    saved = dict(saved)
    model = saved.get("model", {})
    if "script" not in saved and "hero_embedding.weight" in model and "input_index" not in model:
        saved["script"] = "ppo_lstm_selfplay.py"
    if "args" in saved:
        saved["args"] = {**ADDED_FLAGS.get(saved.get("script"), {}), **saved["args"]}
    if saved.get("script") in TEAM_SCRIPTS and "ranks" in saved:
        ranks = []
        for local in saved["ranks"]:
            local = dict(local)
            if "side" in local and "learner_side" not in local:
                local["learner_side"] = local.pop("side")
            if "bot_win_rate" not in local:
                local["bot_win_rate"] = {NDARRAY: torch.zeros(num_bots(saved["args"]), dtype=torch.float64)}
            ranks.append(local)
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
        os.replace(path, path + ".old")
        torch.save(upgrade(to_plain(saved)), path)
        print(f"converted {path} (the original is kept as {path}.old)")
