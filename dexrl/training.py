"""A training session, shared by ``train`` and ``resume`` (and ``doctor``'s checkpoint check).

The commands compose and check the config (:func:`dexrl.config.compose_and_check`), refuse it on
errors (:func:`refuse_on_errors`), check the Ray address (:func:`check_ray_address`) and write the
run folder (:mod:`dexrl.runs`); :func:`run` then registers the models, launches RLinf and prints
progress. ``--smoke`` writes its tiny random checkpoint with :func:`write_smoke_checkpoint`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dexrl.catalog import get_policy
from dexrl.checks import Finding, errors
from dexrl.errors import DexrlError

if TYPE_CHECKING:
    from omegaconf import DictConfig

SMOKE_CHECKPOINT = "smoke-checkpoint"


def ckpt_overrides(path: Path) -> list[str]:
    """Point both model paths at one checkpoint (the rollout follows the actor)."""
    return [f"actor.model.model_path={path}"]


def refuse_on_errors(name: str, findings: list[Finding]) -> None:
    """Stop before anything starts when the config has errors."""
    found = errors(findings)
    if found:
        raise DexrlError(f"config {name} has {len(found)} error(s); nothing was started",
                         "fix them (`dexrl validate` with the same arguments lists them too)",
                         details=[f.render() for f in found])


def check_ray_address(ray_address: str | None) -> None:
    """Fail fast, before anything is written, on a Ray address that does not answer."""
    if ray_address and ray_address != "local":
        from dexrl.doctor.cluster import check_address

        check_address(ray_address)


def gpu_count() -> int:
    """Visible CUDA devices on this node."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def write_smoke_checkpoint(run_dir: Path, model_type: str) -> Path | None:
    """The policy's tiny random checkpoint in the run folder for ``--smoke``, if it needs one.

    The hook is the registry entry's ``smoke_checkpoint`` (``"module:function"``, called with the
    target path); a policy without one trains from its model config alone.
    """
    import importlib

    hook = get_policy(model_type).smoke_checkpoint
    if hook is None:
        return None
    module, _, function = hook.partition(":")
    target = run_dir / SMOKE_CHECKPOINT
    getattr(importlib.import_module(module), function)(target)
    return target


def run(cfg: DictConfig, run_dir: Path, *, smoke: bool, resume_from: Path | None,
        ray_address: str | None, verbose: bool, stall_timeout: float) -> int:
    """Register, launch and print progress; shared by ``train`` and ``resume``."""
    from dexrl import runs, runstate
    from dexrl.bridge import launch as bridge
    from dexrl.progress import ProgressPrinter

    bridge.prepare(cfg, smoke=smoke)
    runs.use_wandb_run_id(run_dir)
    tracker = runstate.begin(run_dir, runs.checkpoint_step(resume_from) or 0 if resume_from else 0)
    printer = ProgressPrinter(run_dir=run_dir)

    def show(event: bridge.Progress) -> None:
        printer(event)
        if event.kind == "step":
            tracker.step_done(event.step)

    status = "failed"
    try:
        code = bridge.launch(cfg, run_dir, resume_from=resume_from, ray_address=ray_address,
                             verbose=verbose, stall_timeout_s=stall_timeout, on_progress=show)
        status = "finished" if code == 0 else "interrupted"
    finally:
        tracker.end(status)
    printer.curves()  # RLinf closed its TensorBoard writer: the last step is on disk now
    return code
