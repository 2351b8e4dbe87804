"""The per-step progress lines ``train`` and ``resume`` print while RLinf runs."""

from __future__ import annotations

import statistics
from typing import Any

from rich.console import Console

# How RLinf splits a step's time (its ``time/*`` metrics), coarsest level only.
_TIME_SPLIT = (
    ("rollout", "time/generate_rollouts"),
    ("advantages", "time/cal_adv_and_returns"),
    ("training", "time/actor/run_training"),
    ("weight_sync", "time/sync_weights"),
)
# Labels of RLinf's per-step metrics shown after the step line.
_METRICS = (
    ("success", "env/success_once", ".2f"),
    ("return", "env/return", ".3f"),
    ("policy_loss", "train/actor/policy_loss", ".4f"),
    ("value_loss", "train/critic/value_loss", ".4f"),
)


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class ProgressPrinter:
    """Turns bridge progress events into one line per global step, with an ETA.

    The ETA is the median of the step times measured in this process times the steps left.
    """

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(highlight=False, soft_wrap=True)
        self.step_times: list[float] = []
        self._last: float | None = None

    def __call__(self, event: Any) -> None:
        """Render one ``dexrl.bridge.supervise.Progress`` event."""
        if event.kind == "ready":
            self._last = event.elapsed_s
            self.console.print(f"workers ready after {event.elapsed_s:.0f} s; "
                               f"starting at step {event.step + 1} of {event.total}", markup=False)
            return
        if event.kind == "checkpoint":
            self.console.print(f"  checkpoint {event.checkpoint}", markup=False)
            return
        if self._last is not None:
            self.step_times.append(event.elapsed_s - self._last)
        self._last = event.elapsed_s
        self.console.print(self.line(event), markup=False)

    def line(self, event: Any) -> str:
        """The text of one step."""
        m = event.metrics
        parts = [f"step {event.step}/{event.total}"]
        if self.step_times:
            left = (event.total - event.step) * statistics.median(self.step_times)
            parts.append(f"{self.step_times[-1]:.1f}s/step  ETA {_clock(left)}")
        parts += [f"{label} {m[key]:{fmt}}" for label, key, fmt in _METRICS if key in m]
        split = [f"{label}={m[key]:.1f}s" for label, key in _TIME_SPLIT if key in m]
        if split:
            parts.append("time " + " ".join(split))
        return "  ".join(parts)
