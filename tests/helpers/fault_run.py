"""A real ``dexrl train`` smoke run in a process group of its own, for the fault reproductions:
signals sent as a terminal's Ctrl-C does (to the whole foreground group) and its output read as
it comes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dexrl.checkpoints.files.steps import list_checkpoints
from dexrl.runs.state import STATE_FILE

REACH = ["train", "--suite", "reach", "--model", "pi0", "--smoke"]


@dataclass
class FaultRun:
    """One ``python -m dexrl`` process and what it printed so far."""

    proc: subprocess.Popen[str]
    run_dir: Path
    stdout: list[str] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)

    def wait_for(self, text: str, timeout_s: float) -> bool:
        """Wait until a stdout line contains ``text`` (False on timeout or exit)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(text in line for line in self.stdout):
                return True
            if self.proc.poll() is not None:
                time.sleep(0.5)  # the reader threads finish the last lines
                return any(text in line for line in self.stdout)
            time.sleep(0.2)
        return False

    def signal_driver(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def signal_group(self, signum: int) -> None:
        """What a terminal does on Ctrl-C: the signal to every process of the group."""
        os.killpg(self.proc.pid, signum)

    def finish(self, timeout_s: float) -> int:
        code = self.proc.wait(timeout=timeout_s)
        time.sleep(0.5)
        return code

    def state(self) -> dict:
        return json.loads((self.run_dir / STATE_FILE).read_text())

    def complete_steps(self) -> list[int]:
        return [c.step for c in list_checkpoints(self.run_dir) if c.complete]

    def all_steps(self) -> list[int]:
        return [c.step for c in list_checkpoints(self.run_dir)]


def start(run_dir: Path, *overrides: str, args: list[str] | None = None) -> FaultRun:
    """``dexrl train --suite reach --model pi0 --smoke --run-dir RUN_DIR OVERRIDES`` in a new
    session (its own process group, as a shell's foreground job has)."""
    command = [sys.executable, "-m", "dexrl", *(args or REACH), "--run-dir", str(run_dir),
               *overrides]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    run = FaultRun(proc, Path(run_dir))
    for stream, lines in ((proc.stdout, run.stdout), (proc.stderr, run.stderr)):
        threading.Thread(target=lambda s=stream, out=lines: out.extend(iter(s.readline, "")),
                         daemon=True).start()
    return run


def ctrl_c_twice(run: FaultRun) -> None:
    """SIGINT to the driver, then to its whole process group: a Ctrl-C pressed twice."""
    run.signal_driver(signal.SIGINT)
    time.sleep(0.3)
    run.signal_group(signal.SIGINT)
    time.sleep(0.3)
    run.signal_group(signal.SIGINT)


def worker_pids(root: int, title: str) -> list[int]:
    """The run's processes (descendants of its driver ``root``) whose command line, Ray's
    process title ``ray::Class...``, names ``title``; never another run's on the machine."""
    import psutil

    found = []
    for proc in psutil.Process(root).children(recursive=True):
        try:
            if any(f"ray::{title}" in part for part in proc.cmdline()):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return found
