"""Wall time of ``dexrl doctor --quick`` as a whole process, against a bare interpreter.

Run by hand: ``.venv/bin/python bench/doctor_quick.py [--runs 3]``. Target on this 2-core machine:
``dexrl doctor --quick`` ≤ 20 s. Prints the median, the ratio to ``python -c pass`` measured in
the same run, and the slowest probes of the last run (from its ``--json`` document). The machine's
load average is printed too: other work on the same cores stretches every probe.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 20.0


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Wall time of one run and its result."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, proc


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    exe = shutil.which("dexrl") or str(Path(sys.executable).with_name("dexrl"))
    bare = statistics.median(timed([sys.executable, "-c", "pass"])[0] for _ in range(5))
    times, doc = [], None
    for _ in range(args.runs):
        seconds, proc = timed([exe, "doctor", "--quick", "--json"])
        if proc.returncode not in (0, 1):
            raise SystemExit(f"dexrl doctor exited {proc.returncode}: {proc.stderr}")
        times.append(seconds)
        doc = json.loads(proc.stdout)
    median = statistics.median(times)
    verdict = "ok" if median <= TARGET_S else "MISS"
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'command':<24}{'median s':>10}{'ratio':>9}{'target':>9}")
    print(f"{'python -c pass':<24}{bare:>10.3f}{1.0:>8.1f}x")
    print(f"{'dexrl doctor --quick':<24}{median:>10.2f}{median / bare:>8.0f}x"
          f"{f'≤{TARGET_S:.0f}s':>9} {verdict}   runs: {', '.join(f'{t:.1f}' for t in times)}")
    assert doc is not None
    probes = sorted((c for c in doc["checks"] if c["seconds"]), key=lambda c: -c["seconds"])
    print("slowest probes of the last run (they overlap: CUDA/render and LIBERO run in threads):")
    for check in probes[:6]:
        print(f"  {check['id']:<22}{check['seconds']:>7.1f} s  {check['status']}")


if __name__ == "__main__":
    main()
