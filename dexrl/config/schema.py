"""The value schema: every key the shipped configs set, its type, range or choices, and its use.

One table (:data:`SCHEMA`), read by :func:`check_values` (``dexrl validate``/``train``/``doctor``/
``resume``) and by ``dexrl validate --explain KEY``. Ranges and choices come from what RLinf 0.3.0
parses or asserts (file named in the comment beside a choice list) and from dexrl's adapters;
``tests/checks/test_schema.py`` holds them against RLinf's registries and the shipped configs.
A key pattern's ``*`` stands for one level (``env.*`` is ``env.train`` and ``env.eval``).
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from typing import Any

from dexrl.catalog import LIBERO_SUITES
from dexrl.errors import Finding
from dexrl.reach.rules import PALETTE

# rlinf/config.py torch_dtype_from_precision: everything it maps to a dtype (null keeps the
# checkpoint's dtype).
PRECISIONS: tuple[Any, ...] = ("bf16", "bf16-mixed", "fp16", "16", "16-mixed", 16,
                               "fp32", "32", "32-true", 32)
# rlinf.algorithms.registry: names registered by rlinf/algorithms/advantages.py and losses.py.
ADV_TYPES = ("gae", "grpo", "grpo_dynamic", "reinpp", "raw")
LOSS_TYPES = ("actor", "actor_critic", "decoupled_actor_critic")
# dexrl.bridge.policies.chain.NOISE_METHODS and dexrl.models.transforms.NORM_MODES, repeated here
# because those modules import torch (a test keeps them equal).
NOISE_METHODS = ("flow_sde", "flow_cps", "flow_noise")
NORM_MODES = ("mean_std", "quantile")
ATTENTION = ("eager", "sdpa")  # dexrl.models.flow.mot.ATTENTION
# dexrl.bridge.policies.fast_rollout.COMPILE_MODES (torch.compile's modes; a test keeps them equal).
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
LOGGERS = ("tensorboard", "wandb", "swanlab")  # rlinf/utils/metric_logger.py


@dataclass(frozen=True)
class Interval:
    """A closed, open or half-open interval over the reals, written ``[1, inf)`` or ``(0, 1)``."""

    low: float
    high: float
    low_open: bool
    high_open: bool

    @classmethod
    def parse(cls, text: str) -> Interval:
        """Parse ``[a, b]`` / ``(a, b)`` / mixed; ``inf`` and ``-inf`` are allowed."""
        m = re.fullmatch(r"\s*([\[(])\s*(\S+)\s*,\s*(\S+)\s*([\])])\s*", text)
        if not m:
            raise ValueError(f"not an interval: {text!r}")
        return cls(float(m.group(2)), float(m.group(3)), m.group(1) == "(", m.group(4) == ")")

    def __contains__(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self) -> str:
        """``≥ 1``, ``> 0``, ``in (0, 1)``, ``≤ 0``."""
        def num(x: float) -> str:
            return str(int(x)) if float(x).is_integer() else repr(x)

        if self.low == self.high:
            return f"= {num(self.low)}"
        if math.isinf(self.high):
            return f"{'>' if self.low_open else '≥'} {num(self.low)}"
        if math.isinf(self.low):
            return f"{'<' if self.high_open else '≤'} {num(self.high)}"
        return (f"in {'(' if self.low_open else '['}{num(self.low)}, {num(self.high)}"
                f"{')' if self.high_open else ']'}")


@dataclass(frozen=True)
class Key:
    """One config key.

    Attributes:
        pattern: Dotted key; ``*`` matches one level.
        type: ``int``, ``float`` (ints accepted), ``bool``, ``str``, ``list[str]``,
            ``list[float]``, ``list``, joined with ``|``; ``null`` allows null.
        meaning: What RLinf (or dexrl) does with it.
        range: Allowed numbers as an interval (``[1, inf)``), or None.
        choices: Allowed values (for a list, allowed items), or None.
        warn: ``(interval, message, hint)``: a legal value in that interval gets a warning
            ("<value> <message>").
    """

    pattern: str
    type: str
    meaning: str
    range: str | None = None
    choices: tuple[Any, ...] | None = None
    warn: tuple[str, str, str] | None = None

    def expected(self) -> str:
        """What a valid value looks like, in words."""
        if self.choices is not None:
            words = "one of " + ", ".join(_show(c) for c in self.choices)
            words = f"a list of items, each {words}" if self.type.startswith("list") else words
        else:
            words = " or ".join(_TYPE_WORDS[t] for t in self.type.split("|") if t != "null")
            if self.range:
                words += f" {Interval.parse(self.range).describe()}"
        return words + (" (or null)" if "null" in self.type.split("|") else "")


_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false",
               "str": "a string", "list[str]": "a list of strings",
               "list[float]": "a list of numbers", "list": "a list"}
POS = "[1, inf)"  # a positive count
NONNEG = "[0, inf)"
UNIT = "[0, 1]"
_SAVE_OFF = ("(-inf, 0]", "disables checkpoints: RLinf saves none, not even the last step, so "
             "`dexrl resume` will have nothing to continue from",
             "set runner.save_interval to a positive number of steps, e.g. 50")
_LR_ZERO = ("[0, 0]", "freezes these weights: no update changes them (a control run)",
            "set a positive learning rate to train, e.g. the shipped 5e-6 for the policy")
_BOOL = "bool"


def _k(pattern: str, type_: str, meaning: str, range_: str | None = None,
       choices: tuple[Any, ...] | None = None, warn: tuple[str, str, str] | None = None) -> Key:
    return Key(pattern, type_, meaning, range_, choices, warn)


SCHEMA: tuple[Key, ...] = (
    # --- env (RLinf's LIBERO env worker; env.train for rollouts, env.eval for validation) ---
    _k("env.*.env_type", "str", "Environment family; dexrl's adapters and configs are LIBERO's.",
       choices=("libero",)),
    _k("env.*.task_suite_name", "str", "LIBERO suite whose tasks the env samples.",
       choices=LIBERO_SUITES),
    _k("env.*.total_num_envs", "int", "Parallel envs over all env workers; must divide over the "
       "env world size, pipeline stages and group size.", POS),
    _k("env.*.max_steps_per_rollout_epoch", "int", "Env steps per rollout epoch; a multiple of "
       "actor.model.num_action_chunks (one policy call per chunk).", POS),
    _k("env.*.max_episode_steps", "int", "Episode horizon: an episode is truncated after this "
       "many env steps.", POS),
    _k("env.*.rollout_epoch", "int", "Rollout epochs collected per global step.", POS),
    _k("env.*.group_size", "int", "Envs that share one initial state (GRPO-style groups); "
       "envs per stage must be a multiple of it.", POS),
    _k("env.*.seed", "int", "Base seed of the env workers (numpy seeds must be ≥ 0).", NONNEG),
    _k("env.*.auto_reset", _BOOL, "Reset an env as soon as its episode ends."),
    _k("env.*.ignore_terminations", _BOOL, "Keep stepping after success (episodes end only at "
       "the horizon)."),
    _k("env.*.use_rel_reward", _BOOL, "Reward the change of the success signal, not its level."),
    _k("env.*.use_step_penalty", _BOOL, "Subtract a small penalty per env step."),
    _k("env.*.reward_coef", "float", "Scale of the env reward.",
       warn=("(-inf, 0]", "zeroes or inverts the task reward", "use a positive scale")),
    _k("env.*.reset_gripper_open", _BOOL, "Open the gripper on reset."),
    _k("env.*.is_eval", _BOOL, "Evaluation env (fixed initial states, no training data)."),
    _k("env.*.use_fixed_reset_state_ids", _BOOL, "Draw initial states from LIBERO's fixed set."),
    _k("env.*.use_ordered_reset_state_ids", _BOOL, "Walk the fixed initial states in order."),
    _k("env.*.specific_reset_id", "int|null", "Always reset to this initial-state id (null: "
       "draw).", NONNEG),
    _k("env.*.video_cfg.save_video", _BOOL, "Record episode videos."),
    _k("env.*.video_cfg.info_on_video", _BOOL, "Draw step info onto the videos."),
    _k("env.*.video_cfg.video_base_dir", "str", "Folder for the videos."),
    _k("env.*.init_params.camera_heights", "int", "Camera image height in pixels.", POS),
    _k("env.*.init_params.camera_widths", "int", "Camera image width in pixels.", POS),
    # dexrl's built-in tasks (conf/env/reach*.yaml, dexrl.reach.env), not RLinf's.
    _k("env.*.dexrl_env", "str", "A dexrl task that dexrl's env worker builds instead of RLinf's "
       "LiberoEnv (the learning runs on a CPU).", choices=("reach", "reach_cued")),
    _k("env.*.reach.target", "list[float]", "Reach: the target point (x, y, z) in the unit cube."),
    _k("env.*.reach.start_low", "list[float]",
       "Reach: low corner of the box episodes start in."),
    _k("env.*.reach.start_high", "list[float]",
       "Reach: high corner of the box episodes start in."),
    _k("env.*.reach.step_size", "float",
       "Reach: position change per env step at |action| = 1.", "(0, inf)"),
    _k("env.*.reach.success_radius", "float",
       "Reach: success once the point is this close to the target.", "(0, inf)"),
    _k("env.*.reach.success_bonus", "float",
       "Reach: reward added on reaching the target.", NONNEG),
    _k("env.*.reach_cued.targets", "list", "Cued reach: the target points [[x, y, z], ...]; "
       "each episode names one (at least 2, success balls disjoint)."),
    _k("env.*.reach_cued.colors", "list[str]", "Cued reach: the colour of each target, named by "
       "the instruction and drawn in the main image.", choices=tuple(PALETTE)),
    _k("env.*.reach_cued.instruction", "str", "Cued reach: the instruction template ({color} "
       "becomes the named target's colour)."),
    _k("env.*.reach_cued.fixed_instruction", "str|null", "Cued reach ablation: one instruction "
       "for every episode (null: name the target)."),
    _k("env.*.reach_cued.show_cue", _BOOL, "Cued reach: draw the named target in the main image "
       "(false: an ablation)."),
    _k("env.*.reach_cued.start_low", "list[float]",
       "Cued reach: low corner of the box episodes start in."),
    _k("env.*.reach_cued.start_high", "list[float]",
       "Cued reach: high corner of the box episodes start in."),
    _k("env.*.reach_cued.step_size", "float",
       "Cued reach: position change per env step at |action| = 1.", "(0, inf)"),
    _k("env.*.reach_cued.success_radius", "float",
       "Cued reach: success once the point is this close to the target.", "(0, inf)"),
    _k("env.*.reach_cued.success_bonus", "float",
       "Cued reach: reward added on reaching the target.", NONNEG),
    _k("env.group_name", "str", "Name of RLinf's env worker group."),
    _k("env.enable_offload", _BOOL, "Offload env workers between rollouts."),
    # --- actor.model (RLinf's get_model, then dexrl's Dexbotic adapters) ---
    _k("actor.model.model_type", "str", "Model RLinf builds; dexrl registers dexbotic_pi0, "
       "dexbotic_dm0 and plugin policies."),
    _k("actor.model.model_path", "str", "Dexbotic checkpoint folder the actor loads (the rollout "
       "follows it)."),
    _k("actor.model.precision", "str|int|null", "Weight dtype of the actor, parsed by RLinf's "
       "torch_dtype_from_precision (null: the checkpoint's).", choices=PRECISIONS),
    _k("actor.model.num_action_chunks", "int", "Actions executed per policy call (and scored "
       "by PPO).", POS),
    _k("actor.model.action_dim", "int", "Action dimensions the env takes (LIBERO: 7).", POS),
    _k("actor.model.num_steps", "int", "Flow-matching denoising steps per action chunk.", POS),
    _k("actor.model.add_value_head", _BOOL, "Give the policy a critic head (needed by "
       "algorithm.loss_type actor_critic)."),
    _k("actor.model.is_lora", _BOOL, "Train LoRA adapters instead of full weights."),
    _k("actor.model.lora_rank", "int", "LoRA rank (read with is_lora).", POS),
    _k("actor.model.use_proprio", _BOOL, "Feed the robot state to the policy."),
    _k("actor.model.safe_get_logprob", _BOOL, "RLinf's squared-error surrogate log-prob; dexrl's "
       "adapters compute true log-probs and refuse it.", choices=(False,)),
    _k("actor.model.dexbotic.num_images_in_input", "int", "Camera images per observation (main "
       "and wrist).", "[1, 2]"),
    _k("actor.model.dexbotic.noise_level", "float", "Noise scale of the scored denoising steps "
       "(flow_cps: an angle fraction, ≤ 1).", NONNEG),
    _k("actor.model.dexbotic.noise_method", "str", "How scored denoising steps are sampled "
       "(flow_noise: a learned noise head gives each step's std; docs/algorithms.md).",
       choices=NOISE_METHODS),
    _k("actor.model.dexbotic.noise_logvar_range", "list[float]", "flow_noise: [min_std, "
       "max_std] of the noise head's std (RLinf's name; read only with flow_noise)."),
    _k("actor.model.joint_logprob", _BOOL, "Score every stochastic denoising step and the "
       "initial noise (the chain's joint log-prob) instead of one random step."),
    _k("actor.model.ignore_last", _BOOL, "Never make the last denoising step stochastic."),
    _k("actor.model.dexbotic.action_chunk", "int", "Copy of actor.model.num_action_chunks.", POS),
    _k("actor.model.dexbotic.num_steps", "int", "Copy of actor.model.num_steps.", POS),
    _k("actor.model.dexbotic.action_env_dim", "int", "Copy of actor.model.action_dim.", POS),
    _k("actor.model.dexbotic.train_expert_only", _BOOL, "Freeze vision tower, projector and LLM; "
       "train the action expert (and value head)."),
    _k("actor.model.dexbotic.add_value_head", _BOOL, "Copy of actor.model.add_value_head."),
    _k("actor.model.dexbotic.detach_critic_input", _BOOL, "Stop value gradients at the critic's "
       "input."),
    _k("actor.model.dexbotic.norm_mode", "str", "State/action normalization of the checkpoint "
       "(LIBERO checkpoints: mean_std).", choices=NORM_MODES),
    _k("actor.model.dexbotic.model_max_length", "int|null", "Prompt length in tokens (DM0 "
       "trains with 200; null: the checkpoint's).", POS),
    _k("actor.model.dexbotic.attention", "str", "The MoT's shared attention: eager (reference) "
       "or sdpa (torch's fused attention; a GPU lever, not yet measured on a GPU).",
       choices=ATTENTION),
    _k("actor.model.dexbotic.prefix_cache.device_gb", "float", "GB per actor rank of training "
       "prefix caches kept on the GPU (train_expert_only: each sample's frozen prefix is "
       "computed once per global step).", NONNEG),
    _k("actor.model.dexbotic.prefix_cache.host_gb", "float", "GB per actor rank of further "
       "prefix caches in pinned host memory; beyond both budgets the prefix is recomputed.",
       NONNEG),
    # --- actor training (RLinf's FSDP actor worker) ---
    _k("actor.group_name", "str", "Name of RLinf's actor worker group."),
    _k("actor.training_backend", "str", "RLinf's actor backend; its embodied actor is the FSDP "
       "one (rlinf/workers/actor/__init__.py).", choices=("fsdp",)),
    _k("actor.micro_batch_size", "int", "Samples per forward/backward pass on one actor rank.",
       POS),
    _k("actor.global_batch_size", "int", "Samples per optimizer step over all actor ranks; a "
       "multiple of micro_batch_size × actor world size.", POS),
    _k("actor.seed", "int", "Seed of the actor workers.", NONNEG),
    _k("actor.enable_offload", _BOOL, "Offload actor weights and optimizer between phases."),
    # torch's AdamW refuses lr < 0; 0 is legal (a control run that cannot learn) but surprising.
    _k("actor.optim.lr", "float", "AdamW learning rate of the policy.", NONNEG, warn=_LR_ZERO),
    _k("actor.optim.value_lr", "float", "AdamW learning rate of the value head.", NONNEG,
       warn=_LR_ZERO),
    _k("actor.optim.adam_beta1", "float", "AdamW β1 (torch requires [0, 1)).", "[0, 1)"),
    _k("actor.optim.adam_beta2", "float", "AdamW β2 (torch requires [0, 1)).", "[0, 1)"),
    _k("actor.optim.adam_eps", "float", "AdamW ε.", "(0, inf)"),
    _k("actor.optim.weight_decay", "float", "AdamW decoupled weight decay.", NONNEG),
    _k("actor.optim.clip_grad", "float", "Gradient-norm clip.", "(0, inf)"),
    _k("actor.optim.critic_warmup_steps", "int", "Optimizer steps that train only the critic.",
       NONNEG),
    _k("actor.fsdp_config.strategy", "str", "FSDP version (rlinf/hybrid_engines/fsdp/strategy/"
       "base.py).", choices=("fsdp", "fsdp2")),
    _k("actor.fsdp_config.sharding_strategy", "str", "FSDP sharding (rlinf/hybrid_engines/fsdp/"
       "utils.py).", choices=("full_shard", "shard_grad_op", "hybrid_shard", "no_shard")),
    _k("actor.fsdp_config.backward_prefetch", "str|null", "FSDP backward prefetch.",
       choices=("pre", "post")),
    _k("actor.fsdp_config.mixed_precision.param_dtype", "str|int|null", "FSDP compute dtype of "
       "parameters.", choices=PRECISIONS),
    _k("actor.fsdp_config.mixed_precision.reduce_dtype", "str|int|null", "FSDP gradient "
       "reduction dtype.", choices=PRECISIONS),
    _k("actor.fsdp_config.mixed_precision.buffer_dtype", "str|int|null", "FSDP buffer dtype.",
       choices=PRECISIONS),
    _k("actor.fsdp_config.amp_autocast.enabled", _BOOL, "Run the forward under torch autocast."),
    _k("actor.fsdp_config.amp_autocast.precision", "str", "Autocast dtype (rlinf/config.py "
       "asserts it).", choices=("fp16", "bf16", "fp32")),
    _k("actor.fsdp_config.grad_scaler.enabled", _BOOL, "Scale the loss for fp16 training."),
    _k("actor.fsdp_config.gradient_checkpointing", _BOOL, "Recompute activations in backward."),
    _k("actor.fsdp_config.cpu_offload", _BOOL, "Keep FSDP parameters on the CPU."),
    _k("actor.fsdp_config.offload_pin_memory", _BOOL, "Pin offloaded memory."),
    _k("actor.fsdp_config.reshard_after_forward", _BOOL, "Free gathered weights after forward."),
    _k("actor.fsdp_config.enable_gradient_accumulation", _BOOL, "Accumulate gradients over "
       "micro-batches."),
    _k("actor.fsdp_config.forward_prefetch", _BOOL, "FSDP forward prefetch."),
    _k("actor.fsdp_config.limit_all_gathers", _BOOL, "Rate-limit FSDP all-gathers."),
    _k("actor.fsdp_config.use_orig_params", _BOOL, "FSDP1 use_orig_params."),
    _k("actor.fsdp_config.use_liger_kernel", _BOOL, "Liger kernels (LLM models only)."),
    # --- weight sync actor -> rollout ---
    _k("weight_syncer.type", "str", "How actor weights reach the rollout (rlinf/hybrid_engines/"
       "weight_syncer/base.py).", choices=("patch", "bucket")),
    _k("weight_syncer.patch.snapshot_device", "str", "Where the patch syncer keeps its weight "
       "snapshot.", choices=("cpu", "cuda")),
    _k("weight_syncer.patch.delta_encoding", _BOOL, "Send weight deltas instead of values."),
    _k("weight_syncer.patch.compression", "str", "Patch compression (rlinf/hybrid_engines/"
       "weight_syncer/compressor.py).", choices=("none", "nvcomp_lz4")),
    _k("weight_syncer.patch.init_sync.enabled", _BOOL, "Send full weights once at start."),
    _k("weight_syncer.patch.init_sync.prefixes", "list[str]|null", "Parameter prefixes of the "
       "first sync (null: all)."),
    _k("weight_syncer.patch.init_sync.bucket_size", "int", "Bytes per bucket of the first sync.",
       POS),
    _k("weight_syncer.bucket.bucket_size", "int", "Bytes per weight bucket.", POS),
    _k("weight_syncer.bucket.bucket_dtype", "str|int|null", "Dtype weights travel in (null: "
       "their own).", choices=PRECISIONS),
    _k("weight_syncer.bucket.is_agent", _BOOL, "Agent-mode bucket sync (LLM agents only)."),
    _k("weight_syncer.bucket.load_instant", _BOOL, "Load each bucket as it arrives."),
    # --- cluster ---
    _k("cluster.num_nodes", "int", "Nodes RLinf waits for and places components on.", POS),
    _k("cluster.component_placement.*", "str|int", "GPU ids of the named components: 'all' or "
       "ids and ranges like '0-3,6'."),
    # --- runner (RLinf's EmbodiedRunner) ---
    _k("runner.task_type", "str", "RLinf runner family; dexrl launches the embodied runner.",
       choices=("embodied",)),
    _k("runner.max_epochs", "int", "Upper bound on epochs; max_steps usually binds first.", POS),
    _k("runner.max_steps", "int", "Global (PPO) steps of the run; negative: max_epochs decides "
       "(rlinf/runners/embodied_runner.py).",
       warn=("[0, 0]", "trains nothing", "set runner.max_steps to a positive number of steps")),
    _k("runner.save_interval", "int", "Checkpoint every this many global steps (and at the "
       "end); ≤ 0 saves none.", warn=_SAVE_OFF),
    _k("runner.val_check_interval", "int", "Validate on env.eval every this many steps; ≤ 0 "
       "disables validation."),
    _k("runner.only_eval", _BOOL, "Only evaluate, never train."),
    _k("runner.divergence.action", "str", "dexrl: what a step that cannot be trusted does (NaN "
       "returns, every update skipped, skipped_steps unclean steps in a row): stop the run, or "
       "warn only. An unclean step's checkpoint is never marked complete.",
       choices=("stop", "warn")),
    _k("runner.divergence.skipped_steps", "int", "dexrl: unclean steps in a row (non-finite "
       "loss or gradient norm, skipped optimizer updates) that stop the run.", POS),
    _k("runner.mode", "str", "dexrl: which RLinf runner trains: sync (EmbodiedRunner: roll out, "
       "then train), async (AsyncPPOEmbodiedRunner: rollouts go on while the actor trains) or "
       "pipeline (EmbodiedRunner with runner.use_training_pipeline: training starts on each "
       "micro-batch as the envs finish it). `--mode M` applies conf/mode/M.yaml. Absent: sync.",
       choices=("sync", "async", "pipeline")),
    _k("runner.use_training_pipeline", _BOOL, "RLinf's training pipeline (GAE only); dexrl's "
       "`--mode pipeline` sets it with runner.mode: pipeline."),
    _k("runner.overlap_env_bootstrap", _BOOL, "RLinf: reset the envs for the next global "
       "step's first rollout epoch while the actor trains (sync and pipeline runners; ignored "
       "with env offload). Absent: false; conf/fast_paths/gpu.yaml sets it."),
    _k("runner.resume_dir", "str|null", "Checkpoint RLinf resumes from (dexrl resume sets it)."),
    _k("runner.ckpt_path", "str|null", "Weights RLinf loads into the actor at start."),
    _k("runner.eval_policy_path", "str|null", "Weights RLinf evaluates with runner.only_eval."),
    _k("runner.logger.log_path", "str", "Folder of RLinf's logs (dexrl points it into the run "
       "folder)."),
    _k("runner.logger.project_name", "str", "Project name for the loggers."),
    _k("runner.logger.experiment_name", "str", "Experiment name for the loggers."),
    _k("runner.logger.logger_backends", "list[str]", "Metric loggers RLinf starts.",
       choices=LOGGERS),
    # --- algorithm (RLinf's PPO) ---
    _k("algorithm.adv_type", "str", "Advantage estimator (rlinf.algorithms.registry).",
       choices=ADV_TYPES),
    _k("algorithm.loss_type", "str", "Policy loss (rlinf.algorithms.registry); actor_critic "
       "needs a value head.", choices=LOSS_TYPES),
    _k("algorithm.loss_agg_func", "str", "How the loss is averaged (rlinf/utils/utils.py "
       "get_loss_agg_func).", choices=("token-mean", "seq-mean-token-sum",
                                       "seq-mean-token-mean")),
    _k("algorithm.reward_type", "str", "Reward per action chunk or per action.",
       choices=("chunk_level", "action_level")),
    _k("algorithm.logprob_type", "str", "Log-prob granularity of the PPO ratio "
       "(rlinf/algorithms/utils.py).", choices=("token_level", "action_level", "chunk_level")),
    _k("algorithm.entropy_type", "str", "Entropy granularity (rlinf/utils/utils.py).",
       choices=("token_level", "action_level", "chunk_level")),
    _k("algorithm.kl_penalty", "str", "KL estimator (rlinf/algorithms/utils.py).",
       choices=("kl", "k1", "abs", "mse", "k2", "low_var_kl", "k3", "full")),
    _k("algorithm.kl_beta", "float", "Weight of the KL term.", NONNEG),
    _k("algorithm.entropy_bonus", "float", "Weight of the entropy bonus.", NONNEG),
    _k("algorithm.group_size", "int", "Rollouts per initial state (GRPO-style groups).", POS),
    _k("algorithm.update_epoch", "int", "PPO epochs over each rollout batch.", POS),
    _k("algorithm.normalize_advantages", _BOOL,
       "Normalize advantages. RLinf 0.3.0's embodied actor does not read it: GAE advantages are "
       "always normalized, over each actor rank's samples of the step."),
    _k("algorithm.reward_coef", "float", "Scale of the reward in the advantage.",
       warn=("(-inf, 0]", "zeroes or inverts the reward", "use a positive scale")),
    _k("algorithm.clip_ratio_low", "float", "PPO clip below 1 (ratio ≥ 1 - low).", "(0, 1)"),
    _k("algorithm.clip_ratio_high", "float", "PPO clip above 1 (ratio ≤ 1 + high).", "(0, 1)"),
    _k("algorithm.clip_ratio_c", "float", "Dual-clip constant (rlinf/algorithms/losses.py "
       "asserts > 1).", "(1, inf)"),
    _k("algorithm.value_clip", "float", "Value-function clip range.", "(0, inf)"),
    _k("algorithm.huber_delta", "float", "Huber loss δ of the value loss.", "(0, inf)"),
    _k("algorithm.gamma", "float", "Discount factor.", UNIT),
    _k("algorithm.gae_lambda", "float", "GAE λ.", UNIT),
    _k("algorithm.filter_rewards", _BOOL, "Drop groups whose success rate is outside the "
       "bounds."),
    _k("algorithm.rewards_lower_bound", "float", "Lower success-rate bound of filter_rewards.",
       UNIT),
    _k("algorithm.rewards_upper_bound", "float", "Upper success-rate bound of filter_rewards.",
       UNIT),
    _k("algorithm.staleness_threshold", "int|null", "Async PPO: trajectories more than this "
       "many policy versions behind the actor are dropped.", NONNEG),
    _k("algorithm.rollout_store_size_per_rank", "int", "Async PPO: trajectories each actor rank "
       "trains on per step (the newest ones).", POS),
    _k("algorithm.on_policy_min_ratio", "float", "Async PPO: share of a step's samples that "
       "must come from the current policy before it trains (0: no wait).", UNIT),
    _k("algorithm.behave_weight_threshold", "float|null", "Decoupled PPO: cap on the behaviour "
       "importance weight (null: none).", "(0, inf)"),
    # --- rollout (RLinf's embodied rollout worker) ---
    _k("rollout.group_name", "str", "Name of RLinf's rollout worker group."),
    _k("rollout.generation_backend", "str", "Rollout backend; embodied policies run in "
       "RLinf's huggingface worker.", choices=("huggingface",)),
    _k("rollout.recompute_logprobs", _BOOL, "Recompute log-probs in the actor before training."),
    _k("rollout.unnorm_key", "str", "Dataset key of the action statistics (the suite)."),
    _k("rollout.enable_offload", _BOOL, "Offload rollout weights between rollouts."),
    _k("rollout.enable_torch_compile", _BOOL, "Run the rollout call's compute as compiled "
       "graphs (RLinf's enable_torch_compile hook; one compilation per batch size, about 1-2 "
       "minutes each at real size on an H100). Off by default."),
    _k("rollout.torch_compile_mode", "str", "torch.compile mode of rollout.enable_torch_compile "
       "(RLinf's default: max-autotune-no-cudagraphs).", choices=COMPILE_MODES),
    _k("rollout.enable_cuda_graph", _BOOL, "Replay the rollout call as a CUDA graph per batch "
       "size (RLinf's capture_cuda_graph hook; GPU only; the graphs hold their activations' "
       "memory). Off by default."),
    _k("rollout.pipeline_stage_num", "int", "Pipeline stages envs are split into per env "
       "worker.", POS),
    _k("rollout.sampling_params.do_sample", _BOOL, "Sample actions (false: deterministic)."),
    _k("rollout.sampling_params.temperature_train", "float", "Sampling temperature in "
       "training rollouts.", NONNEG),
    _k("rollout.sampling_params.temperature_eval", "float", "Sampling temperature in "
       "evaluation.", NONNEG),
    _k("rollout.sampling_params.top_k", "int", "Top-k sampling (0: off).", NONNEG),
    _k("rollout.sampling_params.top_p", "float", "Nucleus sampling mass.", "(0, 1]"),
    _k("rollout.model.model_path", "str", "Checkpoint the rollout loads; equals "
       "actor.model.model_path."),
    _k("rollout.model.precision", "str|int|null", "Weight dtype of the rollout.",
       choices=PRECISIONS),
    # --- separate reward and critic models (not used by embodied PPO) ---
    _k("reward.use_reward_model", _BOOL, "Score rollouts with a reward model (LIBERO rewards "
       "come from the env)."),
    _k("critic.use_critic_model", _BOOL, "A separate critic model (the value head is the "
       "policy's)."),
)


def _show(value: Any) -> str:
    """A value as the user would write it in an override."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value) if isinstance(value, str) else str(value)


def _is(type_: str, value: Any) -> bool:
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
        return isinstance(value, list) and all(_is("float", v) for v in value)
    raise ValueError(f"unknown schema type {type_!r}")


def _matches(pattern: str, key: str) -> bool:
    parts, pat = key.split("."), pattern.split(".")
    return len(parts) == len(pat) and all(p in ("*", k) for p, k in zip(pat, parts, strict=True))


_EXACT = {k.pattern: k for k in SCHEMA if "*" not in k.pattern}
_WILD = [k for k in SCHEMA if "*" in k.pattern]


def spec_for(key: str) -> Key | None:
    """The schema entry that describes a concrete dotted key (or a pattern itself)."""
    return _EXACT.get(key) or next((k for k in _WILD if _matches(k.pattern, key)), None)


def _fix(spec: Key, key: str, value: Any) -> str:
    """The fix for a value of the wrong type or out of range."""
    types = spec.type.split("|")
    if isinstance(value, str) and "bool" in types and value.lower() in ("true", "false"):
        return f"write {key}={value.lower()} without quotes"
    if isinstance(value, str) and ("int" in types or "float" in types):
        try:
            if math.isfinite(float(value)):
                return f"write {key}={value} without quotes"
        except ValueError:
            pass
    if isinstance(value, float) and "int" in types and value.is_integer():
        return f"write {key}={int(value)} (a whole number, no decimal point)"
    if isinstance(value, list) and spec.type.startswith("list") and spec.choices:
        return f"write a list, e.g. {key}=[{spec.choices[0]}]"
    if isinstance(value, str) and spec.type.startswith("list"):
        return f"write a list: {key}=[{value}]"
    return f"set {key} to {spec.expected()}; `dexrl validate --explain {key}` says what it does"


def check_value(spec: Key, key: str, value: Any) -> Finding | None:
    """One key's value against its schema entry: an error, a warning, or None."""
    if not any(_is(t, value) for t in spec.type.split("|")):
        return Finding("error", key, f"got {_show(value)}, expected {spec.expected()}",
                       _fix(spec, key, value), code="config-value-wrong-type")
    if value is None:
        return None
    for item in (value if isinstance(value, list) else [value]) if spec.choices else []:
        if item not in spec.choices:
            close = difflib.get_close_matches(str(item), [str(c) for c in spec.choices], n=1,
                                              cutoff=0.5)
            listed = isinstance(value, list)
            got = f"the item {_show(item)}" if listed else _show(item)
            hint = f"`dexrl validate --explain {key}` says what each value does"
            if close:
                hint = f"did you mean {close[0] if listed else f'{key}={close[0]}'}?"
            return Finding("error", key, f"got {got}, expected {spec.expected()}", hint,
                           code="config-value-not-a-choice")
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    if spec.range and number is not None and number not in Interval.parse(spec.range):
        return Finding("error", key, f"got {_show(value)}, expected {spec.expected()}",
                       _fix(spec, key, value), code="config-value-out-of-range")
    if spec.warn and number is not None and number in Interval.parse(spec.warn[0]):
        return Finding("warning", key, f"{_show(value)} {spec.warn[1]}", spec.warn[2],
                       code="config-value-surprising")
    return None


def _interpolated(value: Any) -> bool:
    return isinstance(value, str) and "${" in value


def check_values(cfg: Any) -> list[Finding]:
    """Every key of the config that the schema describes, against its type, range or choices.

    A key whose value is an interpolation (``${actor.model.precision}``) is checked where the
    value is written, so one bad value is one error.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from dexrl.dotted import flatten

    findings = []
    try:
        OmegaConf.to_container(cfg, resolve=True)
        resolves = True
    except OmegaConfBaseException:
        resolves = False
    for key, value in flatten(OmegaConf.to_container(cfg, resolve=False)).items():
        if _interpolated(value):
            if resolves:
                continue
            try:
                OmegaConf.select(cfg, key)
            except OmegaConfBaseException as exc:
                findings.append(Finding("error", key, f"{value} does not resolve: "
                                        f"{str(exc).splitlines()[0]}",
                                        f"fix the interpolation, or set {key} to a value",
                                        code="config-does-not-resolve"))
            continue
        spec = spec_for(key)
        found = spec and check_value(spec, key, value)
        if found:
            findings.append(found)
    return findings


def explain(key: str, cfg: Any, config_name: str) -> list[str]:
    """Lines describing one key (or pattern): type, range or choices, value in ``cfg``, meaning.

    Raises:
        DexrlError: the schema does not describe the key; the hint names the closest keys.
    """
    from omegaconf import OmegaConf

    from dexrl.dotted import flatten
    from dexrl.errors import DexrlError

    spec = spec_for(key)
    present = flatten(OmegaConf.to_container(cfg, resolve=False))
    if spec is None:
        known = sorted({k for k in present if spec_for(k)} | {k.pattern for k in SCHEMA})
        close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
        where = "is in the config but not in dexrl's value schema" if key in present else \
            "is not a key dexrl knows"
        raise DexrlError(f"'{key}' {where}",
                         f"closest known keys: {', '.join(close)}" if close else
                         "`dexrl validate ... --print` shows every key of a config",
                         where="--explain", code="config-explain-unknown-key")
    lines = [spec.pattern if spec.pattern == key else f"{key} ({spec.pattern})",
             f"  type:     {spec.type}"]
    if spec.choices is not None:
        lines.append(f"  choices:  {', '.join(_show(c) for c in spec.choices)}")
    if spec.range:
        lines.append(f"  range:    {Interval.parse(spec.range).describe()}")
    if spec.warn:
        lines.append(f"  warning:  {Interval.parse(spec.warn[0]).describe()} {spec.warn[1]}")
    matches = [k for k in present if k == key or _matches(key, k)] or [key]
    for match in matches:
        value = OmegaConf.select(cfg, match, default="(not set)",
                                 throw_on_resolution_failure=False)
        stars = [m for p, m in zip(key.split("."), match.split("."), strict=True) if p == "*"]
        label = "default: " if len(matches) == 1 else f"{'.'.join(stars)}:"
        lines.append(f"  {label:<9} {_show(value)} (in {config_name})")
    lines.append(f"  meaning:  {spec.meaning}")
    return lines
