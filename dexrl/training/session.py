"""The training session, one for ``train`` and ``resume``.

``train``: :func:`prepare` (compose and check the config once; writes nothing; ``--dry-run``
stops there), :func:`start` (writes the run folder), :func:`run` (one launch through the bridge,
print progress). ``resume``: :func:`prepare_resume`, :func:`start_resume`, then the same
:func:`run`. The commands hand their flags over as one :class:`TrainRequest` or
:class:`ResumeRequest`; :func:`start` and :func:`start_resume` build the run's one
:class:`~dexrl.bridge.launch.spec.LaunchSpec`, which :func:`run` hands the bridge.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec
from dexrl.catalog import get_policy, load_reference
from dexrl.checkpoints.files.guard import (
    check_resume,
    move_aside,
    moved_notes,
    set_aside_unfinished,
)
from dexrl.checkpoints.files.steps import last_complete, resume_point, skipped
from dexrl.checkpoints.verify import check_checkpoint_dir
from dexrl.cluster import check_address
from dexrl.config.request import ConfigRequest
from dexrl.errors import DexrlError, Finding, errors
from dexrl.hub.manifest import checkpoint_provenance
from dexrl.runs import durable
from dexrl.runs.layout import SMOKE_CHECKPOINT, check_new_run_dir, checkpoints_dir, default_run_dir
from dexrl.runs.state import STATE_FILE, previous_run, read, story
from dexrl.training.restarts import run_restarting

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from dexrl.checkpoints.files.steps import Checkpoint
    from dexrl.config.validate import Validated
    from dexrl.training.forecast import Forecast
    from dexrl.training.memory_choice import MemoryChoice
    from dexrl.training.plan import Plan


@dataclass(frozen=True)
class TrainRequest:
    """What ``dexrl train`` asks for: its flags and overrides, built by the command."""

    config: ConfigRequest = field(default_factory=ConfigRequest)  # its checkpoint left out
    ckpt: str | None = None  # --ckpt, located by prepare()
    name: str | None = None
    run_dir: Path | None = None
    dry_run: bool = False
    gpus_per_node: int | None = None
    launch: LaunchOptions = field(default_factory=LaunchOptions)
    memory_plan: str = "auto"  # --memory-plan (dexrl.config.memory_plans)
    gpu_gb: float | None = None  # this machine's smallest GPU (GB); None: no GPU facts

    @property
    def smoke(self) -> bool:
        return self.config.smoke


@dataclass(frozen=True)
class ResumeRequest:
    """What ``dexrl resume`` asks for: its flags and overrides, built by the command."""

    run_dir: Path
    step: int | None = None
    allow_changes: bool = False
    overrides: tuple[str, ...] = ()
    launch: LaunchOptions = field(default_factory=LaunchOptions)
    move_aside: bool = False  # --move-aside: the checkpoint folders in the way


def gpus_per_node(smoke: bool, visible: int, asked: int | None = None) -> int:
    """GPUs per node a run's checks, plan and error figures assume: ``--gpus-per-node``, else
    one for ``--smoke`` (the CPU), else the ``visible`` GPUs of this node, else 8."""
    return asked or (1 if smoke else visible or 8)


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
        check_address(ray_address)


def gpu_count() -> int:
    """Visible CUDA devices on this node."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def smoke_checkpoint_path(run_dir: Path, model_type: str) -> Path | None:
    """Where ``--smoke`` writes the policy's tiny random checkpoint, if it needs one.

    The hook is the registry entry's ``smoke_checkpoint`` (a :data:`dexrl.specs.Reference` to a
    function called with the target path); a policy without one trains from its model config
    alone.
    """
    return run_dir / SMOKE_CHECKPOINT if get_policy(model_type).smoke_checkpoint else None


def write_smoke_checkpoint(run_dir: Path, model_type: str) -> Path | None:
    """The policy's tiny random checkpoint in the run folder for ``--smoke``, if it needs one
    (:func:`smoke_checkpoint_path`): built beside it and published whole, its files with the
    umask's modes (the policy's writer may create them 0600, as safetensors does)."""

    target = smoke_checkpoint_path(run_dir, model_type)
    if target is not None:
        with durable.staged_folder(target) as partial:
            load_reference(get_policy(model_type).smoke_checkpoint)(partial)
    return target


def run(spec: LaunchSpec) -> int:
    """Launch through the bridge and print progress; shared by ``train`` and ``resume``. With
    ``--max-restarts N``, a transient failure restarts the run from its last complete
    checkpoint (:mod:`dexrl.training.restarts`)."""
    return run_restarting(spec.run_dir, spec.options, lambda: _launch(spec),
                          lambda text: print(text, file=sys.stderr, flush=True))


def _launch(spec: LaunchSpec) -> int:
    """One launch through the bridge (one call: it registers the policies, records the run's
    state and supervises RLinf), its progress printed."""
    from dexrl.bridge.launch import driver as bridge
    from dexrl.training.progress import ProgressPrinter

    printer = ProgressPrinter(run_dir=spec.run_dir, forecast=_forecast_of(spec))
    try:
        code = bridge.launch(spec, on_progress=printer)
    except DexrlError as exc:
        exc.details += set_aside_unfinished(spec.run_dir, spec.start_step)
        raise with_plan_facts(exc, spec) from None
    for line in set_aside_unfinished(spec.run_dir, spec.start_step):
        printer.console.print(line, markup=False)
    printer.curves()  # RLinf closed its TensorBoard writer: the last step is on disk now
    if code:
        printer.console.print(interrupted_note(spec.run_dir), markup=False)
    return code


def interrupted_note(run_dir: Path) -> str:
    """What an interrupted run says last: where it stopped and how to go on."""

    step = read(run_dir).get("step", 0)
    last = last_complete(run_dir)
    if last is not None:
        return (f"Interrupted after step {step}; the run is resumable: `dexrl resume {run_dir}` "
                f"continues from {last.path.name}.")
    return (f"Interrupted after step {step}, before its first complete checkpoint: "
            f"`dexrl resume {run_dir}` starts it again from step 0.")


def with_plan_facts(exc: DexrlError, spec: LaunchSpec) -> DexrlError:
    """``exc``, its message extended by what the run's plan says where that helps: the size of a
    checkpoint for a full disk, the memory estimate of the worker group that ran out of it."""

    if exc.code not in ("disk-full", "training-out-of-memory"):
        return exc
    plan = _plan_of(spec)
    if plan is None:
        return exc
    from dexrl.training.plan import size_text

    if exc.code == "disk-full":
        fact = (f"each checkpoint needs about {size_text(plan.checkpoint_gb)} in "
                f"{checkpoints_dir(spec.run_dir)} (the plan's estimate)")
    else:
        role = (exc.where or "").rpartition(" ")[2]
        gpus = plan.placement.get(role, [])
        per_node = spec.gpus_per_node
        estimates = [plan.memory_gb_per_gpu.get(n * per_node + g, 0.0) for n, g in gpus]
        if not estimates:
            return exc
        fact = (f"the plan estimated about {size_text(max(estimates))} on each GPU the {role} "
                "group uses (`dexrl train --dry-run` shows the estimate); "
                + oom_plan_advice(role, spec.settings.runner.memory_plan))
    exc.message = f"{exc.message}; {fact}"
    exc.args = (exc.message,)
    return exc


OOM_PHASES = {"actor": "training (forward and backward of the micro-batches)",
              "rollout": "the rollout (the policy's calls)", "env": "the env steps"}


def oom_plan_advice(role: str, plan: str | None) -> str:
    """Which phase a worker group that ran out of memory was in, and which memory plan to try
    (docs/failures.md#out-of-memory)."""
    from dexrl.config.memory_plans import NAMES

    phase = f"it failed in {OOM_PHASES.get(role, 'its phase')}"
    if plan not in NAMES:
        return (f"{phase}; the run had no memory plan: `dexrl train --memory-plan 24gb "
                "--dry-run` shows the smallest plan's settings")
    smaller = NAMES[NAMES.index(plan) + 1:]
    if not smaller:
        return f"{phase} under the smallest memory plan ({plan}); cut the settings below"
    return (f"{phase} under the {plan} memory plan: try the {smaller[0]} plan "
            f"(`dexrl train --memory-plan {smaller[0]} --dry-run` shows its settings; "
            "`dexrl resume` takes them as key=value)")


def _forecast_of(spec: LaunchSpec) -> Forecast | None:
    """The run's forecast from where it starts (:mod:`dexrl.training.forecast`), None when
    there is none for it."""
    from dexrl.training.forecast import device_kind, make_forecast

    plan = _plan_of(spec)
    if plan is None:
        return None
    start = spec.resume_from.step if spec.resume_from is not None else 0
    forecast = make_forecast(spec.settings, plan, device_kind(spec.smoke)[0], from_step=start)
    return None if isinstance(forecast, str) else forecast


def _plan_of(spec: LaunchSpec) -> Plan | None:
    """The run's plan, None when it cannot be made (what it needs is gone)."""
    from dexrl.config.checks import Facts
    from dexrl.training.plan import make_plan

    suite = spec.settings.env.train.task_suite_name
    try:
        return make_plan(spec.cfg, Facts(suite, spec.gpus_per_node, cpu_only=spec.smoke),
                         settings=spec.settings)
    except Exception:  # a fact to add to an error, never a second failure
        return None


@dataclass
class NewRun:
    """A composed and checked new run that nothing has been written for yet (``prepare``)."""

    request: TrainRequest
    result: Validated  # the one composition and its checks, run-folder fields set
    findings: list[Finding]  # the config's findings (``--smoke``'s own path left out)
    suite: str
    per_node: int
    gpus: int
    target: Path
    owned: dict[str, object]  # the run-folder fields dexrl sets (config.owned_keys)
    memory: MemoryChoice | None = None  # the memory plan and why (training.memory_choice)

    @property
    def smoke(self) -> bool:
        return self.request.smoke


def prepare(request: TrainRequest) -> NewRun:
    """Compose and check a new run's config, once, and choose its folder; writes nothing.

    The config is complete when checked: its run-folder fields set and, for ``--smoke``, its
    model path at the tiny checkpoint :func:`start` writes.
    """
    from dexrl.checkpoints.sources import locate_checkpoint
    from dexrl.config.compose import suite_of
    from dexrl.config.memory_plans import check_choice
    from dexrl.config.owned_keys import set_run_folder
    from dexrl.config.run_paths import point_at_checkpoint
    from dexrl.config.validate import check_composed
    from dexrl.training.memory_choice import compose_with_plan

    asked = request.config
    suite, model, smoke = asked.suite, asked.model, asked.smoke
    if request.name and request.run_dir:
        raise DexrlError("--name and --run-dir both name the run folder",
                         "pass one: --name NAME (runs/NAME) or --run-dir PATH",
                         code="flags-name-run-dir")
    if request.ckpt and smoke:
        raise DexrlError("--smoke trains a tiny random model and takes no --ckpt",
                         "drop --ckpt, or drop --smoke to train the checkpoint",
                         code="flags-smoke-ckpt")
    if request.ckpt:
        asked = replace(asked, ckpt_path=locate_checkpoint(request.ckpt))
    gpus = 0 if request.dry_run or smoke else gpu_count()
    per_node = gpus_per_node(smoke, gpus, request.gpus_per_node)
    composed, memory = compose_with_plan(asked, check_choice(request.memory_plan),
                                         request.gpu_gb, per_node, dry_run=request.dry_run)
    cfg = composed.cfg
    suite_name = suite_of(cfg, suite) or "libero"
    model_type = str(cfg.actor.model.model_type)
    label = model or model_type.removeprefix("dexbotic_")
    target = (Path(request.run_dir) if request.run_dir
              else default_run_dir(suite_name, label, request.name))
    target = Path(os.path.abspath(target.expanduser()))
    owned = set_run_folder(cfg, target)
    tiny = smoke_checkpoint_path(target, model_type) if smoke else None
    if tiny is not None:  # both model paths: the rollout's follows the actor's
        point_at_checkpoint(cfg, tiny)
    result = check_composed(composed, suite, per_node, cpu_only=smoke)
    findings = [f for f in result.findings if not (smoke and _is_smoke_path_warning(f))]
    return NewRun(request, result, findings, suite_name, per_node, gpus, target, owned, memory)


def start(new: NewRun) -> LaunchSpec:
    """Refuse what cannot launch, then write the run folder (``--smoke``'s tiny checkpoint
    included); the config is the one :func:`prepare` checked, resolved."""
    from dexrl.config.resume_rules import planned_steps
    from dexrl.runs.record import resolved, write_run_files

    ray_address = new.request.launch.ray_address
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
        model_type = str(cfg.actor.model.model_type)
        path = write_smoke_checkpoint(new.target, model_type)
        if path is not None:  # the config points there already; the files must hold up too
            refuse_on_errors(new.result.name, check_checkpoint_dir(path, model_type))
    cfg = resolved(cfg)
    spec = LaunchSpec(cfg, new.target, new.smoke, None, planned_steps(cfg), new.request.launch,
                      gpus_per_node=new.per_node)
    provenance = checkpoint_provenance(spec.settings.actor.model.model_path)
    write_run_files(new.target, cfg, sys.argv,
                    {"checkpoint": provenance, "smoke": new.smoke, "suite": new.suite})
    return spec


def launch_plan(new: NewRun) -> Plan:
    """What the launch would do (``--dry-run``), sized by the checkpoint the run would train:
    ``--smoke``'s tiny one goes to a temporary folder, since a dry run writes no run folder."""
    from dexrl.config.checks import Facts
    from dexrl.training.plan import make_plan

    facts = Facts(new.suite, new.per_node, cpu_only=new.smoke)
    if not new.smoke:
        return make_plan(new.result.cfg, facts, settings=new.result.settings)
    with tempfile.TemporaryDirectory(prefix="dexrl-dry-run-") as tmp:
        ckpt = write_smoke_checkpoint(Path(tmp), str(new.result.cfg.actor.model.model_type))
        return make_plan(new.result.cfg, facts, ckpt_dir=ckpt, settings=new.result.settings)


def _is_smoke_path_warning(finding: Finding) -> bool:
    """--smoke writes its own checkpoint, so a missing default path is expected."""
    from dexrl.config.run_paths import MODEL_PATH_KEYS

    return finding.where == MODEL_PATH_KEYS[0] and finding.level == "warning"


@dataclass
class Resumption:
    """A run folder checked for a resume that nothing has been written for yet (``--dry-run``
    stops here)."""

    request: ResumeRequest
    dir: Path
    checkpoint: Checkpoint | None  # None: no complete checkpoint yet, the run starts again at 0
    old: DictConfig  # the saved config, paths re-anchored
    new: DictConfig  # with the overrides and the run-folder fields
    owned: dict[str, object]  # the run-folder fields dexrl sets (config.owned_keys)
    total: int  # the step the run stops at
    smoke: bool
    per_node: int  # GPUs per node the config was checked for
    notes: list[str]  # what happened to the folder before: story, a move, what is in the way
    in_the_way: list[Checkpoint] = field(default_factory=list)  # for --move-aside

    @property
    def from_step(self) -> int:
        """The step the run continues from: its checkpoint's, 0 when it starts again."""
        return self.checkpoint.step if self.checkpoint is not None else 0


def prepare_resume(request: ResumeRequest) -> Resumption:
    """Open a run folder, pick its checkpoint and check the changed config; writes nothing.

    A run folder with no complete checkpoint yet (stopped before its first save) and no
    ``--step`` starts again from step 0, in the same folder with its saved config. A damaged
    checkpoint, and checkpoint folders the run would write over or pass over (unless
    ``--move-aside``), are refused (:func:`~dexrl.checkpoints.files.guard.check_resume`).
    """
    from omegaconf import OmegaConf

    from dexrl.config.checks import Facts, run_config_checks
    from dexrl.config.overrides import RUN, apply_overrides, parse_overrides
    from dexrl.config.owned_keys import refuse_owned_overrides, set_run_folder
    from dexrl.config.resume_rules import check_steps_left, refuse_unsafe_changes
    from dexrl.config.run_paths import open_run
    from dexrl.config.settings import Settings

    overrides = list(request.overrides)
    refuse_owned_overrides(overrides, "a resumed run stays in its folder and --step N picks "
                           "the checkpoint")
    opened = open_run(request.run_dir)
    checkpoint = resume_point(opened.dir, request.step)
    checked, in_the_way = check_resume(opened.dir, checkpoint, move=request.move_aside)
    old = opened.config
    new = OmegaConf.create(OmegaConf.to_container(old))
    OmegaConf.set_struct(new, True)
    apply_overrides(new, parse_overrides(overrides, RUN), RUN)
    refuse_unsafe_changes(old, new, request.allow_changes)
    owned = set_run_folder(new, opened.dir, checkpoint.path if checkpoint else None)
    s = Settings.read(new)
    suite = opened.manifest.get("suite") or s.env.train.task_suite_name
    smoke = bool(opened.manifest.get("smoke"))
    per_node = gpus_per_node(smoke, 0 if smoke else gpu_count())
    refuse_on_errors(str(opened.dir), run_config_checks(new, Facts(suite, per_node,
                                                                   cpu_only=smoke), s))
    total = check_steps_left(new, checkpoint.step if checkpoint else 0, request.run_dir)
    notes = [line[0].upper() + line[1:] + "." for line in story(opened.dir)]
    if opened.moved_from is not None:
        notes.append(f"note: the run folder was at {opened.moved_from}; its paths now point "
                     f"into {opened.dir}")
    return Resumption(request, opened.dir, checkpoint, old, new, owned, total, smoke, per_node,
                      notes + checked, in_the_way)


def start_resume(resumption: Resumption) -> LaunchSpec:
    """Refuse a second live driver, then save the new config, resolved (without a checkpoint,
    the launch starts again from step 0)."""
    from dexrl.runs.record import resolved, save_config

    options = resumption.request.launch
    check_ray_address(options.ray_address)
    run_dir = resumption.dir
    previous = previous_run(run_dir)
    if previous is not None and previous.still_running:
        raise DexrlError(f"dexrl process {previous.pid} on {previous.host} is still running "
                         "this run", "wait for it to end or stop it (Ctrl-C), then resume; if "
                         f"that process is gone, delete {run_dir / STATE_FILE}",
                         where=str(run_dir), code="run-in-use")
    cfg = resolved(resumption.new)
    save_config(run_dir, cfg)
    resumption.notes += moved_notes(move_aside(run_dir, resumption.in_the_way))
    return LaunchSpec(cfg, run_dir, resumption.smoke, resumption.checkpoint, resumption.total,
                      options, gpus_per_node=resumption.per_node)
