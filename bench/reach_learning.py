"""How much return and success rise in reach learning runs, against a control that cannot learn.

Run by hand (it starts Ray and RLinf; on a shared machine take the heavy-run lock)::

    flock /tmp/dexrl-heavy.lock .venv/bin/python bench/reach_learning.py --seeds 0 1 2

Each seed runs ``dexrl train --suite reach --model pi0 --smoke`` for ``--steps`` global steps
twice: as shipped, and with the policy's learning rate 0 (the control). Printed per run: return
and success averaged over the first and the last 3 steps, wall time and median step time; then
the mean rise and its spread over seeds, for both arms. All runs' curves are overlaid in
``OUT/seeds.png``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from dexrl.curves import plot_runs
from dexrl.testing.reach import CONTROL, rise, run_reach


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None, help="folder for the run folders")
    parser.add_argument("--no-control", action="store_true")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="reach-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    arms = {"ppo": ()} if args.no_control else {"ppo": (), "control": CONTROL}
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores, shared machine)")
    header = (f"{'arm':8} {'seed':>4} {'return first→last':>20} {'success first→last':>20} "
              f"{'wall s':>7} {'step s':>7}")
    print(header)
    rises: dict[str, list[tuple[float, float]]] = {arm: [] for arm in arms}
    dirs = []
    for seed in args.seeds:
        for arm, overrides in arms.items():
            run_dir = out / f"{arm}-s{seed}"
            start = time.perf_counter()
            curves = run_reach(run_dir, seed, args.steps, *overrides)
            wall = time.perf_counter() - start
            ret, succ = rise(curves, "env/return"), rise(curves, "env/success_once")
            steps = curves.series["time/step"][1][1:]  # after the first
            rises[arm].append((ret[1] - ret[0], succ[1] - succ[0]))
            dirs.append(run_dir)
            print(f"{arm:8} {seed:>4} {ret[0]:>9.3f} → {ret[1]:>7.3f} {succ[0]:>9.2f} → "
                  f"{succ[1]:>7.2f} {wall:>7.0f} {statistics.median(steps):>7.1f}", flush=True)
    for arm, values in rises.items():
        r = [v[0] for v in values]
        s = [v[1] for v in values]
        spread = statistics.stdev(r) if len(r) > 1 else 0.0
        print(f"{arm}: return rise mean {statistics.fmean(r):+.3f} (sd {spread:.3f}, "
              f"min {min(r):+.3f}), success rise mean {statistics.fmean(s):+.2f} "
              f"(min {min(s):+.2f}) over {len(r)} seed(s)")
    if "control" in rises:
        gap = statistics.fmean(v[0] for v in rises["ppo"]) - statistics.fmean(
            v[0] for v in rises["control"])
        print(f"return rise, PPO minus control: {gap:+.3f}")
    print(f"curves: {plot_runs(dirs, out / 'seeds.png')}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
