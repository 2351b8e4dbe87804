"""Dotted-key views of nested configs (``a.b.c``), shared by the schema, resume's diff and the
checks (which read settings whose bad values are the schema's to report)."""

from __future__ import annotations

from typing import Any


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value of a plain container (lists are leaves)."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def run_mode(cfg: Any) -> str:
    """The config's ``runner.mode``; without one, ``pipeline`` when RLinf's
    ``runner.use_training_pipeline`` is on (its runner then runs the pipeline), else ``sync``.

    Here, below the config package, because a run folder's readers need it too: the curves
    (:func:`dexrl.curves.logged_offset`) read an async run's steps as logged. Everything else
    about the modes is :mod:`dexrl.config.modes`'.
    """
    runner = cfg.get("runner") if hasattr(cfg, "get") else None
    if runner is None or not hasattr(runner, "get"):
        return "sync"
    mode = runner.get("mode")
    if mode is not None:
        return str(mode)
    return "pipeline" if runner.get("use_training_pipeline") is True else "sync"
