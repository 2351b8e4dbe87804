"""The settings of a composed config as typed, frozen dataclasses, read once after compose.

Each leaf field carries its schema entry in ``metadata`` (type text, meaning, range, choices,
warning), so :data:`dexrl.config.schema.SCHEMA` is generated from these classes and every key is
written once. Reading is lenient: a key that is absent, an interpolation that does not resolve, or
a value of the wrong type reads as None (the schema check reports bad values from the raw config).
Ranges and choices come from what RLinf 0.3.0 parses or asserts (file named beside a choice list)
and from dexrl's adapters; ``tests/config/test_schema.py`` holds them against RLinf's registries.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from dexrl.catalog import LIBERO_SUITES
from dexrl.models.choices import ATTENTION, COMPILE_MODES, NOISE_METHODS, NORM_MODES
from dexrl.reach.rules import PALETTE

# rlinf/config.py torch_dtype_from_precision: everything it maps to a dtype (null keeps the
# checkpoint's dtype).
PRECISIONS: tuple[Any, ...] = ("bf16", "bf16-mixed", "fp16", "16", "16-mixed", 16,
                               "fp32", "32", "32-true", 32)
# rlinf.algorithms.registry: names registered by rlinf/algorithms/advantages.py and losses.py.
ADV_TYPES = ("gae", "grpo", "grpo_dynamic", "reinpp", "raw")
LOSS_TYPES = ("actor", "actor_critic", "decoupled_actor_critic")
LOGGERS = ("tensorboard", "wandb", "swanlab")  # rlinf/utils/metric_logger.py
POS = "[1, inf)"  # a positive count
NONNEG = "[0, inf)"
UNIT = "[0, 1]"
_SAVE_OFF = ("(-inf, 0]", "disables checkpoints: RLinf saves none, not even the last step, so "
             "`dexrl resume` will have nothing to continue from",
             "set runner.save_interval to a positive number of steps, e.g. 50")
# torch's AdamW refuses lr < 0; 0 is legal (a control run that cannot learn) but surprising.
_LR_ZERO = ("[0, 0]", "freezes these weights: no update changes them (a control run)",
            "set a positive learning rate to train, e.g. the shipped 5e-6 for the policy")

T = TypeVar("T")


def setting(type_: str, meaning: str, *, range: str | None = None,  # noqa: A002
            choices: tuple[Any, ...] | None = None, warn: tuple[str, str, str] | None = None,
            each: bool = False, absent: Any = None) -> Any:
    """A leaf setting (None until read) and its schema entry.

    Args:
        type_: ``int``, ``float`` (ints accepted), ``bool``, ``str``, ``list[str]``,
            ``list[float]``, ``list``, joined with ``|``; ``null`` allows null.
        meaning: What RLinf (or dexrl) does with it.
        range: Allowed numbers as an interval (``[1, inf)``).
        choices: Allowed values (for a list, allowed items).
        warn: ``(interval, message, hint)``: a legal value there gets a warning.
        each: The setting is a mapping whose every value is described (key pattern ``name.*``).
        absent: What the setting reads as when the key is not in the config at all (a null or
            a wrong value still reads as None).
    """
    return field(default=None, metadata={"type": type_, "meaning": meaning, "range": range,
                                         "choices": choices, "warn": warn, "each": each,
                                         "absent": absent})


def unlisted(type_: str) -> Any:
    """A setting the code reads that the schema does not describe (read as :func:`setting`)."""
    return field(default=None, metadata={"type": type_, "each": False, "listed": False})


def section(cls: type, *, each: bool = False) -> Any:
    """A nested group of settings; ``each``: one of several groups of one schema (``env.*``)."""
    return field(default_factory=cls, metadata={"section": cls, "each": each})


def is_type(type_: str, value: Any) -> bool:
    """Whether ``value`` is of the schema type ``type_`` (one alternative, e.g. ``int``)."""
    if type_ == "null":
        return value is None
    if type_ == "bool":
        return isinstance(value, bool)
    if type_ == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if type_ == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if type_ == "str":
        return isinstance(value, str)
    if type_ == "list":
        return isinstance(value, list)
    if type_ == "list[str]":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if type_ == "list[float]":
        return isinstance(value, list) and all(is_type("float", v) for v in value)
    raise ValueError(f"unknown schema type {type_!r}")


def positive_or(value: int | None, default: int = 1) -> int:
    """An integer setting if it is positive, else ``default``."""
    return value if value is not None and value > 0 else default


def given(value: T | None, default: T) -> T:
    """A setting, or ``default`` when it reads as None."""
    return default if value is None else value


def schema_entries(cls: type, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(key pattern, metadata) of every leaf setting under ``cls``, in field order; the groups of
    one ``each`` section (``env.train``, ``env.eval``) are described once, as ``*``."""
    out: list[tuple[str, dict[str, Any]]] = []
    starred: set[type] = set()
    for f in fields(cls):
        meta = f.metadata
        if "section" in meta:
            if meta["each"]:
                if meta["section"] in starred:
                    continue
                starred.add(meta["section"])
            name = "*" if meta["each"] else f.name
            out += schema_entries(meta["section"], f"{prefix}{name}.")
        elif meta.get("listed", True):
            out.append((f"{prefix}{f.name}" + (".*" if meta["each"] else ""), dict(meta)))
    return out


def read_section(cls: type[T], node: Any) -> T:
    """Settings of class ``cls`` from a config node (a DictConfig, a dict or None), leniently."""
    values: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        raw = _child(node, f.name)
        if "section" in f.metadata:
            values[f.name] = read_section(f.metadata["section"], raw)
        else:
            values[f.name] = _leaf(raw, f.metadata)
    return cls(**values)


_UNREADABLE = object()
_ABSENT = object()


def _child(node: Any, name: str) -> Any:
    if isinstance(node, (DictConfig, dict)) and name not in node:
        return _ABSENT
    if isinstance(node, DictConfig):
        try:
            return OmegaConf.select(node, name, default=None, throw_on_resolution_failure=False)
        except OmegaConfBaseException:
            return _UNREADABLE
    return node.get(name) if isinstance(node, dict) else None


def _leaf(raw: Any, meta: Any) -> Any:
    if isinstance(raw, (DictConfig, ListConfig)) and not meta["each"]:
        try:
            raw = OmegaConf.to_container(raw, resolve=True)
        except OmegaConfBaseException:
            return None
    if raw is _ABSENT:
        return meta.get("absent")
    if raw is _UNREADABLE:
        return None
    if meta["each"]:  # a mapping; an entry that does not resolve reads as None
        return {k: _leaf(_child(raw, str(k)), {**meta, "each": False, "type": "str|int|null"})
                for k in raw} if isinstance(raw, DictConfig) else None
    return raw if any(is_type(t, raw) for t in meta["type"].split("|")) else None



@dataclass(frozen=True)
class Video:
    """``env.*.video_cfg``."""

    save_video: bool | None = setting(
        "bool", "Record episode videos.")
    info_on_video: bool | None = setting(
        "bool", "Draw step info onto the videos.")
    video_base_dir: str | None = setting(
        "str", "Folder for the videos.")


@dataclass(frozen=True)
class InitParams:
    """``env.*.init_params``."""

    camera_heights: int | None = setting(
        "int", "Camera image height in pixels.", range=POS)
    camera_widths: int | None = setting(
        "int", "Camera image width in pixels.", range=POS)


@dataclass(frozen=True)
class Reach:
    """``env.*.reach``."""

    target: list[float] | None = setting(
        "list[float]", "Reach: the target point (x, y, z) in the unit cube.")
    start_low: list[float] | None = setting(
        "list[float]", "Reach: low corner of the box episodes start in.")
    start_high: list[float] | None = setting(
        "list[float]", "Reach: high corner of the box episodes start in.")
    step_size: float | None = setting(
        "float", "Reach: position change per env step at |action| = 1.", range="(0, inf)")
    success_radius: float | None = setting(
        "float", "Reach: success once the point is this close to the target.", range="(0, inf)")
    success_bonus: float | None = setting(
        "float", "Reach: reward added on reaching the target.", range=NONNEG)


@dataclass(frozen=True)
class ReachCued:
    """``env.*.reach_cued``."""

    targets: list | None = setting(
        "list",
        "Cued reach: the target points [[x, y, z], ...]; each episode names one (at least 2, "
        "success balls disjoint).")
    colors: list[str] | None = setting(
        "list[str]",
        "Cued reach: the colour of each target, named by the instruction and drawn in the main "
        "image.",
        choices=tuple(PALETTE))
    instruction: str | None = setting(
        "str", "Cued reach: the instruction template ({color} becomes the named target's colour).")
    fixed_instruction: str | None = setting(
        "str|null",
        "Cued reach ablation: one instruction for every episode (null: name the target).")
    show_cue: bool | None = setting(
        "bool", "Cued reach: draw the named target in the main image (false: an ablation).")
    start_low: list[float] | None = setting(
        "list[float]", "Cued reach: low corner of the box episodes start in.")
    start_high: list[float] | None = setting(
        "list[float]", "Cued reach: high corner of the box episodes start in.")
    step_size: float | None = setting(
        "float", "Cued reach: position change per env step at |action| = 1.", range="(0, inf)")
    success_radius: float | None = setting(
        "float",
        "Cued reach: success once the point is this close to the target.",
        range="(0, inf)")
    success_bonus: float | None = setting(
        "float", "Cued reach: reward added on reaching the target.", range=NONNEG)


@dataclass(frozen=True)
class Env:
    """``env.*``."""

    env_type: str | None = setting(
        "str",
        "Environment family; dexrl's adapters and configs are LIBERO's.",
        choices=("libero",))
    task_suite_name: str | None = setting(
        "str", "LIBERO suite whose tasks the env samples.", choices=LIBERO_SUITES)
    total_num_envs: int | None = setting(
        "int",
        "Parallel envs over all env workers; must divide over the env world size, pipeline stages"
        " and group size.",
        range=POS)
    max_steps_per_rollout_epoch: int | None = setting(
        "int",
        "Env steps per rollout epoch; a multiple of actor.model.num_action_chunks (one policy "
        "call per chunk).",
        range=POS)
    max_episode_steps: int | None = setting(
        "int", "Episode horizon: an episode is truncated after this many env steps.", range=POS)
    rollout_epoch: int | None = setting(
        "int", "Rollout epochs collected per global step.", range=POS)
    group_size: int | None = setting(
        "int",
        "Envs that share one initial state (GRPO-style groups); envs per stage must be a multiple"
        " of it.",
        range=POS)
    seed: int | None = setting(
        "int", "Base seed of the env workers (numpy seeds must be ≥ 0).", range=NONNEG)
    auto_reset: bool | None = setting(
        "bool", "Reset an env as soon as its episode ends.")
    ignore_terminations: bool | None = setting(
        "bool", "Keep stepping after success (episodes end only at the horizon).")
    use_rel_reward: bool | None = setting(
        "bool", "Reward the change of the success signal, not its level.")
    use_step_penalty: bool | None = setting(
        "bool", "Subtract a small penalty per env step.")
    reward_coef: float | None = setting(
        "float",
        "Scale of the env reward.",
        warn=("(-inf, 0]", "zeroes or inverts the task reward", "use a positive scale"))
    reset_gripper_open: bool | None = setting(
        "bool", "Open the gripper on reset.")
    is_eval: bool | None = setting(
        "bool", "Evaluation env (fixed initial states, no training data).")
    use_fixed_reset_state_ids: bool | None = setting(
        "bool", "Draw initial states from LIBERO's fixed set.")
    use_ordered_reset_state_ids: bool | None = setting(
        "bool", "Walk the fixed initial states in order.")
    specific_reset_id: int | None = setting(
        "int|null", "Always reset to this initial-state id (null: draw).", range=NONNEG)
    video_cfg: Video = section(Video)
    init_params: InitParams = section(InitParams)
    dexrl_env: str | None = setting(
        "str",
        "A dexrl task that dexrl's env worker builds instead of RLinf's LiberoEnv (the learning "
        "runs on a CPU).",
        choices=("reach", "reach_cued"))
    reach: Reach = section(Reach)
    reach_cued: ReachCued = section(ReachCued)
    # RLinf 0.3.0's async env worker asserts on it (it reads no env.enable_offload there).
    enable_offload: bool | None = unlisted("bool")


@dataclass(frozen=True)
class Envs:
    """``env``."""

    train: Env = section(Env, each=True)
    eval: Env = section(Env, each=True)
    group_name: str | None = setting(
        "str", "Name of RLinf's env worker group.")
    enable_offload: bool | None = setting(
        "bool", "Offload env workers between rollouts.")


@dataclass(frozen=True)
class PrefixCache:
    """``actor.model.dexbotic.prefix_cache``."""

    device_gb: float | None = setting(
        "float",
        "GB per actor rank of training prefix caches kept on the GPU (train_expert_only: each "
        "sample's frozen prefix is computed once per global step).",
        range=NONNEG)
    host_gb: float | None = setting(
        "float",
        "GB per actor rank of further prefix caches in pinned host memory; beyond both budgets "
        "the prefix is recomputed.",
        range=NONNEG)


@dataclass(frozen=True)
class Dexbotic:
    """``actor.model.dexbotic``."""

    num_images_in_input: int | None = setting(
        "int", "Camera images per observation (main and wrist).", range="[1, 2]")
    noise_level: float | None = setting(
        "float",
        "Noise scale of the scored denoising steps (flow_cps: an angle fraction, ≤ 1).",
        range=NONNEG)
    noise_method: str | None = setting(
        "str",
        "How scored denoising steps are sampled (flow_noise: a learned noise head gives each "
        "step's std; docs/algorithms.md).",
        choices=NOISE_METHODS)
    noise_logvar_range: list[float] | None = setting(
        "list[float]",
        "flow_noise: [min_std, max_std] of the noise head's std (RLinf's name; read only with "
        "flow_noise).")
    action_chunk: int | None = setting(
        "int", "Copy of actor.model.num_action_chunks.", range=POS)
    num_steps: int | None = setting(
        "int", "Copy of actor.model.num_steps.", range=POS)
    action_env_dim: int | None = setting(
        "int", "Copy of actor.model.action_dim.", range=POS)
    train_expert_only: bool | None = setting(
        "bool", "Freeze vision tower, projector and LLM; train the action expert (and value head).")
    add_value_head: bool | None = setting(
        "bool", "Copy of actor.model.add_value_head.")
    detach_critic_input: bool | None = setting(
        "bool", "Stop value gradients at the critic's input.")
    norm_mode: str | None = setting(
        "str",
        "State/action normalization of the checkpoint (LIBERO checkpoints: mean_std).",
        choices=NORM_MODES)
    model_max_length: int | None = setting(
        "int|null",
        "Prompt length in tokens (DM0 trains with 200; null: the checkpoint's).",
        range=POS)
    attention: str | None = setting(
        "str",
        "The MoT's shared attention: eager (reference) or sdpa (torch's fused attention; a GPU "
        "lever, not yet measured on a GPU).",
        choices=ATTENTION)
    prefix_cache: PrefixCache = section(PrefixCache)


@dataclass(frozen=True)
class Model:
    """``actor.model``."""

    model_type: str | None = setting(
        "str",
        "Model RLinf builds; dexrl registers dexbotic_pi0, dexbotic_dm0 and plugin policies.")
    model_path: str | None = setting(
        "str", "Dexbotic checkpoint folder the actor loads (the rollout follows it).")
    precision: str | int | None = setting(
        "str|int|null",
        "Weight dtype of the actor, parsed by RLinf's torch_dtype_from_precision (null: the "
        "checkpoint's).",
        choices=PRECISIONS, absent="bf16")  # the dry-run's memory estimate assumes bf16 then
    num_action_chunks: int | None = setting(
        "int", "Actions executed per policy call (and scored by PPO).", range=POS)
    action_dim: int | None = setting(
        "int", "Action dimensions the env takes (LIBERO: 7).", range=POS)
    num_steps: int | None = setting(
        "int", "Flow-matching denoising steps per action chunk.", range=POS)
    add_value_head: bool | None = setting(
        "bool", "Give the policy a critic head (needed by algorithm.loss_type actor_critic).")
    is_lora: bool | None = setting(
        "bool", "Train LoRA adapters instead of full weights.")
    lora_rank: int | None = setting(
        "int", "LoRA rank (read with is_lora).", range=POS)
    use_proprio: bool | None = setting(
        "bool", "Feed the robot state to the policy.")
    safe_get_logprob: bool | None = setting(
        "bool",
        "RLinf's squared-error surrogate log-prob; dexrl's adapters compute true log-probs and "
        "refuse it.",
        choices=(False,))
    dexbotic: Dexbotic = section(Dexbotic)
    joint_logprob: bool | None = setting(
        "bool",
        "Score every stochastic denoising step and the initial noise (the chain's joint log-prob)"
        " instead of one random step.")
    ignore_last: bool | None = setting(
        "bool", "Never make the last denoising step stochastic.")


@dataclass(frozen=True)
class Optim:
    """``actor.optim``."""

    lr: float | None = setting(
        "float", "AdamW learning rate of the policy.", range=NONNEG, warn=_LR_ZERO)
    value_lr: float | None = setting(
        "float", "AdamW learning rate of the value head.", range=NONNEG, warn=_LR_ZERO)
    adam_beta1: float | None = setting(
        "float", "AdamW β1 (torch requires [0, 1)).", range="[0, 1)")
    adam_beta2: float | None = setting(
        "float", "AdamW β2 (torch requires [0, 1)).", range="[0, 1)")
    adam_eps: float | None = setting(
        "float", "AdamW ε.", range="(0, inf)")
    weight_decay: float | None = setting(
        "float", "AdamW decoupled weight decay.", range=NONNEG)
    clip_grad: float | None = setting(
        "float", "Gradient-norm clip.", range="(0, inf)")
    critic_warmup_steps: int | None = setting(
        "int", "Optimizer steps that train only the critic.", range=NONNEG)


@dataclass(frozen=True)
class MixedPrecision:
    """``actor.fsdp_config.mixed_precision``."""

    param_dtype: str | int | None = setting(
        "str|int|null", "FSDP compute dtype of parameters.", choices=PRECISIONS)
    reduce_dtype: str | int | None = setting(
        "str|int|null", "FSDP gradient reduction dtype.", choices=PRECISIONS)
    buffer_dtype: str | int | None = setting(
        "str|int|null", "FSDP buffer dtype.", choices=PRECISIONS)


@dataclass(frozen=True)
class AmpAutocast:
    """``actor.fsdp_config.amp_autocast``."""

    enabled: bool | None = setting(
        "bool", "Run the forward under torch autocast.")
    precision: str | None = setting(
        "str", "Autocast dtype (rlinf/config.py asserts it).", choices=("fp16", "bf16", "fp32"))


@dataclass(frozen=True)
class GradScaler:
    """``actor.fsdp_config.grad_scaler``."""

    enabled: bool | None = setting(
        "bool", "Scale the loss for fp16 training.")


@dataclass(frozen=True)
class Fsdp:
    """``actor.fsdp_config``."""

    strategy: str | None = setting(
        "str",
        "FSDP version (rlinf/hybrid_engines/fsdp/strategy/base.py).",
        choices=("fsdp", "fsdp2"))
    sharding_strategy: str | None = setting(
        "str",
        "FSDP sharding (rlinf/hybrid_engines/fsdp/utils.py).",
        choices=("full_shard", "shard_grad_op", "hybrid_shard", "no_shard"))
    backward_prefetch: str | None = setting(
        "str|null", "FSDP backward prefetch.", choices=("pre", "post"))
    mixed_precision: MixedPrecision = section(MixedPrecision)
    amp_autocast: AmpAutocast = section(AmpAutocast)
    grad_scaler: GradScaler = section(GradScaler)
    gradient_checkpointing: bool | None = setting(
        "bool", "Recompute activations in backward.")
    cpu_offload: bool | None = setting(
        "bool", "Keep FSDP parameters on the CPU.")
    offload_pin_memory: bool | None = setting(
        "bool", "Pin offloaded memory.")
    reshard_after_forward: bool | None = setting(
        "bool", "Free gathered weights after forward.")
    enable_gradient_accumulation: bool | None = setting(
        "bool", "Accumulate gradients over micro-batches.")
    forward_prefetch: bool | None = setting(
        "bool", "FSDP forward prefetch.")
    limit_all_gathers: bool | None = setting(
        "bool", "Rate-limit FSDP all-gathers.")
    use_orig_params: bool | None = setting(
        "bool", "FSDP1 use_orig_params.")
    use_liger_kernel: bool | None = setting(
        "bool", "Liger kernels (LLM models only).")


@dataclass(frozen=True)
class Actor:
    """``actor``."""

    model: Model = section(Model)
    group_name: str | None = setting(
        "str", "Name of RLinf's actor worker group.")
    training_backend: str | None = setting(
        "str",
        "RLinf's actor backend; its embodied actor is the FSDP one "
        "(rlinf/workers/actor/__init__.py).",
        choices=("fsdp",))
    micro_batch_size: int | None = setting(
        "int", "Samples per forward/backward pass on one actor rank.", range=POS)
    global_batch_size: int | None = setting(
        "int",
        "Samples per optimizer step over all actor ranks; a multiple of micro_batch_size × actor "
        "world size.",
        range=POS)
    seed: int | None = setting(
        "int", "Seed of the actor workers.", range=NONNEG)
    enable_offload: bool | None = setting(
        "bool", "Offload actor weights and optimizer between phases.")
    optim: Optim = section(Optim)
    fsdp_config: Fsdp = section(Fsdp)


@dataclass(frozen=True)
class InitSync:
    """``weight_syncer.patch.init_sync``."""

    enabled: bool | None = setting(
        "bool", "Send full weights once at start.")
    prefixes: list[str] | None = setting(
        "list[str]|null", "Parameter prefixes of the first sync (null: all).")
    bucket_size: int | None = setting(
        "int", "Bytes per bucket of the first sync.", range=POS)


@dataclass(frozen=True)
class PatchSync:
    """``weight_syncer.patch``."""

    snapshot_device: str | None = setting(
        "str", "Where the patch syncer keeps its weight snapshot.", choices=("cpu", "cuda"))
    delta_encoding: bool | None = setting(
        "bool", "Send weight deltas instead of values.")
    compression: str | None = setting(
        "str",
        "Patch compression (rlinf/hybrid_engines/weight_syncer/compressor.py).",
        choices=("none", "nvcomp_lz4"))
    init_sync: InitSync = section(InitSync)


@dataclass(frozen=True)
class BucketSync:
    """``weight_syncer.bucket``."""

    bucket_size: int | None = setting(
        "int", "Bytes per weight bucket.", range=POS)
    bucket_dtype: str | int | None = setting(
        "str|int|null", "Dtype weights travel in (null: their own).", choices=PRECISIONS)
    is_agent: bool | None = setting(
        "bool", "Agent-mode bucket sync (LLM agents only).")
    load_instant: bool | None = setting(
        "bool", "Load each bucket as it arrives.")


@dataclass(frozen=True)
class WeightSyncer:
    """``weight_syncer``."""

    type: str | None = setting(
        "str",
        "How actor weights reach the rollout (rlinf/hybrid_engines/weight_syncer/base.py).",
        choices=("patch", "bucket"))
    patch: PatchSync = section(PatchSync)
    bucket: BucketSync = section(BucketSync)


@dataclass(frozen=True)
class Cluster:
    """``cluster``."""

    num_nodes: int | None = setting(
        "int", "Nodes RLinf waits for and places components on.", range=POS)
    component_placement: dict[str, str | int] | None = setting(
        "str|int",
        "GPU ids of the named components: 'all' or ids and ranges like '0-3,6'.",
        each=True)


@dataclass(frozen=True)
class Divergence:
    """``runner.divergence``."""

    action: str | None = setting(
        "str",
        "dexrl: what a step that cannot be trusted does (NaN returns, every update skipped, "
        "skipped_steps unclean steps in a row): stop the run, or warn only. An unclean step's "
        "checkpoint is never marked complete.",
        choices=("stop", "warn"))
    skipped_steps: int | None = setting(
        "int",
        "dexrl: unclean steps in a row (non-finite loss or gradient norm, skipped optimizer "
        "updates) that stop the run.",
        range=POS)


@dataclass(frozen=True)
class Logger:
    """``runner.logger``."""

    log_path: str | None = setting(
        "str", "Folder of RLinf's logs (dexrl points it into the run folder).")
    project_name: str | None = setting(
        "str", "Project name for the loggers.")
    experiment_name: str | None = setting(
        "str", "Experiment name for the loggers.")
    logger_backends: list[str] | None = setting(
        "list[str]", "Metric loggers RLinf starts.", choices=LOGGERS)


@dataclass(frozen=True)
class Runner:
    """``runner``."""

    task_type: str | None = setting(
        "str", "RLinf runner family; dexrl launches the embodied runner.", choices=("embodied",))
    max_epochs: int | None = setting(
        "int", "Upper bound on epochs; max_steps usually binds first.", range=POS)
    max_steps: int | None = setting(
        "int",
        "Global (PPO) steps of the run; negative: max_epochs decides "
        "(rlinf/runners/embodied_runner.py).",
        warn=("[0, 0]", "trains nothing", "set runner.max_steps to a positive number of steps"))
    save_interval: int | None = setting(
        "int",
        "Checkpoint every this many global steps (and at the end); ≤ 0 saves none.",
        warn=_SAVE_OFF)
    val_check_interval: int | None = setting(
        "int", "Validate on env.eval every this many steps; ≤ 0 disables validation.")
    only_eval: bool | None = setting(
        "bool", "Only evaluate, never train.")
    divergence: Divergence = section(Divergence)
    mode: str | None = setting(
        "str",
        "dexrl: which RLinf runner trains: sync (EmbodiedRunner: roll out, then train), async "
        "(AsyncPPOEmbodiedRunner: rollouts go on while the actor trains) or pipeline "
        "(EmbodiedRunner with runner.use_training_pipeline: training starts on each micro-batch "
        "as the envs finish it). `--mode M` applies conf/mode/M.yaml. Absent: sync.",
        choices=("sync", "async", "pipeline"))
    use_training_pipeline: bool | None = setting(
        "bool",
        "RLinf's training pipeline (GAE only); dexrl's `--mode pipeline` sets it with "
        "runner.mode: pipeline.")
    overlap_env_bootstrap: bool | None = setting(
        "bool",
        "RLinf: reset the envs for the next global step's first rollout epoch while the actor "
        "trains (sync and pipeline runners; ignored with env offload). Absent: false; "
        "conf/fast_paths/gpu.yaml sets it.")
    memory_plan: str | None = setting(
        "str",
        "dexrl: the memory plan the run was composed with (`dexrl train --memory-plan`, "
        "docs/performance.md#memory-plans); a record, set by dexrl. Absent: none.",
        choices=("80gb", "48gb", "24gb"))
    resume_dir: str | None = setting(
        "str|null", "Checkpoint RLinf resumes from (dexrl resume sets it).")
    ckpt_path: str | None = setting(
        "str|null", "Weights RLinf loads into the actor at start.")
    eval_policy_path: str | None = setting(
        "str|null", "Weights RLinf evaluates with runner.only_eval.")
    logger: Logger = section(Logger)


@dataclass(frozen=True)
class Algorithm:
    """``algorithm``."""

    adv_type: str | None = setting(
        "str", "Advantage estimator (rlinf.algorithms.registry).", choices=ADV_TYPES)
    loss_type: str | None = setting(
        "str",
        "Policy loss (rlinf.algorithms.registry); actor_critic needs a value head.",
        choices=LOSS_TYPES)
    loss_agg_func: str | None = setting(
        "str",
        "How the loss is averaged (rlinf/utils/utils.py get_loss_agg_func).",
        choices=("token-mean", "seq-mean-token-sum",
                                       "seq-mean-token-mean"))
    reward_type: str | None = setting(
        "str", "Reward per action chunk or per action.", choices=("chunk_level", "action_level"))
    logprob_type: str | None = setting(
        "str",
        "Log-prob granularity of the PPO ratio (rlinf/algorithms/utils.py).",
        choices=("token_level", "action_level", "chunk_level"))
    entropy_type: str | None = setting(
        "str",
        "Entropy granularity (rlinf/utils/utils.py).",
        choices=("token_level", "action_level", "chunk_level"))
    kl_penalty: str | None = setting(
        "str",
        "KL estimator (rlinf/algorithms/utils.py).",
        choices=("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full"))
    kl_beta: float | None = setting(
        "float", "Weight of the KL term.", range=NONNEG)
    entropy_bonus: float | None = setting(
        "float", "Weight of the entropy bonus.", range=NONNEG)
    group_size: int | None = setting(
        "int", "Rollouts per initial state (GRPO-style groups).", range=POS)
    update_epoch: int | None = setting(
        "int", "PPO epochs over each rollout batch.", range=POS)
    normalize_advantages: bool | None = setting(
        "bool",
        "Normalize advantages. RLinf 0.3.0's embodied actor does not read it: GAE advantages are "
        "always normalized, over each actor rank's samples of the step.")
    reward_coef: float | None = setting(
        "float",
        "Scale of the reward in the advantage.",
        warn=("(-inf, 0]", "zeroes or inverts the reward", "use a positive scale"))
    clip_ratio_low: float | None = setting(
        "float", "PPO clip below 1 (ratio ≥ 1 - low).", range="(0, 1)")
    clip_ratio_high: float | None = setting(
        "float", "PPO clip above 1 (ratio ≤ 1 + high).", range="(0, 1)")
    clip_ratio_c: float | None = setting(
        "float", "Dual-clip constant (rlinf/algorithms/losses.py asserts > 1).", range="(1, inf)")
    value_clip: float | None = setting(
        "float", "Value-function clip range.", range="(0, inf)")
    huber_delta: float | None = setting(
        "float", "Huber loss δ of the value loss.", range="(0, inf)")
    gamma: float | None = setting(
        "float", "Discount factor.", range=UNIT)
    gae_lambda: float | None = setting(
        "float", "GAE λ.", range=UNIT)
    filter_rewards: bool | None = setting(
        "bool", "Drop groups whose success rate is outside the bounds.")
    rewards_lower_bound: float | None = setting(
        "float", "Lower success-rate bound of filter_rewards.", range=UNIT)
    rewards_upper_bound: float | None = setting(
        "float", "Upper success-rate bound of filter_rewards.", range=UNIT)
    staleness_threshold: int | None = setting(
        "int|null",
        "Async PPO: trajectories more than this many policy versions behind the actor are "
        "dropped.",
        range=NONNEG)
    rollout_store_size_per_rank: int | None = setting(
        "int",
        "Async PPO: trajectories each actor rank trains on per step (the newest ones).",
        range=POS)
    on_policy_min_ratio: float | None = setting(
        "float",
        "Async PPO: share of a step's samples that must come from the current policy before it "
        "trains (0: no wait).",
        range=UNIT)
    behave_weight_threshold: float | None = setting(
        "float|null",
        "Decoupled PPO: cap on the behaviour importance weight (null: none).",
        range="(0, inf)")


@dataclass(frozen=True)
class SamplingParams:
    """``rollout.sampling_params``."""

    do_sample: bool | None = setting(
        "bool", "Sample actions (false: deterministic).")
    temperature_train: float | None = setting(
        "float", "Sampling temperature in training rollouts.", range=NONNEG)
    temperature_eval: float | None = setting(
        "float", "Sampling temperature in evaluation.", range=NONNEG)
    top_k: int | None = setting(
        "int", "Top-k sampling (0: off).", range=NONNEG)
    top_p: float | None = setting(
        "float", "Nucleus sampling mass.", range="(0, 1]")


@dataclass(frozen=True)
class RolloutModel:
    """``rollout.model``."""

    model_path: str | None = setting(
        "str", "Checkpoint the rollout loads; equals actor.model.model_path.")
    precision: str | int | None = setting(
        "str|int|null", "Weight dtype of the rollout.", choices=PRECISIONS)
    # RLinf's copies of actor.model's (a set copy must equal the actor's value).
    num_action_chunks: int | None = unlisted("int")
    num_steps: int | None = unlisted("int")


@dataclass(frozen=True)
class Rollout:
    """``rollout``."""

    group_name: str | None = setting(
        "str", "Name of RLinf's rollout worker group.")
    generation_backend: str | None = setting(
        "str",
        "Rollout backend; embodied policies run in RLinf's huggingface worker.",
        choices=("huggingface",))
    recompute_logprobs: bool | None = setting(
        "bool", "Recompute log-probs in the actor before training.")
    unnorm_key: str | None = setting(
        "str", "Dataset key of the action statistics (the suite).")
    enable_offload: bool | None = setting(
        "bool", "Offload rollout weights between rollouts.")
    enable_torch_compile: bool | None = setting(
        "bool",
        "Run the rollout call's compute as compiled graphs (RLinf's enable_torch_compile hook; "
        "one compilation per batch size, about 1-2 minutes each at real size on an H100). Off by "
        "default.")
    torch_compile_mode: str | None = setting(
        "str",
        "torch.compile mode of rollout.enable_torch_compile (RLinf's default: "
        "max-autotune-no-cudagraphs).",
        choices=COMPILE_MODES)
    enable_cuda_graph: bool | None = setting(
        "bool",
        "Replay the rollout call as a CUDA graph per batch size (RLinf's capture_cuda_graph hook;"
        " GPU only; the graphs hold their activations' memory). Off by default.")
    pipeline_stage_num: int | None = setting(
        "int", "Pipeline stages envs are split into per env worker.", range=POS)
    sampling_params: SamplingParams = section(SamplingParams)
    model: RolloutModel = section(RolloutModel)


@dataclass(frozen=True)
class Reward:
    """``reward``."""

    use_reward_model: bool | None = setting(
        "bool", "Score rollouts with a reward model (LIBERO rewards come from the env).")


@dataclass(frozen=True)
class Critic:
    """``critic``."""

    use_critic_model: bool | None = setting(
        "bool", "A separate critic model (the value head is the policy's).")


@dataclass(frozen=True)
class Settings:
    """Every setting dexrl knows of a composed config (RLinf's and dexrl's), read once after
    compose with :meth:`read`."""

    env: Envs = section(Envs)
    actor: Actor = section(Actor)
    weight_syncer: WeightSyncer = section(WeightSyncer)
    cluster: Cluster = section(Cluster)
    runner: Runner = section(Runner)
    algorithm: Algorithm = section(Algorithm)
    rollout: Rollout = section(Rollout)
    reward: Reward = section(Reward)
    critic: Critic = section(Critic)

    @classmethod
    def read(cls, cfg: Any) -> Settings:
        """The settings of a composed config (a DictConfig or a plain dict), leniently."""
        return read_section(cls, cfg)


def settings_of(cfg: Any) -> Settings:
    """``cfg`` if it is already :class:`Settings`, else the settings read from the config."""
    return cfg if isinstance(cfg, Settings) else Settings.read(cfg)
