"""The per-step progress lines ``train`` and ``resume`` print while RLinf runs."""

from __future__ import annotations

import re
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from dexrl import curves
from dexrl.curves import time_split
from dexrl.errors import DexrlError, disk_full
from dexrl.runs.divergence import step_health
from dexrl.training.forecast import duration

if TYPE_CHECKING:
    from dexrl.training.forecast import Forecast

# Labels of RLinf's per-step metrics shown after the step line.
_METRICS = (
    ("success", "env/success_once", ".2f"),
    ("return", "env/return", ".3f"),
    ("policy_loss", "train/actor/policy_loss", ".4f"),
    ("value_loss", "train/critic/value_loss", ".4f"),
)


_STALENESS = re.compile(r"rollout/data_staleness_(\d+)/ratio")
_DROPPED = "rollout/discarded_unused_trajs"


def staleness(metrics: dict[str, Any]) -> str | None:
    """An async step's data age, from RLinf's metrics: the policy versions its samples lag the
    actor by (mean and most) and the trajectories never trained on so far; None for a
    synchronous step (which logs none of these)."""
    ratios = {int(m.group(1)): float(v) for k, v in metrics.items()
              if (m := _STALENESS.fullmatch(k)) and float(v) > 0}
    if not ratios and _DROPPED not in metrics:
        return None
    text = ""
    if ratios:
        mean = sum(d * r for d, r in ratios.items()) / sum(ratios.values())
        text = f"behind {mean:.1f} (max {max(ratios)})"
    if _DROPPED in metrics:
        text += f"{'  ' if text else ''}dropped {int(metrics[_DROPPED])}"
    return text


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressPrinter:
    """Turns bridge progress events into one line per global step, with an ETA.

    The ETA is the median of the step times measured in this process times the steps left; before
    the first step, the ``forecast`` (:mod:`dexrl.training.forecast`) says what to expect. With
    ``run_dir``, each checkpoint also redraws ``RUN_DIR/curves.png`` (:meth:`curves`).
    """

    def __init__(self, console: Console | None = None, run_dir: Path | None = None,
                 forecast: Forecast | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.run_dir = run_dir
        self.forecast = forecast
        self.step_times: list[float] = []
        self._last: float | None = None
        self._curves_failed = False
        self._step = 0  # the last step seen
        self._drawn: int | None = None  # the step the curves were last drawn at

    def __call__(self, event: Any) -> None:
        """Render one ``dexrl.bridge.launch.supervisor.Progress`` event."""
        if event.kind == "ready":
            self._last = event.elapsed_s
            expected = ""
            if self.forecast is not None:
                left = (self.forecast.first_extra_s + self.forecast.saves_s
                        + (event.total - event.step) * self.forecast.step_s)
                expected = (f" (forecast: ≈{duration(self.forecast.step_s)} a step, "
                            f"≈{duration(left)} to go)")
            self.console.print(f"workers ready after {event.elapsed_s:.0f} s; "
                               f"starting at step {event.step + 1} of {event.total}{expected}",
                               markup=False)
            return
        if event.kind == "checkpoint":
            self.console.print(f"  checkpoint {event.checkpoint}", markup=False)
            self.curves()
            return
        if event.kind == "unmarked":
            self.console.print(f"  checkpoint {event.checkpoint} not marked complete: "
                               f"{event.note}", markup=False)
            return
        if self._last is not None:
            self.step_times.append(event.elapsed_s - self._last)
        self._last = event.elapsed_s
        self._step = event.step
        self.console.print(self.line(event), markup=False)

    def line(self, event: Any) -> str:
        """The text of one step."""
        m = event.metrics
        parts = [f"step {event.step}/{event.total}"]
        if self.step_times:
            left = (event.total - event.step) * statistics.median(self.step_times)
            parts.append(f"{self.step_times[-1]:.1f}s/step  ETA {_clock(left)}")
        parts += [f"{label} {m[key]:{fmt}}" for label, key, fmt in _METRICS if key in m]
        health = step_health(event.step, m)
        if health.skipped:
            parts.append(f"updates skipped {health.skipped}/{health.updates or '?'}")
        if (age := staleness(m)) is not None:
            parts.append(age)
        split = [f"{label}={m[key]:.1f}s" for label, key in time_split(m)]
        if split:
            parts.append("time " + " ".join(split))
        return "  ".join(parts)

    def curves(self) -> None:
        """Redraw ``RUN_DIR/curves.png`` and print its path, unless drawn at this step already.

        A failure is a warning, once: training goes on whatever happens here (a run without
        the TensorBoard logger has no curves to draw). A full disk is not: it stops the run.
        """
        if self.run_dir is None or self._curves_failed or self._drawn == self._step:
            return

        try:
            path = curves.plot_runs([self.run_dir])
        except (DexrlError, OSError, ValueError) as exc:
            if disk_full(exc):
                raise
            self._curves_failed = True
            self.console.print(f"  warning: no learning curves: {exc}", markup=False)
            return
        self._drawn = self._step
        self.console.print(f"  curves {path}", markup=False)
