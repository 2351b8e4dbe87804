"""What a run reports to the command line while it trains: :class:`Progress` events."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Progress:
    """One event of a run, handed to ``launch(on_progress=...)`` in the main thread (the CLI
    renders it with :class:`dexrl.training.progress.ProgressPrinter`).

    Attributes:
        kind: ``"ready"`` (workers up), ``"step"`` (a global step finished), ``"checkpoint"``
            (a checkpoint was written and marked complete) or ``"unmarked"`` (a checkpoint was
            written but not marked complete: ``note`` says why).
        step: The global step reached (1-based; 0 before the first step of a fresh run).
        total: The step the run stops at.
        elapsed_s: Seconds since launch started.
        metrics: RLinf's metrics for the step (``time/*``, ``env/*``, ``rollout/*``, ``train/*``).
        checkpoint: The checkpoint folder, for ``"checkpoint"`` and ``"unmarked"`` events.
        note: Why a checkpoint was left unmarked.
    """

    kind: str
    step: int
    total: int
    elapsed_s: float
    metrics: Mapping[str, float] = field(default_factory=dict)
    checkpoint: Path | None = None
    note: str = ""
