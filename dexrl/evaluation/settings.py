"""Every value an evaluation uses, where it came from, and the LIBERO env config built from them.

Defaults follow the protocol (:mod:`dexrl.evaluation.protocol`): ``standard`` takes the published
values; ``training`` takes the episode horizon per suite (:mod:`dexrl.catalog`), actions per call
and denoising steps from the checkpoint's training run when known, else from dexrl's model config
group. The env config comes from dexrl's packaged ``env/<suite>.yaml`` (with the run's camera
settings under ``training``) plus ``key=value`` overrides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dexrl.bridge.registry import has_fast_path
from dexrl.catalog import get_suite
from dexrl.checkpoints.files.layout import read_json
from dexrl.checkpoints.policy import model_defaults
from dexrl.checkpoints.sources import CheckpointSource
from dexrl.config.compose import conf_dir
from dexrl.config.overrides import ENV, apply_overrides, parse_overrides
from dexrl.errors import DexrlError
from dexrl.evaluation.protocol import (
    STANDARD_NUM_STEPS,
    STANDARD_REPLAN,
    STANDARD_SCENE_SEED,
    STANDARD_SETTLE_STEPS,
    STANDARD_SOURCES,
    STANDARD_TRIALS,
    TRAINING_SETTLE_STEPS,
    Protocol,
    check_protocol,
    default_protocol,
)
from dexrl.evaluation.request import EvalRequest
from dexrl.evaluation.videos import check_mode
from dexrl.models.choices import COMPILE_MODES, GRAPHING_MODES

# Env keys the eval sets itself (through flags or by design); overriding them would break pairing.
FLAG_KEYS = {
    "task_suite_name": "--suite", "seed": "--seed", "total_num_envs": "--num-envs",
    "max_episode_steps": "--max-episode-steps", "max_steps_per_rollout_epoch":
    "--max-episode-steps", "task_id_filter": "--tasks", "is_eval": None, "auto_reset": None,
    "ignore_terminations": None, "use_fixed_reset_state_ids": None,
    "use_ordered_reset_state_ids": None, "specific_reset_id": None, "group_size": None,
    "settle_steps": "--protocol",
}


# LIBERO's envs end an episode (robosuite raises on the next step) this many steps after a reset.
ROBOSUITE_HORIZON = 1000


@dataclass(frozen=True)
class EvalSettings:
    """The values one evaluation runs with (all recorded in results.json ``config``)."""

    suite: str
    tasks: list[int]
    episodes_per_task: int
    num_envs: int
    seed: int
    num_steps: int
    action_chunk: int
    max_episode_steps: int
    video: str
    device: str
    dtype: str | None
    env_overrides: list[str]
    sources: dict[str, str] = field(default_factory=dict)
    protocol: str = "training"
    settle_steps: int = TRAINING_SETTLE_STEPS
    scene_seed: int | None = None
    deviations: list[str] = field(default_factory=list)
    torch_compile: str | None = None
    cuda_graph: bool = False

    def record(self) -> dict[str, Any]:
        """JSON-ready form for results.json."""
        return dict(self.__dict__)

    def protocol_value(self) -> Protocol:
        """The protocol these settings run."""
        return Protocol(self.protocol, self.settle_steps, self.scene_seed,
                        tuple(self.deviations))


def resolve_settings(source: CheckpointSource, request: EvalRequest,
                     tasks: list[int]) -> EvalSettings:
    """Fill defaults, check every value, and note where each came from.

    Args:
        source: The resolved checkpoint.
        request: The options as given.
        tasks: The task ids (``request.tasks`` read against the suite's tasks).

    Raises:
        DexrlError: checkpoint/suite mismatch, out-of-range values, unknown device.
    """
    suite = get_suite(request.suite).name
    trained = source.training
    if (trained and trained.suite and trained.suite != suite
            and not request.allow_suite_mismatch):
        raise DexrlError(f"the checkpoint was trained on {trained.suite}, not {suite}",
                         f"evaluate with --suite {trained.suite}, or add --allow-suite-mismatch "
                         "to evaluate it on another suite on purpose", where="--suite",
                         code="eval-suite-mismatch")
    spec = get_suite(suite)
    given = request.protocol
    protocol = check_protocol(given or default_protocol(source.form, spec.libero), spec.libero,
                              suite)
    standard = protocol == "standard"
    sources: dict[str, str] = {"protocol": "command line" if given else
                               f"default for a {source.form} checkpoint on {suite}"}
    if standard:
        defaults_chunk = STANDARD_REPLAN.get(source.model_type,
                                             model_defaults(source.model_type)[0])
        defaults_steps = STANDARD_NUM_STEPS
        default_from = {"action_chunk": STANDARD_SOURCES["action_chunk"],
                        "num_steps": STANDARD_SOURCES["num_steps"]}
        trained = None  # the published protocol does not take the run's values
    else:
        defaults_chunk, defaults_steps = model_defaults(source.model_type)
        model_file = f"dexrl model config model/{source.model_type}.yaml"
        default_from = {"action_chunk": model_file, "num_steps": model_file}

    def pick(name: str, given: int | None, trained_value: int | None, default: int) -> int:
        if given is not None:
            sources[name] = "command line"
            return given
        if trained_value is not None:
            sources[name] = f"training config ({trained.source})"
            return trained_value
        sources[name] = default_from[name]
        return default

    deviations = [f"--{flag.replace('_', '-')} {value}" for flag, value, fixed in (
        ("action_chunk", request.action_chunk, defaults_chunk),
        ("num_steps", request.num_steps, defaults_steps),
        ("max_episode_steps", request.max_episode_steps, spec.horizon))
        if standard and value is not None and value != fixed]
    deviations += list(request.env_overrides) if standard else []
    chunk_size = _chunk_size(source)
    chunk = pick("action_chunk", request.action_chunk,
                 trained and trained.num_action_chunks, defaults_chunk)
    if request.action_chunk is None and chunk > chunk_size:  # a default never exceeds the chunk
        chunk = chunk_size
        sources["action_chunk"] += f", capped at the checkpoint's chunk_size {chunk_size}"
        deviations += [f"action_chunk capped at the checkpoint's chunk_size {chunk_size}"
                       ] if standard else []
    steps = pick("num_steps", request.num_steps, trained and trained.num_steps, defaults_steps)
    horizon = request.max_episode_steps
    sources["max_episode_steps"] = "command line" if horizon else (
        STANDARD_SOURCES["max_episode_steps"] if standard else f"suite horizon of {suite}")
    horizon = horizon or spec.horizon
    total = len(tasks) * request.episodes_per_task
    # A standard task's trials run in order in one env: more envs than tasks would stay idle.
    lanes = len(tasks) if standard else total
    envs = min(request.num_envs or _default_num_envs(), lanes)
    sources["num_envs"] = ("command line" if request.num_envs else "min(CPU cores, tasks)"
                           if standard else "min(CPU cores, episodes)")
    if request.num_envs and envs < request.num_envs:
        sources["num_envs"] += f", capped at {envs} ({'tasks' if standard else 'episodes'})"
    sources["episodes_per_task"] = (
        "command line" if request.episodes_per_task != STANDARD_TRIALS
        else STANDARD_SOURCES["episodes_per_task"] if standard else "dexrl eval's default")
    settle = STANDARD_SETTLE_STEPS if standard else TRAINING_SETTLE_STEPS
    sources["settle_steps"] = ("published protocol" if standard
                               else "RLinf's LiberoEnv.reset (what training runs)")
    for name, value, low, high in (("--action-chunk", chunk, 1, chunk_size),
                                   ("--num-steps", steps, 1, None),
                                   ("--max-episode-steps", horizon, 1, None),
                                   ("--num-envs", envs, 1, None)):
        if value < low or (high is not None and value > high):
            bound = f"{low}..{high}" if high is not None else f"at least {low}"
            raise DexrlError(f"{name} is {value}", f"use {bound}", where=name,
                             code="eval-value-out-of-range")
    if spec.libero and settle + horizon + chunk - 1 > ROBOSUITE_HORIZON:
        longest = ROBOSUITE_HORIZON - settle - chunk + 1
        raise DexrlError(f"--max-episode-steps {horizon} with {settle} settle steps and chunks of "
                         f"{chunk} would step a LIBERO env past robosuite's horizon of "
                         f"{ROBOSUITE_HORIZON} steps", f"use --max-episode-steps {longest} or less",
                         where="--max-episode-steps", code="eval-horizon-too-long")
    sources["device"] = ("command line" if request.device != "auto"
                         else "auto (CUDA if visible)")
    sources["dtype"] = "command line" if request.dtype else "the checkpoint's weights"
    device = resolve_device(request.device)
    check_fast_path(request, source.model_type, device)
    for name, given in (("torch_compile", request.torch_compile),
                        ("cuda_graph", request.cuda_graph)):
        sources[name] = "command line" if given else "default: off (eager policy calls)"
    return EvalSettings(suite, list(tasks), request.episodes_per_task, envs, request.seed, steps,
                        chunk, horizon, check_mode(request.video), device,
                        request.dtype, list(request.env_overrides), sources, protocol, settle,
                        STANDARD_SCENE_SEED if standard else None, deviations,
                        torch_compile=request.torch_compile, cuda_graph=request.cuda_graph)


def check_fast_path(request: EvalRequest, model_type: str, device: str) -> None:
    """``--torch-compile`` and ``--cuda-graph``: a mode torch knows, a model type with the
    rollout's fast call, a CUDA device for graphs, and no compile mode that records CUDA graphs
    itself beside them.

    Raises:
        DexrlError: the first of these that fails.
    """
    mode, graphs = request.torch_compile, request.cuda_graph
    if mode is not None and mode not in COMPILE_MODES:
        raise DexrlError(f"torch.compile mode {mode!r} is not one torch knows",
                         f"use one of {', '.join(COMPILE_MODES)}", where="--torch-compile",
                         code="eval-compile-mode-unknown")
    if (mode is not None or graphs) and not has_fast_path(model_type):
        raise DexrlError(f"{model_type} has no compiled or CUDA-graph policy call",
                         "leave --torch-compile and --cuda-graph out",
                         where="--cuda-graph" if graphs else "--torch-compile",
                         code="eval-fast-path-unsupported")
    if graphs and not device.startswith("cuda"):
        raise DexrlError(f"--cuda-graph needs the policy on a CUDA GPU; it runs on {device}",
                         "leave --cuda-graph out (--torch-compile works on a CPU), or pass "
                         "--device cuda on a machine with a GPU", where="--cuda-graph",
                         code="eval-cuda-graph-no-gpu")
    if graphs and mode in GRAPHING_MODES:
        raise DexrlError(f"torch.compile mode {mode!r} records CUDA graphs itself, which cannot "
                         "run inside the policy call's own CUDA graph",
                         "use --torch-compile default (or max-autotune-no-cudagraphs) with "
                         "--cuda-graph", where="--torch-compile", code="eval-compile-mode-graphs")


def _default_num_envs() -> int:
    import os

    return max(1, os.cpu_count() or 1)


def _chunk_size(source: CheckpointSource) -> int:
    config = read_json(source.model_dir / "config.json", what="model config")
    return int(config.get("chunk_size", 50))


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a GPU is visible, else ``cpu``; check an explicit choice."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        parsed = torch.device(device)
    except (RuntimeError, ValueError):
        raise DexrlError(f"unknown device '{device}'", "use auto, cpu, cuda or cuda:N",
                         where="--device", code="eval-device-unknown") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise DexrlError("--device cuda but no CUDA GPU is visible", "use --device cpu (or auto)",
                         where="--device", code="eval-no-cuda")
    return device


def user_env_config(suite: str, source: CheckpointSource, overrides: Sequence[str],
                    run_camera: bool = True) -> DictConfig:
    """dexrl's ``env/<suite>.yaml``, the run's camera settings (unless ``run_camera`` is False:
    the standard protocol's 256x256) and a dexrl task's own settings, then the user's
    ``key=value`` overrides.

    Raises:
        DexrlError: an override of an unknown key, of a key a flag controls, or unparsable.
    """
    cfg = OmegaConf.load(conf_dir() / "env" / f"{suite}.yaml")
    trained = source.training
    if run_camera and trained and trained.init_params and trained.suite == suite:
        cfg.init_params = OmegaConf.merge(cfg.init_params, trained.init_params)
    if trained and trained.task and trained.suite == suite:  # a dexrl task's settings
        cfg[suite] = OmegaConf.merge(cfg[suite], trained.task)
    cfg.video_cfg.video_base_dir = ""  # dexrl records its own videos; RLinf's recorder is unused
    OmegaConf.set_struct(cfg, True)
    for item in overrides:  # one at a time: the first bad item is the one reported
        (override,) = parse_overrides([item], ENV)
        if override.key.split(".")[0] in FLAG_KEYS:
            flag = FLAG_KEYS[override.key.split(".")[0]]
            raise DexrlError(f"'{override.key}' is set by dexrl eval itself",
                             f"use {flag}" if flag else "leave it out: the eval protocol fixes it",
                             where=item, code="eval-env-override-owned")
        apply_overrides(cfg, [override], ENV)
    OmegaConf.set_struct(cfg, False)
    return cfg


def env_config(settings: EvalSettings, source: CheckpointSource) -> DictConfig:
    """The env config an evaluation runs: :func:`user_env_config`, then the eval's own values
    (suite, seed, envs, horizon, tasks, fixed episodes).

    Raises:
        DexrlError: as :func:`user_env_config`.
    """
    cfg = user_env_config(settings.suite, source, settings.env_overrides,
                          run_camera=settings.protocol != "standard")
    cfg.merge_with({
        "task_suite_name": settings.suite, "seed": settings.seed,
        "total_num_envs": settings.num_envs, "max_episode_steps": settings.max_episode_steps,
        "max_steps_per_rollout_epoch": settings.max_episode_steps,
        "task_id_filter": list(settings.tasks), "is_eval": True, "auto_reset": False,
        "ignore_terminations": False, "use_fixed_reset_state_ids": True,
        "use_ordered_reset_state_ids": True, "specific_reset_id": None, "group_size": 1,
        "settle_steps": settings.settle_steps,
    })
    return cfg
