"""What a test needs from the machine beyond the project's packages (Java, Chromium, an optional extra), as marks.

A test without what it needs skips with a reason starting ``missing:``; under ``CI=true`` (as CI runs ``.ci/run``)
tests/conftest.py turns that skip into a failure that names what is missing, so CI never passes by skipping.
"""

import importlib.util
import shutil

import pytest

MISSING = "missing: "
JAVA = shutil.which("java") is not None
MICRORTS = importlib.util.find_spec("gym_microrts") is not None
VMAS = importlib.util.find_spec("vmas") is not None


def microrts_missing() -> str | None:
    """Why the µRTS worlds cannot run here, or None."""
    if not JAVA:
        return f"{MISSING}a Java runtime on PATH (gym-microrts; .ci/run installs Debian's default-jre-headless)"
    if not MICRORTS:
        return f"{MISSING}the microrts extra (uv run --all-extras)"
    return None


def needs(why_not: str | None) -> pytest.MarkDecorator:
    """A skip mark when ``why_not`` (a ``missing:`` reason) is set; a mark that does nothing otherwise."""
    assert why_not is None or why_not.startswith(MISSING), why_not
    return pytest.mark.skipif(why_not is not None, reason=why_not or "")


needs_microrts = needs(microrts_missing())
needs_vmas = needs(None if VMAS else f"{MISSING}the vmas extra (uv run --all-extras)")
