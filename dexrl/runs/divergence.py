"""Whether a training step can be trusted: non-finite numbers and skipped optimizer updates.

Design notes: docs/failures.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ACTIONS = ("stop", "warn")
DEFAULT_ACTION = "stop"
DEFAULT_SKIPPED_STEPS = 3
# What dexrl's actor adds to RLinf's training metrics (dexrl.bridge.launch.workers.DexrlActor).
SKIPPED, UPDATES = "train/actor/updates_skipped", "train/actor/updates"
# Metrics of the acting policy's episodes: not finite, the policy is broken. (RLinf's
# ``rollout/*`` statistics are NaN by design when a batch has no valid entries.)
_ROLLOUT = ("env/return", "env/reward")


def _watched(key: str) -> bool:
    """A metric whose non-finite value means the step cannot be trusted."""
    if key.startswith("train/"):
        return "loss" in key or "grad_norm" in key
    return key.startswith(_ROLLOUT)


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True  # not a number: nothing to judge


@dataclass(frozen=True)
class StepHealth:
    """What one global step's metrics say about the weights it produced.

    Attributes:
        step: The global step (1-based).
        nonfinite: ``(metric, value)`` of the watched metrics that are NaN or infinite.
        skipped: Optimizer updates RLinf skipped (their gradient norm was not finite), None when
            the actor did not report it.
        updates: Optimizer updates the step made or skipped.
    """

    step: int
    nonfinite: tuple[tuple[str, float], ...]
    skipped: int | None
    updates: int | None

    @property
    def clean(self) -> bool:
        """Every watched number finite and no update skipped."""
        return not self.nonfinite and not self.skipped

    @property
    def all_skipped(self) -> bool:
        """Every optimizer update of the step was skipped."""
        return bool(self.updates) and (self.skipped or 0) >= (self.updates or 0)

    @property
    def rollout_broken(self) -> bool:
        """The policy that acted produced non-finite returns or rewards."""
        return any(not key.startswith("train/") for key, _ in self.nonfinite)

    def summary(self, names: int = 3) -> str:
        """What is wrong, in a few words ("" when clean): the skipped updates and the first
        ``names`` non-finite metrics, the episodes' first, then the losses."""
        parts = []
        if self.skipped:
            parts.append(f"{self.skipped}/{self.updates or '?'} optimizer updates skipped")
        ranked = sorted(self.nonfinite, key=lambda kv: (kv[0].startswith("train/"),
                                                        "grad_norm" in kv[0], kv[0]))
        parts += [f"{key} {value}" for key, value in ranked[:names]]
        if len(ranked) > names:
            parts.append(f"{len(ranked) - names} more non-finite")
        return ", ".join(parts)


def step_health(step: int, metrics: Mapping[str, Any]) -> StepHealth:
    """The :class:`StepHealth` of ``step`` from RLinf's logged metrics."""
    nonfinite = tuple((key, float(value)) for key, value in sorted(metrics.items())
                      if _watched(key) and not _finite(value))
    skipped = _count(metrics.get(SKIPPED))
    updates = _count(metrics.get(UPDATES))
    if skipped is None and any("grad_norm" in key for key, _ in nonfinite):
        skipped = 1  # an actor that does not count: a non-finite mean norm means one at least
    return StepHealth(step, nonfinite, skipped, updates)


def _count(value: Any) -> int | None:
    if value is None or not _finite(value):
        return None
    return round(float(value))


@dataclass(frozen=True)
class Divergence:
    """Why a run must stop: the step and what its metrics said."""

    step: int
    reason: str


class DivergenceWatch:
    """The run's policy on steps that are not clean (``runner.divergence``).

    A step that is not clean never gets its checkpoint marked complete. With ``action="stop"``
    the run stops at the first step that cannot be trusted: non-finite returns or rewards
    (the acting policy is broken), every optimizer update skipped (the step trained nothing), or
    ``skipped_steps`` steps in a row that were not clean. ``action="warn"`` only reports.
    """

    def __init__(self, action: str = DEFAULT_ACTION,
                 skipped_steps: int = DEFAULT_SKIPPED_STEPS) -> None:
        if action not in ACTIONS:
            raise ValueError(f"runner.divergence.action must be one of {ACTIONS}, not {action!r}")
        self.action, self.skipped_steps = action, max(int(skipped_steps), 1)
        self.in_a_row = 0

    def observe(self, health: StepHealth) -> Divergence | None:
        """Record one step; the reason to stop the run now, if any."""
        if health.clean:
            self.in_a_row = 0
            return None
        self.in_a_row += 1
        reason = None
        if health.rollout_broken:
            reason = "the policy's rollouts were not finite"
        elif health.all_skipped:
            reason = "every optimizer update was skipped (the gradient norm was not finite)"
        elif self.in_a_row >= self.skipped_steps:
            reason = (f"{self.in_a_row} step(s) in a row were not clean "
                      f"(runner.divergence.skipped_steps={self.skipped_steps})")
        if reason is None or self.action != "stop":
            return None
        return Divergence(health.step, f"{reason}: {health.summary()}")
