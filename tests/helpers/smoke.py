"""Run ``dexrl`` or one bridge launch (:mod:`smoke_run`) as a subprocess and watch it: the smoke,
multi-node, killed-driver and plugin tests.

:data:`EXT_DIR` holds the RLinf extension modules that Ray workers import by name
(``dexrl_tiny_ext``); :func:`run_process` puts it on the child's ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "smoke_run.py"
EXT_DIR = HERE / "ext"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    peak_pss: int
    seconds: float
    session: int  # the run's process session (it was started in a new one)
    seen_in_log_s: float | None = None  # when ``watch_log`` text first appeared (from start)


def _tree_pss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            continue
    return total


DEXRL = str(Path(sys.executable).with_name("dexrl"))


def smoke(run_dir: Path, mode: str, *overrides: str, **kwargs: object) -> Run:
    """Run ``smoke_run.py`` (one bridge launch) like :func:`run_process`."""
    return run_process([sys.executable, str(SCRIPT), str(run_dir), mode, *overrides], run_dir,
                       **kwargs)


def run_process(cmd: list[str], run_dir: Path, *, env: dict[str, str] | None = None,
                interrupt_after: str | None = None, watch_log: str | None = None,
                on_line: Callable[[str], object] | None = None, timeout: float = 600,
                cwd: Path | None = None) -> Run:
    """Run ``cmd`` and sample the peak memory (PSS) of its whole process tree.

    With ``interrupt_after``, send SIGINT to its process group (as a terminal's Ctrl-C does)
    once that text appears on stdout. With ``watch_log``, note when that text first appears in
    the run's ``logs/driver.log``. ``on_line`` is called with every stdout line.
    """
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(EXT_DIR),
                                                        full_env.get("PYTHONPATH")]))
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, start_new_session=True, cwd=cwd)
    peak, seen, done = 0, None, threading.Event()
    log = run_dir / "logs" / "driver.log"

    def sample() -> None:
        nonlocal peak, seen
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                peak = max(peak, _tree_pss(root))
            except psutil.Error:
                return
            if watch_log and seen is None and log.is_file() and watch_log in log.read_text():
                seen = time.monotonic() - start
            done.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout_lines: list[str] = []
    try:
        deadline = start + timeout
        for line in proc.stdout:
            stdout_lines.append(line)
            if interrupt_after and interrupt_after in line:
                os.killpg(proc.pid, signal.SIGINT)
            if on_line is not None:
                on_line(line)
            if time.monotonic() > deadline:
                break
        stderr = proc.stderr.read()
        returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        done.set()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return Run(returncode, "".join(stdout_lines), stderr, peak, time.monotonic() - start,
               proc.pid, seen)


def session_leftovers(session_id: int) -> list[str]:
    """``pid name`` of every process still in session ``session_id`` (a run's own session)."""
    left = []
    for p in psutil.process_iter(["pid", "name"]):
        try:
            if os.getsid(p.pid) == session_id:
                left.append(f"{p.pid} {p.info['name']}")
        except (ProcessLookupError, PermissionError):
            continue
    return left
