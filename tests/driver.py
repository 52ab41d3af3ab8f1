"""Run a script's `__main__` once per case in ONE interpreter: the imports (and µRTS' JVM) are most of a tiny run's
cost, so the cases after the first take a second or two each instead of several.

`drive(script, cases)` runs each case in its own folder and returns {name: (CompletedProcess, folder)}; the
CompletedProcess holds the exit code (SystemExit's code, 0 when the script returned, "exception" for an uncaught
exception, its traceback then on stderr), stdout, and stderr as file descriptor 2 saw it (C-level output included).
A flag "GLOB:pattern" is replaced by the first file the pattern matches in the case's folder: a file an earlier
case wrote.
"""

import json
import os
import subprocess
import sys

_DRIVER = """
import contextlib, glob, io, json, os, runpy, sys, tempfile, traceback
script, cases = sys.argv[1], json.loads(sys.argv[2])
for cwd, flags in cases:
    os.chdir(cwd)
    flags = [(sorted(glob.glob(f[5:])) or [f[5:]])[0] if f.startswith("GLOB:") else f for f in flags]
    sys.argv = [os.path.basename(script), *flags]
    out = io.StringIO()
    with tempfile.TemporaryFile("w+") as err:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        with contextlib.redirect_stdout(out):
            try:
                runpy.run_path(script, run_name="__main__")
                code = 0
            except SystemExit as exc:
                code = exc.code
            except BaseException:
                traceback.print_exc()
                code = "exception"
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        err.seek(0)
        print("RESULT " + json.dumps([code, out.getvalue(), err.read()]), flush=True)
"""


def drive(script, cases, env=None, timeout=300):
    """Run `cases` ({name: (folder, flags)}) of `script` in one process; folders are created as needed."""
    for folder, _ in cases.values():
        folder.mkdir(parents=True, exist_ok=True)
    driver = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(script), json.dumps([[str(p), list(f)] for p, f in cases.values()])],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
    results = [json.loads(line[7:]) for line in driver.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(results) == len(cases), driver.stderr[-3000:]
    return {
        name: (subprocess.CompletedProcess(flags, code, out, err), folder)
        for (name, (folder, flags)), (code, out, err) in zip(cases.items(), results, strict=True)
    }
