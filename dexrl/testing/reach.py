"""Learning runs on the built-in reach task through the real CLI, and how much they rose.

Shared by the slow learning test and ``bench/reach_learning.py``: each run is a real
``dexrl train --suite reach --model pi0 --smoke`` subprocess (Ray, RLinf's workers and runner),
read back from its own TensorBoard events.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

from dexrl.curves import RunCurves, read_run

COMMAND = ["train", "--suite", "reach", "--model", "pi0", "--smoke"]
# The control that cannot learn: the policy's learning rate is 0 (the critic still trains).
CONTROL = ("actor.optim.lr=0",)
WINDOW = 3  # steps averaged at each end of a run


def run_reach(run_dir: Path, seed: int, steps: int, *overrides: str,
              timeout_s: float = 900.0, env: dict[str, str] | None = None) -> RunCurves:
    """Train on reach for ``steps`` global steps with ``seed`` (env starts and actor seed), in
    ``env`` (default: this process's environment).

    Raises:
        RuntimeError: the run failed; the message holds the end of its output.
    """
    cmd = [str(Path(sys.executable).parent / "dexrl"), *COMMAND, "--run-dir", str(run_dir),
           f"runner.max_steps={steps}", f"actor.seed={seed}", f"env.train.seed={seed}",
           *overrides]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                          env={**(env or os.environ), "COLUMNS": "250"})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return read_run(run_dir)


def rise(curves: RunCurves, tag: str, window: int = WINDOW) -> tuple[float, float]:
    """(mean of the first ``window`` steps, mean of the last ``window`` steps) of a metric."""
    values = curves.series[tag][1]
    return statistics.fmean(values[:window]), statistics.fmean(values[-window:])
