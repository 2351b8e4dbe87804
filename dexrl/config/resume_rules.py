"""What a resume may change: run length, cadence, logging and placement freely; anything else only
with ``--allow-changes``, shown as a diff."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dexrl.config.dotted import flatten
from dexrl.errors import DexrlError

# Keys a resume may change without --allow-changes: they do not change the experiment.
SAFE_RESUME_KEYS = (
    "runner.max_steps",
    "runner.max_epochs",
    "runner.save_interval",
    "runner.val_check_interval",
    "runner.resume_dir",
    "runner.memory_plan",
    "runner.logger.*",
    "runner.divergence.*",
    "env.*.video_cfg.*",
    "cluster.*",
    "actor.enable_offload",
    "rollout.enable_offload",
    "env.enable_offload",
    "actor.model.dexbotic.prefix_cache.*",  # the cache equals recomputing (docs/performance.md)
)


def planned_steps(cfg: DictConfig) -> int:
    """The step a run stops at: RLinf caps runner.max_steps by runner.max_epochs (1 step each)."""
    epochs = int(OmegaConf.select(cfg, "runner.max_epochs", default=1))
    max_steps = int(OmegaConf.select(cfg, "runner.max_steps", default=-1))
    return min(epochs, max_steps) if max_steps >= 0 else epochs


def steps_source(cfg: DictConfig) -> str:
    """Which setting decides :func:`planned_steps`, in words (``train --dry-run`` prints it)."""
    epochs = int(OmegaConf.select(cfg, "runner.max_epochs", default=1))
    max_steps = int(OmegaConf.select(cfg, "runner.max_steps", default=-1))
    if max_steps < 0:
        return (f"runner.max_steps={max_steps} is negative: RLinf runs runner.max_epochs = "
                f"{epochs} steps")
    if max_steps > epochs:
        return f"runner.max_steps={max_steps} is capped by runner.max_epochs = {epochs}"
    return "runner.max_steps"


def check_steps_left(cfg: DictConfig, step: int, run_dir: Path | None = None) -> int:
    """The step the run stops at; refuses a start at or past it (nothing would be trained)."""
    total = planned_steps(cfg)
    if step >= total:
        example = (f", e.g. `dexrl resume {run_dir} runner.max_steps={step + 1}`"
                   if run_dir is not None else "")
        raise DexrlError(f"the run already reached step {step} of {total}",
                         f"raise runner.max_steps (and runner.max_epochs) above {step}{example}",
                         code="resume-nothing-left")
    return total


ABSENT = object()  # a key one side of a config_diff does not have


def config_diff(old: DictConfig, new: DictConfig) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for every leaf that differs between two configs (:data:`ABSENT` if none)."""
    a = flatten(OmegaConf.to_container(old, resolve=True))
    b = flatten(OmegaConf.to_container(new, resolve=True))
    return [(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in sorted(a.keys() | b.keys())
            if a.get(k, ABSENT) != b.get(k, ABSENT)]


def unsafe_changes(diff: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The changes that alter the experiment (anything outside SAFE_RESUME_KEYS)."""
    return [d for d in diff if not any(fnmatch.fnmatchcase(d[0], pat) for pat in SAFE_RESUME_KEYS)]


def head_changes(diff: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The changes that add or remove one of the policy's RL heads (the value head: PPO ↔ GRPO;
    the noise head: to or from flow_noise), which the checkpoint's modules cannot follow."""
    return [d for d in diff if d[0] == "actor.model.add_value_head"
            or (d[0] == "actor.model.dexbotic.noise_method" and "flow_noise" in d[1:])]


def refuse_unsafe_changes(old: DictConfig, new: DictConfig, allow: bool) -> None:
    """Refuse overrides that change the experiment, showing the diff; refuse a change of the
    policy's heads even with ``allow`` (the checkpoint holds other modules)."""
    diff = config_diff(old, new)
    heads = head_changes(diff)
    if heads:
        raise DexrlError(
            "the overrides add or remove a head of the policy (the value head of PPO, the noise "
            "head of flow_noise): the run's checkpoints hold another set of modules",
            "resume with the run's algorithm and noise method; to switch, start a new run from "
            "an export of this one (`dexrl export RUN --out DIR`, then `dexrl train --ckpt DIR`)",
            details=diff_lines(heads), code="resume-heads-changed")
    unsafe = unsafe_changes(diff)
    if unsafe and not allow:
        raise DexrlError(
            f"{len(unsafe)} override(s) change the experiment, not just how long it runs",
            "pass --allow-changes to resume with them anyway, or start a new run",
            details=diff_lines(unsafe),
            code="resume-unsafe-changes",
        )


def diff_lines(diff: list[tuple[str, Any, Any]], owned: Iterable[str] = ()) -> list[str]:
    """``key: old -> new`` per change; keys in ``owned`` are marked as set by dexrl."""
    def show(value: Any) -> str:
        return "(absent)" if value is ABSENT else repr(value)

    return [f"{k}: {show(a)} -> {show(b)}" + ("  (set by dexrl)" if k in owned else "")
            for k, a, b in diff]
