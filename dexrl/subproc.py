"""Run a probe function in a fresh interpreter, bounded by a timeout.

Probes that import heavy or fragile native code (torch's CUDA init, an OpenGL context, LIBERO)
run here so that a hang is killed and a crash is an error message, not a dead doctor. The child
runs ``python -m dexrl.subproc module:function '<json kwargs>'`` and prints one JSON line.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any

from dexrl.errors import one_line

_MARK = "DEXRL-PROBE-RESULT "
_ERROR = "DEXRL-PROBE-ERROR "


class ProbeError(RuntimeError):
    """A probe failed, crashed or timed out; the message is one line saying which."""


def run_probe(target: str | Callable[..., dict[str, Any]],
              kwargs: Mapping[str, Any] | None = None, *,
              env: Mapping[str, str] | None = None, timeout: float = 60.0) -> dict[str, Any]:
    """Call ``module:function(**kwargs)`` in a child interpreter and return its dict result.

    Args:
        target: A module-level function (or its ``"module:function"`` name) returning a
            JSON-serialisable dict; the child imports it by name.
        kwargs: Keyword arguments, JSON-serialisable.
        env: Variables set (or, with an empty value, removed) on top of this process's env.
        timeout: Seconds before the child is killed.

    Raises:
        ProbeError: on timeout, a non-zero exit, or no result line.
    """
    child_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value == "":
            child_env.pop(key, None)
        else:
            child_env[key] = value
    if callable(target):
        target = f"{target.__module__}:{target.__name__}"
    cmd = [sys.executable, "-m", "dexrl.subproc", target, json.dumps(dict(kwargs or {}))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=child_env, check=False)
    except subprocess.TimeoutExpired:
        raise ProbeError(f"no answer within {timeout:.0f} s (killed)") from None
    for line in reversed(proc.stdout.splitlines()):
        if _MARK in line:
            return json.loads(line.split(_MARK, 1)[1])
        if _ERROR in line:
            raise ProbeError(line.split(_ERROR, 1)[1])
    raise ProbeError(_death(proc.returncode, proc.stderr))


def _death(code: int, stderr: str) -> str:
    """Why a child died without reporting (a signal, or the last line it wrote)."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return (lines[-1][:300] if lines else "") or f"exited with code {code}"


def main(argv: list[str]) -> None:
    """Child side: import the target, call it, print the marked JSON line, exit at once.

    A failure is reported as a marked one-line error. ``os._exit`` skips interpreter teardown,
    where native GL and Ray handles are known to print spurious errors or hang.
    """
    module, _, name = argv[0].partition(":")
    kwargs = json.loads(argv[1]) if len(argv) > 1 else {}
    try:
        line = _MARK + json.dumps(getattr(importlib.import_module(module), name)(**kwargs))
        code = 0
    except BaseException as exc:  # report every failure, EOFError from a prompt included
        line, code = _ERROR + one_line(exc), 1
    sys.stdout.write("\n" + line + "\n")  # on its own line, even after a prompt
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
