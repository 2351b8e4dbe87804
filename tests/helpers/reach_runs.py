"""Learning runs on the built-in reach tasks through the real CLI, how much they rose, and
``dexrl eval`` of what they learned.

Shared by the learning tests (``tests/scenarios/test_reach_runs.py``) and bench/
(``reach_learning.py``, ``cued_sweep.py``, ``modes.py``, ``libero_run.py``, which put ``tests/`` on
their path); nothing in dexrl uses it. Each run is a real ``dexrl train --suite TASK --model
MODEL --smoke`` subprocess (Ray, RLinf's workers and runner), read back from its own TensorBoard
events.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from dexrl.curves import RunCurves, read_run

# The control that cannot learn: the policy's learning rate is 0 (the critic still trains).
CONTROL = ("actor.optim.lr=0",)
# The cued task with both cues cut, in training and in its eval envs: one instruction for every
# episode and no target in the image. A policy trained so cannot beat the blind bound.
FIXED_INSTRUCTION = "move the gripper to the target"
MASK_IMAGE = ("reach_cued.show_cue=false",)
MASK_INSTRUCTION = (f"reach_cued.fixed_instruction={FIXED_INSTRUCTION}",)
# The evaluations of a cued checkpoint: as trained, then with each cue masked and both.
MASKS = {"as trained": (), "image masked": MASK_IMAGE, "instruction masked": MASK_INSTRUCTION,
         "both masked": MASK_IMAGE + MASK_INSTRUCTION}
ABLATION = tuple(f"env.{split}.{key}" for split in ("train", "eval") for key in (
    "reach_cued.show_cue=false", f"reach_cued.fixed_instruction='{FIXED_INSTRUCTION}'"))
WINDOW = 3  # steps averaged at each end of a run


def dexrl_command() -> list[str]:
    """The ``dexrl`` entry point beside this Python, or ``python -m dexrl`` where there is none
    (dexrl run from its source tree, as on a bare GPU machine)."""
    script = Path(sys.executable).parent / "dexrl"
    return [str(script)] if script.exists() else [sys.executable, "-m", "dexrl"]


def run_reach(run_dir: Path, seed: int, steps: int, *overrides: str, suite: str = "reach",
              model: str = "pi0", timeout_s: float = 900.0,
              env: dict[str, str] | None = None, ckpt: Path | None = None) -> RunCurves:
    """Train ``model`` on ``suite`` for ``steps`` global steps with ``seed`` (env starts and
    actor seed), in ``env`` (default: this process's environment): the ``--smoke`` policy, or
    the checkpoint ``ckpt``.

    Raises:
        RuntimeError: the run failed; the message holds the end of its output.
    """
    policy = ["--ckpt", str(ckpt)] if ckpt else ["--smoke"]
    cmd = [*dexrl_command(), "train", "--suite", suite, "--model", model, *policy,
           "--run-dir", str(run_dir), f"runner.max_steps={steps}", f"actor.seed={seed}",
           f"env.train.seed={seed}", *overrides]
    _run(cmd, timeout_s, env)
    return read_run(run_dir)


def evaluate(run_dir: Path, out: Path, episodes_per_task: int, *overrides: str,
             suite: str = "reach_cued", timeout_s: float = 900.0) -> dict[str, Any]:
    """``dexrl eval`` of a run's last checkpoint on its task; returns results.json."""
    cmd = [*dexrl_command(), "eval", "--ckpt", str(run_dir), "--suite", suite,
           "--episodes-per-task", str(episodes_per_task), "--num-envs", "32", "--out", str(out),
           *overrides]
    _run(cmd, timeout_s, None)
    return json.loads((out / "results.json").read_text())


def _run(cmd: list[str], timeout_s: float, env: dict[str, str] | None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False,
                          env={**(env or os.environ), "COLUMNS": "250"})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def rise(curves: RunCurves, tag: str, window: int = WINDOW) -> tuple[float, float]:
    """(mean of the first ``window`` steps, mean of the last ``window`` steps) of a metric."""
    values = curves.series[tag][1]
    return statistics.fmean(values[:window]), statistics.fmean(values[-window:])
