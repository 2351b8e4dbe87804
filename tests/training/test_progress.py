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


def test_the_ready_line_says_what_the_forecast_expects_until_steps_are_measured() -> None:
    forecast = SimpleNamespace(step_s=240.0, first_extra_s=20.0, saves_s=40.0)
    buf = io.StringIO()
    printer = ProgressPrinter(Console(file=buf, width=300), forecast=forecast)
    printer(event("ready", 2, 70.0))  # a resume at step 2 of 10: 8 steps left
    printer(event("step", 3, 370.0))
    lines = buf.getvalue().splitlines()
    assert lines[0] == ("workers ready after 70 s; starting at step 3 of 10 (forecast: ≈4.0 min "
                        "a step, ≈33.0 min to go)")  # 20 s + 40 s + 8 × 240 s
    assert "300.0s/step  ETA 35:00" in lines[1]  # measured from here on: 7 × 300 s


def test_skipped_updates_and_unmarked_checkpoints_are_shown() -> None:
    buf = io.StringIO()
    printer = ProgressPrinter(Console(file=buf, width=300))
    printer(event("step", 1, 10.0, **{"train/actor/updates": 16.0,
                                       "train/actor/updates_skipped": 3.0}))
    printer(event("step", 2, 20.0, **{"train/actor/updates": 16.0,
                                       "train/actor/updates_skipped": 0.0}))
    unmarked = SimpleNamespace(kind="unmarked", step=1, total=10, elapsed_s=10.0, metrics={},
                               checkpoint="runs/x/checkpoints/global_step_1",
                               note="step 1 was not clean (3/16 optimizer updates skipped)")
    printer(unmarked)
    lines = buf.getvalue().splitlines()
    assert lines[0].endswith("updates skipped 3/16")
    assert "skipped" not in lines[1]
    assert lines[2] == ("  checkpoint runs/x/checkpoints/global_step_1 not marked complete: "
                        "step 1 was not clean (3/16 optimizer updates skipped)")


def test_a_full_disk_while_drawing_curves_stops_the_run(tmp_path, monkeypatch) -> None:
    import errno

    import pytest

    from dexrl import curves

    def full(runs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "curves.png"))

    monkeypatch.setattr(curves, "plot_runs", full)
    printer = ProgressPrinter(Console(file=io.StringIO()), run_dir=tmp_path)
    with pytest.raises(OSError):
        printer.curves()
    monkeypatch.setattr(curves, "plot_runs", lambda runs: (_ for _ in ()).throw(
        ValueError("no scalars")))
    printer.curves()  # any other failure is a warning: training goes on
    assert printer._curves_failed
