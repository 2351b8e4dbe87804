"""Execution modes of a run (``runner.mode``), readable without the config package: run folders
and curves need them too.

Design notes: docs/execution-modes.md.
"""

from __future__ import annotations

from typing import Any

MODES = ("sync", "async", "pipeline")
"""``sync``: RLinf's EmbodiedRunner (roll out, then train, then sync weights); ``async``: its
AsyncPPOEmbodiedRunner (env and rollout run on while the actor trains); ``pipeline``: the
synchronous runner with its training pipeline (``runner.use_training_pipeline``: the actor
trains on each micro-batch as the envs finish it, within the step)."""


def run_mode(cfg: Any) -> str:
    """The config's ``runner.mode``; without one, ``pipeline`` when RLinf's
    ``runner.use_training_pipeline`` is on (its runner then runs the pipeline), else ``sync``."""
    runner = cfg.get("runner") if hasattr(cfg, "get") else None
    if runner is None or not hasattr(runner, "get"):
        return "sync"
    mode = runner.get("mode")
    if mode is not None:
        return str(mode)
    return "pipeline" if runner.get("use_training_pipeline") is True else "sync"
