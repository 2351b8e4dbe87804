"""The per-step progress line: ETA from measured step times, metrics, time split."""

from __future__ import annotations

import io
from types import SimpleNamespace

from rich.console import Console

from dexrl.training.progress import ProgressPrinter


def event(kind: str, step: int, elapsed: float, **metrics: float) -> SimpleNamespace:
    return SimpleNamespace(kind=kind, step=step, total=10, elapsed_s=elapsed, metrics=metrics,
                           checkpoint=None)


def test_eta_uses_the_median_step_time_and_metrics_are_shown() -> None:
    buf = io.StringIO()
    printer = ProgressPrinter(Console(file=buf, width=300))
    printer(event("ready", 0, 30.0))
    printer(event("step", 1, 90.0))  # 60 s
    printer(event("step", 2, 100.0))  # 10 s
    printer(event("step", 3, 130.0, **{"env/success_once": 0.25, "time/generate_rollouts": 20.0,
                                        "time/actor/run_training": 9.5,
                                        "time/actor/actor/recv_traj": 1.0}))  # 30 s
    lines = buf.getvalue().splitlines()
    assert lines[0] == "workers ready after 30 s; starting at step 1 of 10"
    assert lines[1].startswith("step 1/10  60.0s/step  ETA 9:00")
    assert "ETA 4:40" in lines[2]  # median(60, 10) = 35 s × 8 left
    assert "ETA 3:30" in lines[3]  # median(60, 10, 30) = 30 s × 7 left
    assert "success 0.25" in lines[3]
    assert lines[3].endswith("time rollout=20.0s training=9.5s")
