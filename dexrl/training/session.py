"""The training session, one for ``train`` and ``resume`` (``doctor``'s checkpoint check uses it).

``train``: :func:`prepare` (writes nothing; ``--dry-run`` stops there), :func:`start` (writes the
run folder), :func:`run` (launch through the bridge, print progress). ``resume``:
:func:`prepare_resume`, :func:`start_resume`, then the same :func:`run`.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dexrl.catalog import get_policy, load_reference, smoke_overlay
from dexrl.errors import DexrlError, Finding, errors
from dexrl.runs.layout import SMOKE_CHECKPOINT

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from dexrl.config.validate import Validated
    from dexrl.runs.checkpoints import Checkpoint
    from dexrl.training.plan import Plan



def ckpt_overrides(path: Path) -> list[str]:
    """Point both model paths at one checkpoint (the rollout follows the actor)."""
    return [f"actor.model.model_path={path}"]


def refuse_on_errors(name: str, findings: list[Finding]) -> None:
    """Stop before anything starts when the config has errors."""
    found = errors(findings)
    if found:
        raise DexrlError(f"config {name} has {len(found)} error(s); nothing was started",
                         "fix them (`dexrl validate` with the same arguments lists them too)",
                         details=[f.render() for f in found], code="config-invalid")


def check_ray_address(ray_address: str | None) -> None:
    """Fail fast, before anything is written, on a Ray address that does not answer."""
    if ray_address and ray_address != "local":
        from dexrl.cluster import check_address

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
    hook = get_policy(model_type).smoke_checkpoint
    if hook is None:
        return None
    target = run_dir / SMOKE_CHECKPOINT
    load_reference(hook)(target)
    return target


def run(cfg: DictConfig, run_dir: Path, *, smoke: bool, resume_from: Path | None,
        ray_address: str | None, verbose: bool, stall_timeout: float) -> int:
    """Register, launch and print progress; shared by ``train`` and ``resume``."""
    from dexrl.bridge.launch import driver as bridge
    from dexrl.runs.layout import checkpoint_step
    from dexrl.runs.record import use_wandb_run_id
    from dexrl.runs.state import begin
    from dexrl.training.progress import ProgressPrinter

    bridge.prepare(cfg, smoke=smoke)
    use_wandb_run_id(run_dir)
    tracker = begin(run_dir, checkpoint_step(resume_from) or 0 if resume_from else 0)
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


@dataclass
class NewRun:
    """A composed and checked new run that nothing has been written for yet (``prepare``)."""

    result: Validated
    findings: list[Finding]  # the composed config's findings (``--smoke``'s own path left out)
    overrides: list[str]
    suite: str
    per_node: int
    gpus: int
    target: Path
    settings: dict[str, object]  # the run-folder fields dexrl sets
    smoke: bool
    request: tuple[str | None, str | None, str | None]  # --suite, --model, --config-name


def prepare(*, suite: str | None, model: str | None, config_name: str | None,
            ckpt: str | None, name: str | None, run_dir: Path | None, smoke: bool,
            dry_run: bool, gpus_per_node: int | None, overrides: list[str]) -> NewRun:
    """Compose and check a new run's config and choose its folder; writes nothing."""
    from dexrl.config.compose import suite_of
    from dexrl.config.validate import compose_and_check
    from dexrl.hub.home import resolve_ckpt
    from dexrl.runs.layout import default_run_dir
    from dexrl.runs.owned_keys import set_run_folder

    if name and run_dir:
        raise DexrlError("--name and --run-dir both name the run folder",
                         "pass one: --name NAME (runs/NAME) or --run-dir PATH",
                         code="flags-name-run-dir")
    if ckpt and smoke:
        raise DexrlError("--smoke trains a tiny random model and takes no --ckpt",
                         "drop --ckpt, or drop --smoke to train the checkpoint",
                         code="flags-smoke-ckpt")
    if ckpt:
        overrides = ckpt_overrides(resolve_ckpt(ckpt)) + overrides
    overlay = smoke_overlay(suite, config_name) if smoke else None
    if overlay:
        overrides = [f"+smoke={overlay}", *overrides]
    gpus = 0 if dry_run or smoke else gpu_count()
    per_node = gpus_per_node or (1 if smoke else gpus or 8)
    result = compose_and_check(suite, model, config_name, overrides, per_node, cpu_only=smoke)
    suite_name = suite_of(result.cfg, suite) or "libero"
    label = model or str(result.cfg.actor.model.model_type).removeprefix("dexbotic_")
    target = (Path(run_dir) if run_dir else default_run_dir(suite_name, label, name))
    target = Path(os.path.abspath(target.expanduser()))
    settings = set_run_folder(result.cfg, target)
    findings = [f for f in result.findings if not (smoke and _is_smoke_path_warning(f))]
    return NewRun(result, findings, overrides, suite_name, per_node, gpus, target, settings,
                  smoke, (suite, model, config_name))


def start(new: NewRun, *, ray_address: str | None) -> DictConfig:
    """Refuse what cannot launch, then write the run folder; returns the resolved config."""
    from omegaconf import OmegaConf

    from dexrl.config.checks import Facts, run_config_checks
    from dexrl.config.validate import compose_and_check
    from dexrl.hub.manifest import checkpoint_provenance
    from dexrl.runs.checkpoints import skipped
    from dexrl.runs.layout import check_new_run_dir
    from dexrl.runs.owned_keys import set_run_folder
    from dexrl.runs.record import resolved, write_run_files
    from dexrl.runs.state import story

    refuse_on_errors(new.result.name, new.findings)
    missing = [f for f in new.findings if _is_smoke_path_warning(f)]
    if missing:
        raise DexrlError(f"{missing[0].message}; nothing was started", missing[0].hint,
                         where=missing[0].where, code="checkpoint-not-found")
    if not new.smoke and new.gpus == 0 and not ray_address:
        raise DexrlError("no CUDA GPU on this machine for a GPU placement; nothing was started",
                         "try `dexrl train ... --smoke` for a CPU run, or run `dexrl doctor`",
                         code="train-no-gpu")
    try:
        check_new_run_dir(new.target)
    except DexrlError as exc:  # say what happened to a run that was killed there
        exc.details += story(new.target) + skipped(new.target)
        raise
    check_ray_address(ray_address)
    cfg = new.result.cfg
    new.target.mkdir(parents=True, exist_ok=True)
    if new.smoke:
        path = write_smoke_checkpoint(new.target, str(cfg.actor.model.model_type))
        if path is not None:
            cfg = compose_and_check(*new.request, [*new.overrides, *ckpt_overrides(path)],
                                    new.per_node, cpu_only=True).cfg
            set_run_folder(cfg, new.target)
    refuse_on_errors(new.result.name,
                     errors(run_config_checks(cfg, Facts(new.suite, new.per_node,
                                                            cpu_only=new.smoke))))
    cfg = resolved(cfg)
    provenance = checkpoint_provenance(OmegaConf.select(cfg, "actor.model.model_path"))
    write_run_files(new.target, cfg, sys.argv,
                    {"checkpoint": provenance, "smoke": new.smoke, "suite": new.suite})
    return cfg


def launch_plan(new: NewRun) -> Plan:
    """What the launch would do (``--dry-run``), sized by the checkpoint the run would train:
    ``--smoke``'s tiny one goes to a temporary folder, since a dry run writes no run folder."""
    from dexrl.config.checks import Facts
    from dexrl.training.plan import make_plan

    facts = Facts(new.suite, new.per_node, cpu_only=new.smoke)
    if not new.smoke:
        return make_plan(new.result.cfg, facts)
    with tempfile.TemporaryDirectory(prefix="dexrl-dry-run-") as tmp:
        ckpt = write_smoke_checkpoint(Path(tmp), str(new.result.cfg.actor.model.model_type))
        return make_plan(new.result.cfg, facts, ckpt_dir=ckpt)


def _is_smoke_path_warning(finding: Finding) -> bool:
    """--smoke writes its own checkpoint, so a missing default path is expected."""
    return finding.where == "actor.model.model_path" and finding.level == "warning"


@dataclass
class Resumption:
    """A run folder checked for a resume that nothing has been written for yet (``--dry-run``
    stops here)."""

    dir: Path
    checkpoint: Checkpoint
    old: DictConfig  # the saved config, paths re-anchored
    new: DictConfig  # with the overrides and the run-folder fields
    settings: dict[str, object]  # the run-folder fields dexrl sets
    total: int  # the step the run stops at
    smoke: bool
    notes: list[str]  # what happened to the folder before: story, skipped steps, a move


def prepare_resume(run_dir: Path, *, step: int | None, overrides: list[str],
                   allow_changes: bool) -> Resumption:
    """Open a run folder, pick its checkpoint and check the changed config; writes nothing."""
    from omegaconf import OmegaConf

    from dexrl.config.checks import Facts, run_config_checks
    from dexrl.runs.checkpoints import pick_checkpoint, skipped
    from dexrl.runs.opened import open_run
    from dexrl.runs.owned_keys import refuse_owned_overrides, set_run_folder
    from dexrl.runs.resume_rules import check_steps_left, refuse_unsafe_changes
    from dexrl.runs.state import story

    refuse_owned_overrides(overrides, "a resumed run stays in its folder and --step N picks "
                           "the checkpoint")
    opened = open_run(run_dir)
    checkpoint = pick_checkpoint(opened.dir, step)
    old = opened.config
    new = apply_overrides(old, overrides)
    refuse_unsafe_changes(old, new, allow_changes)
    settings = set_run_folder(new, opened.dir, checkpoint.path)
    suite = opened.manifest.get("suite") or OmegaConf.select(new, "env.train.task_suite_name")
    smoke = bool(opened.manifest.get("smoke"))
    per_node = 1 if smoke else (gpu_count() or 1)
    refuse_on_errors(str(opened.dir), run_config_checks(new, Facts(suite, per_node,
                                                                   cpu_only=smoke)))
    total = check_steps_left(new, checkpoint.step, run_dir)
    notes = [line[0].upper() + line[1:] + "." for line in story(opened.dir)]
    notes += skipped(opened.dir, checkpoint)
    if opened.moved_from is not None:
        notes.append(f"note: the run folder was at {opened.moved_from}; its paths now point "
                     f"into {opened.dir}")
    return Resumption(opened.dir, checkpoint, old, new, settings, total, smoke, notes)


def start_resume(resumption: Resumption, *, ray_address: str | None) -> DictConfig:
    """Refuse a second live driver, then save the new config; returns the resolved config."""
    from dexrl.runs.record import resolved, save_config
    from dexrl.runs.state import STATE_FILE, previous_run

    check_ray_address(ray_address)
    run_dir = resumption.dir
    previous = previous_run(run_dir)
    if previous is not None and previous.still_running:
        raise DexrlError(f"dexrl process {previous.pid} on {previous.host} is still running "
                         "this run", "wait for it to end or stop it (Ctrl-C), then resume; if "
                         f"that process is gone, delete {run_dir / STATE_FILE}",
                         where=str(run_dir), code="run-in-use")
    cfg = resolved(resumption.new)
    save_config(run_dir, cfg)
    return cfg


def apply_overrides(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The saved config with ``key=value`` overrides; unknown keys are refused."""
    from omegaconf import OmegaConf, open_dict

    from dexrl.config.compose import check_override_syntax

    check_override_syntax(overrides)
    new = OmegaConf.create(OmegaConf.to_container(cfg))
    OmegaConf.set_struct(new, True)
    for item in overrides:
        key, _, value = item.partition("=")
        add = key.startswith("+")
        key = key.lstrip("+")
        if not add and OmegaConf.select(new, key, default=_MISSING) is _MISSING:
            raise DexrlError(f"unknown config key '{key}' in overrides",
                             "check the run's config.yaml, or prefix the override with + to add "
                             "a key", where="overrides", code="override-unknown-key")
        parsed = OmegaConf.from_dotlist([f"{key}={value}"])
        with open_dict(new):
            OmegaConf.update(new, key, OmegaConf.select(parsed, key), merge=True, force_add=add)
    return new


_MISSING = object()
