"""How long a global step and a whole run will take (``train --dry-run``, the progress line).

A cost model of one GPU's share of a synchronous step, phase by phase, with figures measured per
device kind and policy (:mod:`dexrl.training.calibrations`). Design and the measurements behind
it: docs/performance.md#the-step-forecast.
"""

from __future__ import annotations

import shutil
import subprocess
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from typing import Any

from omegaconf import DictConfig

from dexrl.config.settings import Settings, given, settings_of
from dexrl.training.calibrations import CALIBRATIONS, Calibration, Points
from dexrl.training.plan import saves_between

REAL_SIZE_PARAMS = 1e9  # a checkpoint at least this large is sized by the real-size figures
MEASURED_SUITE = "libero_spatial"  # the LIBERO suite every calibration stepped


@dataclass(frozen=True)
class StepWork:
    """What one GPU's share of a synchronous global step does, from the config.

    Attributes:
        envs: Envs per env rank (``env.train.total_num_envs`` over the env ranks).
        stages: ``rollout.pipeline_stage_num``: the envs step in this many groups, one after
            another, while the rollout computes the next group's actions.
        rollout_epochs: ``env.train.rollout_epoch``: episodes (resets) per env per step.
        chunk_steps: Policy calls per env per rollout epoch (``max_steps_per_rollout_epoch``
            over ``num_action_chunks``), besides the last one for the bootstrap value.
        actions_per_chunk: Env steps per policy call.
        samples: Training samples (action chunks) per actor rank.
        update_epochs: PPO epochs over them.
        prefix_passes: Frozen-prefix passes per sample (1 with the prefix cache).
        rollout_path: ``eager``, ``compiled``, ``graphed`` or ``compiled+graphed``.
        overlap_bootstrap: ``runner.overlap_env_bootstrap``: the next step's first reset runs
            during training.
    """

    envs: int
    stages: int
    rollout_epochs: int
    chunk_steps: int
    actions_per_chunk: int
    samples: float
    update_epochs: int
    prefix_passes: float
    rollout_path: str = "eager"
    overlap_bootstrap: bool = False

    @property
    def batch(self) -> int:
        """Envs per rollout call (one stage's)."""
        return max(1, self.envs // self.stages)


@dataclass(frozen=True)
class Forecast:
    """Expected seconds of one global step (by phase) and of the run.

    Attributes:
        phases: Seconds per step of env steps, resets, rollout calls, the overlap of env steps
            with rollout calls (negative), training and the weight sync.
        step_s: A global step after the first.
        first_extra_s: What the first step adds (building the envs, the first compilations).
        startup_s: Command start to the first step.
        saves_s: All checkpoint writes.
        steps: Steps the run takes from here.
        calibration: The figures used.
        notes: What the forecast does not cover.
    """

    phases: dict[str, float]
    step_s: float
    first_extra_s: float
    startup_s: float
    saves_s: float
    steps: int
    calibration: Calibration
    notes: tuple[str, ...] = field(default=())

    @property
    def run_s(self) -> float:
        """The whole run: start-up, the steps, the first step's extra and the saves."""
        return self.startup_s + self.first_extra_s + self.steps * self.step_s + self.saves_s


def interpolate(points: Points, x: float) -> float:
    """Piecewise-linear in ``points`` ((x, y) sorted by x), held flat below the first point and
    extended along the last segment above the last (never below zero)."""
    xs = [p[0] for p in points]
    if len(points) == 1 or x <= xs[0]:
        return points[0][1]
    i = min(bisect_left(xs, x), len(points) - 1)
    (x0, y0), (x1, y1) = points[i - 1], points[i]
    return max(0.0, y0 + (y1 - y0) * (x - x0) / (x1 - x0))


def step_phases(work: StepWork, cal: Calibration) -> dict[str, float]:
    """Seconds per global step of each phase on one GPU (all phases one after another, as the
    synchronous runner on a collocated GPU runs them)."""
    env_s = work.actions_per_chunk * interpolate(cal.env_step_s, work.batch)
    call_s = interpolate(cal.call_s.get(work.rollout_path) or cal.call_s["eager"], work.batch)
    s, epochs, k = work.stages, work.rollout_epochs, work.chunk_steps
    env_total = epochs * k * s * env_s
    calls_total = epochs * s * (k + 1) * call_s
    # With stages, one stage's envs step while the rollout computes another's actions: a chunk
    # step takes the longer of the two per stage, plus the shorter once (filling the pipeline).
    chunk = env_s + call_s if s == 1 else max(s * env_s, s * call_s) + min(env_s, call_s)
    overlap = epochs * k * chunk - epochs * k * s * (env_s + call_s)
    training = work.samples * (work.update_epochs * cal.train_sample_s
                               + work.prefix_passes * cal.prefix_sample_s)
    resets = epochs * s * cal.reset_s
    if work.overlap_bootstrap:  # the first epoch's resets run during the previous training
        overlap -= min(s * cal.reset_s, training)
    return {"env steps": env_total, "resets": resets, "rollout calls": calls_total,
            "overlap": overlap, "training": training, "weight sync": cal.sync_s}


def with_point(points: Points, x: float, y: float) -> Points:
    """``points`` with (x, y) in place of any point at ``x``."""
    return tuple(sorted([p for p in points if p[0] != x] + [(x, y)]))


def fit(work: StepWork, measured: dict[str, float], base: Calibration, *, measured_on: str,
        basis: str, startup_s: float | None = None, first_step_extra_s: float | None = None,
        reset_s: float | None = None) -> Calibration:
    """The calibration under which :func:`step_phases` of ``work`` gives ``measured``.

    Args:
        work: What the measured step did.
        measured: Seconds of one steady step per phase, by RLinf's metrics: ``env steps``
            (``time/env/env_interact_step``), ``resets`` (``time/env/env/bootstrap_step``),
            ``rollout calls`` (``time/rollout/predict``), ``training``
            (``time/actor/run_training``) and ``weight sync`` (``time/sync_weights``).
        base: Supplies what one step cannot tell apart (the prefix's share of training, the
            figures at other batch sizes and paths, checkpoint writes).
        measured_on: The date.
        basis: What measured it.
        startup_s: Command start to workers ready, if measured.
        first_step_extra_s: The first step's extra over a steady one, if measured.
        reset_s: One rollout epoch's resets, where ``measured["resets"]`` did not count every
            epoch's (with ``runner.overlap_env_bootstrap`` a step's first resets run during the
            step before it).
    """
    s, epochs, k = work.stages, work.rollout_epochs, work.chunk_steps
    env_s = measured["env steps"] / (epochs * k * s) / work.actions_per_chunk
    call_s = measured["rollout calls"] / (epochs * s * (k + 1))
    modelled = work.samples * (work.update_epochs * base.train_sample_s
                               + work.prefix_passes * base.prefix_sample_s)
    scale = measured["training"] / modelled if modelled else 1.0
    path = work.rollout_path
    return replace(
        base, measured=measured_on, basis=basis,
        env_step_s=with_point(base.env_step_s, work.batch, env_s),
        reset_s=(measured["resets"] / epochs if reset_s is None else reset_s) / s,
        call_s={**base.call_s, path: with_point(base.call_s.get(path, ()), work.batch, call_s)},
        train_sample_s=base.train_sample_s * scale, prefix_sample_s=base.prefix_sample_s * scale,
        sync_s=measured["weight sync"],
        startup_s=base.startup_s if startup_s is None else startup_s,
        first_step_extra_s=(base.first_step_extra_s if first_step_extra_s is None
                            else first_step_extra_s))


def work_of(cfg: DictConfig | Settings, plan: Any) -> StepWork:
    """The :class:`StepWork` of one GPU's share, from a validated config and its plan."""
    s = settings_of(cfg)
    ranks = {comp: len(slots) or 1 for comp, slots in plan.placement.items()}
    envs = int(s.env.train.total_num_envs) // ranks.get("env", 1)  # type: ignore[arg-type]
    chunks = int(given(s.actor.model.num_action_chunks, 1))
    cache = plan.prefix_cache
    update_epochs = int(given(s.algorithm.update_epoch, 1))
    return StepWork(
        envs=envs, stages=int(given(s.rollout.pipeline_stage_num, 1)),
        rollout_epochs=int(given(s.env.train.rollout_epoch, 1)),
        chunk_steps=int(s.env.train.max_steps_per_rollout_epoch) // chunks,  # type: ignore[arg-type]
        actions_per_chunk=chunks, samples=plan.samples / ranks.get("actor", 1),
        update_epochs=update_epochs,
        prefix_passes=cache.passes if cache is not None else update_epochs,
        rollout_path=rollout_path(s),
        overlap_bootstrap=s.runner.overlap_env_bootstrap is True)


def rollout_path(cfg: DictConfig | Settings) -> str:
    """``eager``, ``compiled``, ``graphed`` or ``compiled+graphed``, from the rollout's keys."""
    s = settings_of(cfg)
    compiled = s.rollout.enable_torch_compile is True
    graphed = s.rollout.enable_cuda_graph is True
    return "+".join(p for p, on in (("compiled", compiled), ("graphed", graphed)) if on) or "eager"


def unsupported(cfg: DictConfig | Settings, plan: Any) -> str | None:
    """Why the model cannot forecast this run, or None."""
    s = settings_of(cfg)
    if plan.mode != "sync":
        return f"measured on synchronous steps only (this run: --mode {plan.mode})"
    if s.actor.model.dexbotic.train_expert_only is not True:
        return "measured with train_expert_only only (this run trains every parameter)"
    if s.actor.model.joint_logprob is True:
        return "measured with one scored denoising step only (this run: flow_noise's joint " \
               "log-prob, about 4x the training time: docs/algorithms.md)"
    return None


def choose(device: str, model_type: str, params: float, env: str = "libero"
           ) -> Calibration | None:
    """The calibration of ``model_type`` at this size with ``env`` on ``device`` (a GPU's name,
    or ``cpu``)."""
    size = "real" if params >= REAL_SIZE_PARAMS else "tiny"
    for cal in CALIBRATIONS:
        if (cal.model_type, cal.size, cal.env) == (model_type, size, env) and (
                cal.device.lower() in device.lower()):
            return cal
    return None


def env_of(cfg: DictConfig | Settings) -> str:
    """The env a run's training steps: a dexrl task's name, else RLinf's ``env_type``."""
    train = settings_of(cfg).env.train
    return str(train.dexrl_env or train.env_type)


def make_forecast(cfg: DictConfig | Settings, plan: Any, device: str, *, from_step: int = 0
                  ) -> Forecast | str:
    """The forecast of a run on ``device`` (a GPU's name, or ``cpu``), or why there is none.

    Args:
        cfg: The validated config.
        plan: Its :class:`~dexrl.training.plan.Plan`.
        device: What each rank runs on.
        from_step: The step a resume continues from.
    """
    s = settings_of(cfg)
    if (why := unsupported(s, plan)) is not None:
        return why
    model_type, env = str(s.actor.model.model_type), env_of(s)
    cal = choose(device, model_type, plan.params, env)
    if cal is None:
        known = ", ".join(sorted({f"{c.model_type} ({c.size}) with {c.env} on {c.device}"
                                  for c in CALIBRATIONS}))
        return f"no measurements of {model_type} with {env} on {device} yet (measured: {known})"
    try:
        work = work_of(s, plan)
        phases = step_phases(work, cal)
    except (TypeError, ValueError, ZeroDivisionError) as exc:  # a plan line, never a failure
        return f"the config does not say what a step does ({type(exc).__name__}: {exc})"
    notes = []
    attention = str(given(s.actor.model.dexbotic.attention, "eager"))
    if attention != cal.attention:
        notes.append(f"measured with {cal.attention} attention, not {attention}")
    if int(given(s.actor.model.num_steps, cal.denoise_steps)) != cal.denoise_steps:
        notes.append(f"rollout calls measured at {cal.denoise_steps} denoising steps")
    suite = s.env.train.task_suite_name
    if env == "libero" and suite not in (None, MEASURED_SUITE):
        notes.append(f"LIBERO measured on {MEASURED_SUITE}; {suite}'s scenes may step at "
                     "another speed")
    if work.rollout_path not in cal.call_s:
        notes.append(f"rollout calls at eager speed ({work.rollout_path} not measured)")
    # A cold compile cache's cost: dexrl keeps the cache between starts (TORCHINDUCTOR_CACHE_DIR).
    compile_s = cal.compile_s if "compiled" in work.rollout_path else 0.0
    steps = max(plan.global_steps - from_step, 0)
    saves = saves_between(from_step, plan.global_steps, plan.save_interval)
    return Forecast(phases=phases, step_s=sum(phases.values()), steps=steps,
                    first_extra_s=cal.first_step_extra_s + compile_s, startup_s=cal.startup_s,
                    saves_s=saves * plan.checkpoint_gb / cal.save_gb_per_s, calibration=cal,
                    notes=tuple(notes))


def device_kind(smoke: bool) -> tuple[str, bool]:
    """(what the ranks run on, whether it was read from this machine): ``cpu`` for ``--smoke``,
    else the first GPU ``nvidia-smi`` names here, else an H100 (assumed, the GPU measured)."""
    if smoke:
        return "cpu", True
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=10, check=False)
            names = [line.strip() for line in out.stdout.splitlines() if line.strip()]
            if out.returncode == 0 and names:
                return names[0], True
        except (OSError, subprocess.SubprocessError):
            pass
    return "NVIDIA H100", False


def duration(seconds: float) -> str:
    """``0.5 s``, ``42 s``, ``3.5 min`` or ``20.1 h``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def render_forecast(forecast: Forecast | str, device: str, read_here: bool) -> list[str]:
    """The forecast lines of the plan."""
    where = device if read_here else f"{device} (assumed: this machine shows no GPU)"
    if isinstance(forecast, str):
        return [f"Forecast on {where}: none: {forecast}"]
    cal = forecast.calibration
    shown = [f"{name} {duration(abs(s))}" if name != "overlap" else f"overlap −{duration(-s)}"
             for name, s in forecast.phases.items() if abs(s) >= 0.05]
    lines = [f"Forecast on {where}, per rank (sync, phases one after another):",
             f"  global step ≈ {duration(forecast.step_s)}: {', '.join(shown)}",
             f"  whole run ≈ {duration(forecast.run_s)}: {forecast.steps} step(s), start-up "
             f"{duration(forecast.startup_s)}, first step +{duration(forecast.first_extra_s)}, "
             f"checkpoints {duration(forecast.saves_s)}",
             f"  basis: {cal.basis} ({cal.measured})"]
    lines += [f"  note: {note}" for note in forecast.notes]
    return lines


def forecast_record(forecast: Forecast | str, device: str, read_here: bool) -> dict[str, Any]:
    """The forecast as data (``train --dry-run --json``), seconds unrounded."""
    base = {"device": device, "device_read_here": read_here}
    if isinstance(forecast, str):
        return {**base, "available": False, "reason": forecast}
    cal = forecast.calibration
    return {**base, "available": True, "step_s": forecast.step_s,
            "phases_s": dict(forecast.phases), "first_step_extra_s": forecast.first_extra_s,
            "startup_s": forecast.startup_s, "checkpoints_s": forecast.saves_s,
            "steps": forecast.steps, "run_s": forecast.run_s, "notes": list(forecast.notes),
            "calibration": {"device": cal.device, "model_type": cal.model_type,
                            "size": cal.size, "measured": cal.measured, "basis": cal.basis}}
