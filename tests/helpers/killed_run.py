"""A run-state record as a SIGKILLed driver leaves it, for tests of what the next run says."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from dexrl.runs.state import STATE_FILE, Tracker


def write_killed_run(run_dir: Path, step: int,
                     ray: list[tuple[int, int | None]] | None = None) -> None:
    """``run-state.json`` saying ``running`` at ``step``, its driver pid gone (and ``ray``)."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    data = {**Tracker(run_dir, step).data, "pid": dead.pid, "pid_start": 1,
            "ray_processes": ray or []}
    (Path(run_dir) / STATE_FILE).write_text(json.dumps(data))
