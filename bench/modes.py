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

On a GPU, ``--ckpt`` trains that checkpoint instead of the ``--smoke`` policy (the real-size
random π0 of the device machine), ``--budget`` stops starting runs that would not fit in the
seconds left, a sampler records each run's peak GPU memory (``nvidia-smi``), and ``--json``
writes the rows. One call on a bare GPU machine: docs/execution-modes.md#on-a-gpu.

A global step is one PPO update on the same number of samples in every mode (the shipped
``algorithm.rollout_store_size_per_rank: 1`` takes one env round per actor rank), so time per
step compares throughput at the same batch; learning per step is compared in
docs/execution-modes.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dexrl.config.modes import MODES

# The reach runs are a test harness, kept out of the package in tests/helpers/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.reach_runs import run_reach  # noqa: E402


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


def _write(path: Path | None, args: argparse.Namespace, rows: list[dict]) -> None:
    """The rows so far as JSON (after every run: a call cut off keeps what it measured)."""
    if path:
        path.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                    "runs": rows}, indent=1))


class GpuMemory:
    """Peak GPU memory used while a run goes (``nvidia-smi`` every 0.5 s; None without it)."""

    def __enter__(self) -> GpuMemory:
        self.proc = None
        self.peak_mib: int | None = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                 "-lms", "500"], stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=10)
        used = [int(v) for v in out.split() if v.strip().isdigit()]
        self.peak_mib = max(used) if used else None


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
    parser.add_argument("--ckpt", type=Path, default=None,
                        help="train this checkpoint instead of the --smoke policy")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds: start no run that the longest run so far would overrun")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    began = time.perf_counter()
    out = args.out or Path(tempfile.mkdtemp(prefix="modes-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); "
          f"{args.model} on {args.task}, {args.steps} steps per run, first {args.skip} left out")
    print(f"{'round':>5} {'mode':9} {'median step s':>14} {'wall s':>7} {'dropped':>8} "
          f"{'behind':>7} {'peak GPU MiB':>12}")
    medians: dict[str, list[float]] = {m: [] for m in args.modes}
    rows: list[dict] = []
    longest = 0.0
    for rnd in range(args.rounds):
        for mode in args.modes:
            left = args.budget - (time.perf_counter() - began) if args.budget else None
            if left is not None and longest * 1.1 > left:
                print(f"{rnd:>5} {mode:9} not run: {left:.0f} s of --budget left, the longest "
                      f"run took {longest:.0f} s", flush=True)
                continue
            run_dir = out / f"{mode}-r{rnd}"
            start = time.perf_counter()
            try:
                with GpuMemory() as memory:
                    curves = run_reach(run_dir, 0, args.steps, "--mode", mode, *args.set,
                                       suite=args.task, model=args.model, ckpt=args.ckpt,
                                       timeout_s=left if left is not None else 1800.0)
            except (RuntimeError, subprocess.TimeoutExpired) as failed:
                why = str(failed)[-2500:]
                print(f"{rnd:>5} {mode:9} failed: {why}", flush=True)
                rows.append({"round": rnd, "mode": mode, "failed": why})
                _write(args.json, args, rows)
                continue
            wall = time.perf_counter() - start
            longest = max(longest, wall)
            steps, times = curves.series["time/step"]
            kept = [t for s, t in zip(steps, times, strict=True) if s > args.skip]
            med = statistics.median(kept)
            medians[mode].append(med)
            dropped = curves.series.get("rollout/discarded_unused_trajs", ([], []))[1]
            behind = _stale_mean(curves.series, [s for s in steps if s > args.skip])
            rows.append({"round": rnd, "mode": mode, "median_step_s": med, "wall_s": wall,
                         "step_s": kept, "dropped": dropped[-1] if dropped else None,
                         "behind": behind, "peak_gpu_mib": memory.peak_mib})
            print(f"{rnd:>5} {mode:9} {med:>14.2f} {wall:>7.0f} "
                  f"{int(dropped[-1]) if dropped else '-':>8} "
                  f"{f'{behind:.2f}' if behind is not None else '-':>7} "
                  f"{memory.peak_mib if memory.peak_mib is not None else '-':>12}", flush=True)
            _write(args.json, args, rows)
    print(f"\n{'mode':9} {'median of medians':>18} {'range':>14} {'vs sync':>8}")
    base = statistics.median(medians["sync"]) if medians.get("sync") else None
    for mode, values in medians.items():
        if not values:
            continue
        mid = statistics.median(values)
        ratio = f"{mid / base:.2f}x" if base else "-"
        print(f"{mode:9} {mid:>18.2f} {min(values):>6.2f}-{max(values):<7.2f} {ratio:>8}")
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
