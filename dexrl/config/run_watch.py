"""The run's policy on steps that cannot be trusted, read from ``runner.divergence``
(the watch itself: :mod:`dexrl.runs.divergence`)."""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

from dexrl.runs.divergence import DEFAULT_ACTION, DEFAULT_SKIPPED_STEPS, DivergenceWatch


def watch_from(cfg: Any) -> DivergenceWatch:
    """The run's :class:`DivergenceWatch` from ``runner.divergence`` (defaults where absent)."""
    action = OmegaConf.select(cfg, "runner.divergence.action", default=DEFAULT_ACTION)
    steps = OmegaConf.select(cfg, "runner.divergence.skipped_steps",
                             default=DEFAULT_SKIPPED_STEPS)
    return DivergenceWatch(str(action), int(steps))
