"""Checkpoint look-ups only tests need (the package's rule is :func:`pick_checkpoint`)."""

from __future__ import annotations

from pathlib import Path

from dexrl.checkpoints.files.steps import pick_checkpoint


def latest_checkpoint(run_dir: Path) -> Path:
    """The complete checkpoint with the highest step (incomplete ones are skipped)."""
    return pick_checkpoint(run_dir).path
