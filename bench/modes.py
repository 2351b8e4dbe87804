"""Wall time per global step of the execution modes (sync, async, pipeline), measured alternately.

Run by hand (it starts Ray and RLinf; on a shared machine take the heavy-run lock)::

    flock /tmp/dexrl-heavy.lock .venv/bin/python bench/modes.py --rounds 3 --steps 12

Each round runs ``dexrl train --suite TASK --model MODEL --smoke --mode M`` once per mode, in
turn (sync, async, pipeline, then again), so a drift of the machine's load touches every mode
alike. A run's step times are RLinf's own ``time/step`` from its TensorBoard events, without the
first ``--skip`` steps (start-up, the first env resets, the async rollouts filling the store).
Printed: per run, the median step and the run's wall time; per mode, the median over runs of
those medians, their range, and the ratio to sync's median; for async, the trajectories RLinf
dropped unused (``rollout/discarded_unused_trajs``) and the mean policy versions the trained data
lagged by.

A global step is one PPO update on the same number of samples in every mode (the shipped
``algorithm.rollout_store_size_per_rank: 1`` takes one env round per actor rank), so time per
step compares throughput at the same batch; learning per step is compared in
docs/execution-modes.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from dexrl.config.modes import MODES
from dexrl.reach.experiments import run_reach


def _stale_mean(series: dict, steps: list[int]) -> float | None:
    """The mean policy versions behind of the samples trained at ``steps``."""
    lags = []
    for step in steps:
        weights = {int(tag.split("_")[-1].split("/")[0]): dict(zip(*series[tag], strict=True))
                   for tag in series if tag.startswith("rollout/data_staleness_")}
        at = {d: by_step.get(step, 0.0) for d, by_step in weights.items()}
        if sum(at.values()):
            lags.append(sum(d * r for d, r in at.items()) / sum(at.values()))
    return statistics.fmean(lags) if lags else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="reach_cued", choices=("reach", "reach_cued"))
    parser.add_argument("--model", default="pi0")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--skip", type=int, default=2, help="first steps left out")
    parser.add_argument("--out", type=Path, default=None, help="folder for the run folders")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                        help="overrides for every run (e.g. actor.micro_batch_size=16)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="modes-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); "
          f"{args.model} on {args.task}, {args.steps} steps per run, first {args.skip} left out")
    print(f"{'round':>5} {'mode':9} {'median step s':>14} {'wall s':>7} {'dropped':>8} "
          f"{'behind':>7}")
    medians: dict[str, list[float]] = {m: [] for m in args.modes}
    for rnd in range(args.rounds):
        for mode in args.modes:
            run_dir = out / f"{mode}-r{rnd}"
            start = time.perf_counter()
            curves = run_reach(run_dir, 0, args.steps, "--mode", mode, *args.set,
                               suite=args.task, model=args.model, timeout_s=1800.0)
            wall = time.perf_counter() - start
            steps, times = curves.series["time/step"]
            kept = [t for s, t in zip(steps, times, strict=True) if s > args.skip]
            med = statistics.median(kept)
            medians[mode].append(med)
            dropped = curves.series.get("rollout/discarded_unused_trajs", ([], []))[1]
            behind = _stale_mean(curves.series, [s for s in steps if s > args.skip])
            print(f"{rnd:>5} {mode:9} {med:>14.2f} {wall:>7.0f} "
                  f"{int(dropped[-1]) if dropped else '-':>8} "
                  f"{f'{behind:.2f}' if behind is not None else '-':>7}", flush=True)
    print(f"\n{'mode':9} {'median of medians':>18} {'range':>14} {'vs sync':>8}")
    base = statistics.median(medians["sync"]) if medians.get("sync") else None
    for mode, values in medians.items():
        mid = statistics.median(values)
        ratio = f"{mid / base:.2f}x" if base else "-"
        print(f"{mode:9} {mid:>18.2f} {min(values):>6.2f}-{max(values):<7.2f} {ratio:>8}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
