"""Every default is pinned: the five scripts' ``Args``, each world's defaults (``world_defaults``, its constructor's
keyword defaults, its score weights) and the constants of the shared modules, against ``tests/golden/defaults.json``.

A changed default fails here until ``tests/golden/defaults.json`` is renewed on purpose (``tests/golden.py`` says how).
"""

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
from pathlib import Path

import numpy as np
import pytest
from golden import check_value

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("ppo_lstm_selfplay", "five_surgery", "ppo_gridnet_masked", "ppo_action_guidance", "cleanba_impala")
SHARED = ("envs.atari", "envs.board", "envs.evaluation", "envs.football", "envs.microrts", "envs.moba", "envs.teams")
SHARED += ("trueskill_league",)


def plain(value):
    """A default as JSON data, or None for what is not a value (a function, a class, a pattern, a module)."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float | np.floating):
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.ndarray):  # a large table (the lane world's off-lane grid) by its bytes' hash
        array = {"array": value.dtype.str, "shape": list(value.shape)}
        if value.size > 64:
            return array | {"sha256": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()}
        return array | {"values": value.ravel().tolist()}
    if isinstance(value, tuple | list):
        items = [plain(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        items = {str(k): plain(v) for k, v in value.items()}
        return None if any(items[str(k)] is None and v is not None for k, v in value.items()) else items
    return None


def constants(namespace) -> dict:
    """The upper-case names of a module or class whose values are data."""
    found = {}
    for name, value in vars(namespace).items():
        if name.lstrip("_").isupper() and plain(value) is not None:
            found[name] = plain(value)
    return found


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "cleanfive" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_default_of_a_scripts_args_is_pinned(name):
    args = dataclasses.asdict(load_script(name).Args())
    assert len(args) >= 10, f"{name}: Args has only {sorted(args)}"
    check_value("defaults.json", f"{name}.Args", plain(args))


@pytest.mark.parametrize("name", SHARED)
def test_every_constant_and_keyword_default_of_a_shared_module_is_pinned(name):
    """Module constants (reward terms, bot settings, TrueSkill's parameters), the upper-case constants of its classes,
    and the keyword defaults of its public functions and classes' constructors."""
    module = importlib.import_module(f"cleanfive.{name}")
    found = {"constants": constants(module)}
    for attr, value in sorted(vars(module).items()):
        if getattr(value, "__module__", None) != module.__name__ or attr.startswith("_"):
            continue
        if inspect.isclass(value):
            found[f"{attr} constants"] = constants(value)
            value = value.__init__
        if inspect.isfunction(value):
            params = inspect.signature(value).parameters.values()
            found[f"{attr}()"] = {p.name: plain(p.default) for p in params if p.default is not inspect.Parameter.empty}
    assert found["constants"], f"cleanfive.{name} has no constants to pin"
    check_value("defaults.json", f"cleanfive.{name}", found)


def test_each_worlds_defaults_are_pinned():
    """The values a training script takes in each world for the flags it leaves unset."""
    from cleanfive.envs.teams import TEAM_ENV_IDS, world_defaults

    worlds = {env_id: plain(world_defaults(env_id)) for env_id in TEAM_ENV_IDS}
    assert set(worlds) >= {"ConnectFour-v1", "TicTacToe-v1", "Moba5v5-v0", "VmasFootball-v0"}
    check_value("defaults.json", "world_defaults", worlds)


def test_plain_keeps_values_and_drops_what_is_not_data():
    """The snapshot's encoder: a default that could not be encoded would be missing from the pin, not pinned."""
    assert plain({"a": (1, 2.5), "b": np.float32(0.5)}) == {"a": [1, 2.5], "b": 0.5}
    assert plain(np.array([[1, 2]], dtype=np.int8)) == {"array": "|i1", "shape": [1, 2], "values": [1, 2]}
    assert plain(print) is None and plain((1, print)) is None and plain({"f": print}) is None
    assert plain(None) is None and plain([None]) == [None]
    big = plain(np.zeros(65, dtype=np.float32))
    assert big["shape"] == [65] and big["sha256"] != plain(np.ones(65, dtype=np.float32))["sha256"]
