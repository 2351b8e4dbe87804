"""Execution modes: which RLinf runner a run uses (``runner.mode``).

Design notes: docs/execution-modes.md.
"""

from __future__ import annotations

from typing import Any

from dexrl.runs.modes import MODES, run_mode

__all__ = ["MODES", "run_mode"]

MODE_SUMMARY = ("sync (default: roll out, then train), async (RLinf's async PPO: rollouts go on "
                "while the actor trains), pipeline (training starts on each micro-batch as the "
                "rollout finishes it)")


COLLOCATED = {"actor,env,rollout": "all"}
"""The shipped configs' placement: every component on every GPU."""


def mode_overrides(mode: str | None) -> list[str]:
    """The Hydra overrides ``--mode`` stands for: ``+mode=async`` applies conf/mode/async.yaml;
    ``sync`` (the shipped configs' mode) adds nothing."""
    if mode in (None, "sync"):
        return []
    if mode not in MODES:
        from dexrl.errors import DexrlError

        raise DexrlError(f"--mode {mode} is not an execution mode",
                         f"use one of {', '.join(MODES)} (docs/execution-modes.md)",
                         code="flags-mode-unknown")
    return [f"+mode={mode}"]


def split_placement(gpus_per_node: int) -> dict[str, str] | None:
    """Async PPO's default placement on one node of ``gpus_per_node`` GPUs: the actor on the
    first half, env and rollout on the second (None for one GPU, which cannot be split).

    Why half: the actor's FSDP training and the rollout's generation then run on separate GPUs
    at the same time, and each side keeps the memory it has in a synchronous run on that many
    GPUs (docs/execution-modes.md#placement).
    """
    if gpus_per_node < 2:
        return None
    half = gpus_per_node // 2
    return {"actor": f"0-{half - 1}" if half > 1 else "0",
            "env,rollout": f"{half}-{gpus_per_node - 1}" if gpus_per_node - half > 1
            else str(half)}


def place_async(cfg: Any, gpus_per_node: int, cpu_only: bool) -> dict[str, str] | None:
    """Give an async run on GPUs :func:`split_placement` when it kept the shipped collocated
    placement; return the placement set, or None when nothing changed (a synchronous run, a
    CPU-only run, where every component is its own process anyway, or a placement the user
    chose)."""
    from omegaconf import OmegaConf, open_dict

    if run_mode(cfg) != "async" or cpu_only:
        return None
    placement = OmegaConf.select(cfg, "cluster.component_placement")
    current = OmegaConf.to_container(placement) if placement is not None else None
    split = split_placement(gpus_per_node)
    if current != COLLOCATED or split is None:
        return None
    with open_dict(cfg):
        cfg.cluster.component_placement = split
    return split
