"""Dotted-key views of nested configs (``a.b.c``), shared by the schema, resume's diff and the
checks (which read settings whose bad values are the schema's to report)."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted key -> leaf value of a plain container (lists are leaves)."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def setting(cfg: DictConfig, key: str, default: Any = None) -> Any:
    """``key``'s value, or ``default`` when absent; an interpolation that does not resolve reads
    as None (the schema reports it)."""
    return OmegaConf.select(cfg, key, default=default, throw_on_resolution_failure=False)


def positive(cfg: DictConfig, key: str, default: int = 1) -> int:
    """A positive integer setting, or ``default`` when it is not one (the mode checks' reader,
    until they read :mod:`dexrl.config.settings`)."""
    value = setting(cfg, key, default)
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else default


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
