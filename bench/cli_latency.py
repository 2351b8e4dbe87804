"""CLI start-up latency as whole processes, against a bare interpreter measured in the same run.

Run by hand: ``.venv/bin/python bench/cli_latency.py [--runs 7]``. Targets on a 2-core machine:
``dexrl --help`` and every ``dexrl VERB --help`` ≤ 0.25 s and ``dexrl validate`` ≤ 2 s above
``python -c pass``. The bare interpreter is measured interleaved with the commands (one round runs
every command once), so a machine shared with other work slows both alike.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dexrl.cli import VERBS

HELP_TARGET = 0.25
TARGETS = {"dexrl --help": HELP_TARGET, **{f"dexrl {v} --help": HELP_TARGET for v in VERBS},
           "dexrl validate": 2.0}


def seconds(cmd: list[str]) -> float:
    """Wall time of one execution."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()}")
    return elapsed


def median_seconds(cases: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median wall time per case over ``runs`` interleaved rounds (after one warm-up round)."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for round_ in range(runs + 1):
        for name, cmd in cases.items():
            elapsed = seconds(cmd)
            if round_:
                times[name].append(elapsed)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    """Measure and print medians, overheads and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    exe = shutil.which("dexrl") or str(Path(sys.executable).with_name("dexrl"))
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dexrl --help": [exe, "--help"],
        **{f"dexrl {verb} --help": [exe, verb, "--help"] for verb in VERBS},
        "dexrl validate": [exe, "validate", "--suite", "libero_spatial", "--model", "pi0"],
    }
    results = median_seconds(cases, args.runs)
    base = results["python -c pass"]
    print(f"median of {args.runs} interleaved runs, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print(f"{'command':<26}{'median s':>10}{'over bare':>11}{'ratio':>8}{'target':>10}")
    for name, secs in results.items():
        target = TARGETS.get(name)
        verdict = "" if target is None else ("ok" if secs - base <= target else "MISS")
        print(f"{name:<26}{secs:>10.3f}{secs - base:>11.3f}{secs / base:>8.1f}x"
              f"{'' if target is None else f'≤{target:.2f}s':>10} {verdict}")


if __name__ == "__main__":
    main()
