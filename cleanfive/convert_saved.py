# docs: docs/arena.md#model-files (model and checkpoint files hold data, never code)
"""Convert a model or checkpoint written by a cleanfive script before 2026-11-27 to plain data, in place.

Files written before then hold NumPy arrays and scalars as pickled objects, which `torch.load(weights_only=True)` (what
every cleanfive script now uses) refuses. This reads such a file allowing NumPy's arrays, dtypes and scalars and
nothing else (it still never runs code from the file), and writes it again with the arrays as tensors in the form the
scripts read ({"__ndarray__": tensor}); the original is kept as PATH.old.

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
        os.replace(path, path + ".old")
        torch.save(to_plain(saved), path)
        print(f"converted {path} (the original is kept as {path}.old)")
