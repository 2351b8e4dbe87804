"""Automatic restarts (``--max-restarts N``): a run that failed for a reason that may not happen
again restarts itself from its last complete checkpoint, up to N times, with a growing wait.

Each restart is ``dexrl resume RUN`` in a child process: the same command a person would type,
so the same checks (the run folder, the saved config, the checkpoint it picks) and a fresh
RLinf and a fresh private Ray, which one process cannot have twice (RLinf's ``Cluster`` is made
once per process). Each restart is recorded in ``run-state.json`` (``restarts``) and in the
run's log. Design notes: docs/failures.md#automatic-restarts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from dexrl.bridge.launch.spec import LaunchOptions
from dexrl.checkpoints.files.steps import last_complete
from dexrl.errors import DexrlError
from dexrl.runs.layout import LOG_FILE
from dexrl.runs.state import read, record_restart

# Failures that may not happen again: a worker process that died (a crash, a SIGKILL, a
# preempted machine), a lost node, a stall (a collective or weight sync that hung). Every other
# failure is deterministic and restarting would fail the same way: divergence
# (training-diverged), a config or a checkpoint problem, a full disk (disk-full), out of memory
# (training-out-of-memory: the same batch needs the same memory), an exception raised in a
# worker's code (training-worker-failed) or in RLinf's loop (training-loop-failed).
TRANSIENT = frozenset({"training-worker-died", "ray-node-lost", "training-stalled"})
BACKOFF_S = 30.0  # the first wait; each next one doubles, up to MAX_BACKOFF_S
MAX_BACKOFF_S = 600.0
BACKOFF_ENV = "DEXRL_RESTART_BACKOFF_S"  # the first wait, in seconds (tests set it low)
FAILED = 2  # a DexrlError's exit status


def backoff_s(attempt: int, first_s: float | None = None) -> float:
    """The wait before restart ``attempt`` (1, 2, ...): ``first_s`` doubled each time, capped."""
    if first_s is None:
        first_s = float(os.environ.get(BACKOFF_ENV) or BACKOFF_S)
    return min(MAX_BACKOFF_S, first_s * 2 ** (attempt - 1))


def resume_command(run_dir: Path, options: LaunchOptions) -> list[str]:
    """The child's command: ``dexrl resume RUN`` with the launch's own flags, restarting no
    further itself (the parent counts the restarts)."""
    command = [sys.executable, "-m", "dexrl", "resume", str(run_dir),
               "--stall-timeout", f"{options.stall_timeout:g}", "--max-restarts", "0"]
    if options.verbose:
        command.append("--verbose")
    if options.ray_address:
        command += ["--ray-address", options.ray_address]
    return command


def run_restarting(run_dir: Path, options: LaunchOptions, first: Callable[[], int],
                   say: Callable[[str], None]) -> int:
    """Run ``first`` (the launch in this process); after a transient failure, restart the run
    in a child ``dexrl resume`` up to ``options.max_restarts`` times.

    Returns:
        The last attempt's exit status (0 finished, 2 failed, 130/143 interrupted).

    Raises:
        DexrlError: the first attempt's error when it is not restarted.
    """
    try:
        return first()
    except DexrlError as exc:
        if exc.code not in TRANSIENT or options.max_restarts < 1:
            raise
        say(exc.render())
        code, message = exc.code, exc.message
    for attempt in range(1, options.max_restarts + 1):
        if not _wait(run_dir, options, attempt, code, message, say):
            return 128 + signal.SIGINT
        status = _child(resume_command(run_dir, options))
        if status != FAILED:
            return status  # finished or interrupted
        record = read(run_dir)
        code, message = str(record.get("error") or "unknown"), "the restarted run failed"
        if code not in TRANSIENT:
            return status
    if options.max_restarts:
        say(f"dexrl: gave up after {options.max_restarts} restart(s) (--max-restarts); "
            f"`dexrl resume {run_dir}` tries again")
    return FAILED


def _wait(run_dir: Path, options: LaunchOptions, attempt: int, code: str, message: str,
          say: Callable[[str], None]) -> bool:
    """Record restart ``attempt`` and wait its backoff; False when interrupted meanwhile."""
    delay = backoff_s(attempt)
    last = last_complete(run_dir)
    origin = last.path.name if last is not None else "step 0 (no checkpoint is complete)"
    when = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record_restart(run_dir, {"attempt": attempt, "of": options.max_restarts, "at": when,
                             "after": code, "message": message, "wait_s": delay,
                             "from_step": last.step if last is not None else 0})
    line = (f"Restart {attempt} of {options.max_restarts} in {delay:.0f} s after [{code}]: "
            f"`dexrl resume {run_dir}` continues from {origin}.")
    _log(run_dir, f"dexrl: {when} {line}")
    say(line)
    try:
        time.sleep(delay)
    except KeyboardInterrupt:
        say(f"Interrupted before restart {attempt}: `dexrl resume {run_dir}` continues from "
            f"{origin}.")
        return False
    return True


def _log(run_dir: Path, line: str) -> None:
    """One line in the run's log (a full disk loses it: the terminal has it too)."""
    try:
        with (run_dir / LOG_FILE).open("a", encoding="utf-8") as log:
            log.write(line + "\n")
    except OSError:
        pass


def _child(command: list[str]) -> int:
    """Run ``command`` to its end, handing it the SIGINT and SIGTERM this process gets."""
    proc = subprocess.Popen(command)
    with _forwarded_to(proc):
        return proc.wait()


@contextmanager
def _forwarded_to(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """While the child runs, a SIGINT or SIGTERM to this process goes to it (a terminal's
    Ctrl-C reaches both already: the child stops its run, this process waits for it)."""
    def forward(signum: int, frame: object) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
