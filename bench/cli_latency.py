"""CLI start-up latency as whole processes, against a bare interpreter measured in the same run.

Run by hand: ``.venv/bin/python bench/cli_latency.py [--runs 7]``. Targets on a 2-core machine:
``dexrl --help`` ≤ 0.3 s and ``dexrl validate`` ≤ 2 s above ``python -c pass``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {"dexrl --help": 0.3, "dexrl validate": 2.0}


def median_seconds(cmd: list[str], runs: int) -> float:
    """Median wall time of ``runs`` executions (after one warm-up run)."""
    subprocess.run(cmd, capture_output=True, check=False)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode()}")
    return statistics.median(times)


def main() -> None:
    """Measure and print medians, overheads and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    exe = shutil.which("dexrl") or str(Path(sys.executable).with_name("dexrl"))
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dexrl --help": [exe, "--help"],
        "dexrl validate": [exe, "validate", "--suite", "libero_spatial", "--model", "pi0"],
    }
    results = {name: median_seconds(cmd, args.runs) for name, cmd in cases.items()}
    base = results["python -c pass"]
    print(f"{'command':<18}{'median s':>10}{'over bare':>11}{'ratio':>8}{'target':>9}")
    for name, secs in results.items():
        target = TARGETS.get(name)
        verdict = "" if target is None else ("ok" if secs - base <= target else "MISS")
        print(f"{name:<18}{secs:>10.3f}{secs - base:>11.3f}{secs / base:>8.1f}x"
              f"{'' if target is None else f'≤{target:.1f}s':>9} {verdict}")


if __name__ == "__main__":
    main()
