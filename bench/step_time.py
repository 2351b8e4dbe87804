"""Where a CPU smoke step's time goes, and the step time before/after dexrl's cuts, in one run.

Run by hand (it starts LIBERO, Ray and RLinf; on a shared machine take the heavy-run lock)::

    flock /tmp/dexrl-heavy.lock .venv/bin/python bench/step_time.py [--steps 2] [--skip-phases]
        [--repeats 3]

1. Phases (in-process, no Ray): RLinf's ``LiberoEnv`` built as the smoke env worker builds it,
   timed piece by piece — the env subprocess's start (spawn, imports, first scene build), the
   first ``reset`` (RLinf rebuilds the scene at every training reset, then settles it with 15
   rendered steps), 10 steps, a second ``reset`` — at the baseline and the smoke cameras.
2. Runs: ``dexrl train --suite libero_spatial --model pi0 --smoke runner.max_steps=N`` with the
   baseline settings (:data:`BASELINE`, the smoke overlay before the cut) and as shipped; per step
   ``time/step`` and RLinf's ``env/bootstrap_step`` from the run's own TensorBoard events, and the
   wall time of the whole command. Prints the ratios shipped / baseline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dexrl.curves import read_run

# The smoke overlay's settings before the cut, restored by overrides.
CAMERAS_256 = ("env.train.init_params.camera_heights=256",
              "env.train.init_params.camera_widths=256")
BASELINE = CAMERAS_256
SHIPPED: tuple[str, ...] = ()

PHASES = r"""
import sys, time
import numpy as np
from dexrl.bridge.envs.libero import prepare_process
prepare_process()
from dexrl.bridge.registry import register
register()
from dexrl.config.compose import compose
from rlinf.envs.libero.libero_env import LiberoEnv
cfg = compose("libero_spatial_ppo_dexbotic_pi0", ["+smoke=cpu", *sys.argv[1:]]).env.train
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); print(f"{name}={now - t:.2f}", flush=True); t = now
env = LiberoEnv(cfg, num_envs=1, seed_offset=0, total_num_processes=1, worker_info=None)
worker = env.env.workers[0]
worker.parent_remote.send(["getattr", "dexrl_probe"]); worker.parent_remote.recv()
lap("subprocess_start")
env.reset(); lap("reset_1")
for _ in range(10):
    env.step(np.zeros((1, 7)))
lap("steps_10")
env.is_start = True
env.reset(); lap("reset_2")
env.env.close()
"""


def phases(overrides: tuple[str, ...]) -> dict[str, float]:
    """Seconds per phase of one LiberoEnv life, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PHASES, *overrides], capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the phase probe failed:\n{done.stderr[-2000:]}")
    return {k: float(v) for k, v in (line.split("=") for line in done.stdout.splitlines()
                                     if "=" in line and " " not in line)}


def smoke_run(out: Path, steps: int, overrides: tuple[str, ...]) -> tuple[float, dict]:
    """Wall seconds of one smoke ``dexrl train`` and its TensorBoard series."""
    exe = str(Path(sys.executable).parent / "dexrl")
    cmd = [exe, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
           "--run-dir", str(out), f"runner.max_steps={steps}", *overrides]
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return wall, read_run(out).series


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--skip-phases", action="store_true")
    parser.add_argument("--repeats", type=int, default=1,
                        help="pairs of runs, in alternating order; prints median and range")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores, shared machine)")
    arms = {"baseline": BASELINE, "shipped": SHIPPED}
    if not args.skip_phases:
        for arm in arms:
            times = phases(CAMERAS_256 if arm == "baseline" else ())
            print(f"LiberoEnv phases, {arm}: " + "  ".join(f"{k} {v:.1f}s"
                                                            for k, v in times.items()))
    root = Path(tempfile.mkdtemp(prefix="step-time-"))
    ratios: list[tuple[float, float, float]] = []
    for repeat in range(args.repeats):
        results = {}
        order = list(arms.items()) if repeat % 2 == 0 else list(arms.items())[::-1]
        for arm, overrides in order:  # alternated, so neither arm always runs on a warm cache
            wall, series = smoke_run(root / f"{arm}{repeat}", args.steps, overrides)
            step = series["time/step"][1]
            boot = series["time/env/env/bootstrap_step"][1]
            results[arm] = (wall, step)
            print(f"{arm:9} wall {wall:6.1f}s  step s: {' '.join(f'{s:.1f}' for s in step)}  "
                  f"env/bootstrap_step s: {' '.join(f'{b:.1f}' for b in boot)}", flush=True)
        (b_wall, b_step), (s_wall, s_step) = results["baseline"], results["shipped"]
        ratios.append((s_step[0] / b_step[0], sum(s_step[1:]) / max(sum(b_step[1:]), 1e-9),
                       s_wall / b_wall))
        print("ratio shipped/baseline: first step {:.2f}, later steps {:.2f}, whole command "
              "{:.2f}".format(*ratios[-1]), flush=True)
    if len(ratios) > 1:
        spread = [f"{name} {statistics.median(r):.2f} [{min(r):.2f}-{max(r):.2f}]"
                  for name, r in zip(("first step", "later steps", "whole command"),
                                     zip(*ratios, strict=True), strict=True)]
        print(f"median [min-max] of {len(ratios)} repeats: " + ", ".join(spread))
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
