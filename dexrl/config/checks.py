"""Checks on a composed training config, mirroring what RLinf asserts at launch (and more).

Each key's own type, range and choices are the value schema's (:mod:`dexrl.config.schema`); the
checks here relate keys to each other and to the machine. Every function takes the config (and
facts it needs) and returns findings; none imports rlinf, Ray or torch, so ``dexrl validate``
stays fast and runs anywhere.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from dexrl.catalog import SUITES, load_reference, policies, policy_for
from dexrl.config.algorithm_checks import check_grpo, check_noise, check_reward_filter
from dexrl.config.algorithms import is_grouped
from dexrl.config.modes import run_mode, split_placement
from dexrl.config.schema import check_values
from dexrl.config.settings import Settings, given, positive_or
from dexrl.dotted import positive, setting
from dexrl.errors import Finding
from dexrl.hub.verify import check_checkpoint_dir
from dexrl.reach.rules import SECTION, check_env

# Actions DM0 executes per chunk according to RLinf's Dexbotic docs and its model/dexbotic_dm0.yaml
# (the model's trajectory length); RLinf's DM0 PPO configs, and dexrl's, set 5.
COMPONENTS = ("actor", "rollout", "env")
_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
# Actor settings that the rollout (and the Dexbotic section) read again under other keys: a set
# copy must equal the actor's value.


@dataclass(frozen=True)
class Facts:
    """What the checks need beyond the config."""

    suite: str | None = None
    gpus_per_node: int = 8
    cpu_only: bool = False  # the run has no GPU (``--smoke``)


def parse_placement(spec: Any, num_devices: int) -> list[int]:
    """Expand ``"all"`` / ``"a,b,c-d"`` / an int into device ids.

    Raises:
        ValueError: on bad grammar, with the reason.
    """
    if isinstance(spec, int) and not isinstance(spec, bool):
        return [spec]
    if not isinstance(spec, str):
        raise ValueError(f"expected a string like 'all' or '0-3,5', got {spec!r}")
    if spec.strip() == "all":
        return list(range(num_devices))
    ids: list[int] = []
    for part in spec.split(","):
        m = _RANGE.match(part)
        if not m:
            raise ValueError(f"'{part.strip()}' is not a device id or a range like 0-3")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"range '{part.strip()}' runs backwards")
        ids.extend(range(lo, hi + 1))
    return ids


def placement_world_sizes(s: Settings, facts: Facts) -> tuple[dict[str, int], list[Finding]]:
    """World size per component from ``cluster.component_placement``, plus grammar findings."""
    findings: list[Finding] = []
    num_nodes = positive_or(s.cluster.num_nodes, 0)
    if not num_nodes:
        return {}, []  # the schema reports the value
    total = num_nodes * facts.gpus_per_node
    placement = s.cluster.component_placement
    if not isinstance(placement, dict) or not len(placement):
        return {}, [Finding("error", "cluster.component_placement", "missing or empty",
                            "e.g. cluster.component_placement='{actor,env,rollout: all}'",
                            code="placement-missing")]
    sizes: dict[str, int] = {}
    for names in placement:
        where = f"cluster.component_placement.{names}"
        if placement[names] is None:
            continue  # an interpolation that does not resolve: the schema reports it
        try:
            ids = parse_placement(placement[names], total)
        except ValueError as exc:
            findings.append(Finding("error", where, f"bad placement: {exc}",
                                    "use 'all' or ids and ranges like '0-3,6'",
                                    code="placement-syntax"))
            continue
        out = sorted({i for i in ids if i >= total})
        if out:
            findings.append(Finding(
                "error", where,
                f"device ids {out} exceed the {total} GPUs of {num_nodes} node(s) × "
                f"{facts.gpus_per_node} GPUs",
                "use ids below that, raise cluster.num_nodes, or pass --gpus-per-node",
                code="placement-gpu-count",
            ))
        for name in str(names).split(","):
            name = name.strip()
            if name in sizes:
                findings.append(Finding("error", where, f"component '{name}' placed twice",
                                        "place each component once",
                                        code="placement-component-twice"))
            sizes[name] = len(set(ids))
    for comp in COMPONENTS:
        if comp not in sizes:
            findings.append(Finding("error", "cluster.component_placement",
                                    f"component '{comp}' is not placed",
                                    "add it, e.g. 'actor,env,rollout: all'",
                                    code="placement-component-missing"))
    return sizes, findings


def check_env_arithmetic(s: Settings, sizes: dict[str, int]) -> list[Finding]:
    """RLinf's divisibility rules for env counts, chunks and pipeline stages."""
    findings: list[Finding] = []
    env_ws = sizes.get("env") or 0
    stages = positive_or(s.rollout.pipeline_stage_num)
    chunks = positive_or(s.actor.model.num_action_chunks)
    val = given(s.runner.val_check_interval, -1)
    eval_on = (isinstance(val, int) and val > 0) or s.runner.only_eval is True
    for split in ("train", "eval"):
        if split == "eval" and not eval_on:
            continue
        env = getattr(s.env, split)
        key = f"env.{split}.total_num_envs"
        n = positive_or(env.total_num_envs, 0)
        group = positive_or(env.group_size, positive_or(s.algorithm.group_size))
        if not n:
            continue  # the schema reports the value
        if env_ws and n % env_ws:
            findings.append(Finding("error", key,
                                    f"{n} envs do not divide over {env_ws} env processes",
                                    f"use a multiple of {env_ws}", code="env-count-uneven"))
        elif env_ws:
            per = n // env_ws
            if per % stages or per // stages == 0:
                findings.append(Finding(
                    "error", key, f"{per} envs per process do not split into "
                    f"rollout.pipeline_stage_num={stages} stages",
                    f"use a multiple of {env_ws * stages} envs or fewer stages",
                    code="env-stages-uneven"))
            elif (per // stages) % group:
                findings.append(Finding(
                    "error", key, f"{per // stages} envs per stage are not divisible by "
                    f"group_size={group}", f"use a multiple of {env_ws * stages * group} envs",
                    code="env-groups-uneven"))
        steps = positive_or(env.max_steps_per_rollout_epoch)
        if steps % chunks:
            findings.append(Finding(
                "error", f"env.{split}.max_steps_per_rollout_epoch",
                f"{steps} is not divisible by actor.model.num_action_chunks={chunks}",
                f"use a multiple of {chunks}", code="env-steps-chunks-uneven"))
    return findings


def check_batch_arithmetic(s: Settings, sizes: dict[str, int]) -> list[Finding]:
    """Global batch must split into micro-batches over every actor rank."""
    gbs = positive_or(s.actor.global_batch_size, 0)
    mbs = positive_or(s.actor.micro_batch_size, 0)
    ws = sizes.get("actor") or 0
    if ws and gbs and mbs and gbs % (mbs * ws):
        return [Finding("error", "actor.global_batch_size",
                        f"{gbs} is not divisible by micro_batch_size × actor world size "
                        f"= {mbs} × {ws}", f"use a multiple of {mbs * ws}",
                        code="batch-micro-batches-uneven")]
    return []


def check_rollout_split(s: Settings, sizes: dict[str, int], mode: str) -> list[Finding]:
    """How RLinf hands a step's trajectories to the actor ranks and cuts them into batches.

    Each env process and pipeline stage splits its envs into ``lcm(actor, senders) / senders``
    equal parts, one per receiving actor rank (``senders`` = env world size × stages); each actor
    rank then asserts that its samples split into global batches of its share.
    """
    actor_ws, env_ws = sizes.get("actor") or 0, sizes.get("env") or 0
    n = positive_or(s.env.train.total_num_envs, 0)
    senders = env_ws * positive_or(s.rollout.pipeline_stage_num)
    if not (actor_ws and senders and n) or n % senders:
        return []  # the env arithmetic reports an uneven split
    parts = math.lcm(actor_ws, senders) // senders
    if (n // senders) % parts:
        return [Finding("error", "env.train.total_num_envs",
                        f"{n // senders} envs per env process and stage do not split into "
                        f"{parts} equal parts, one per actor rank ({actor_ws} actor ranks)",
                        f"use a multiple of {senders * parts} envs", code="env-actor-split-uneven")]
    steps = positive_or(s.env.train.max_steps_per_rollout_epoch)
    chunks = positive_or(s.actor.model.num_action_chunks)
    gbs = positive_or(s.actor.global_batch_size, 0)
    calls = steps // chunks * positive_or(s.env.train.rollout_epoch)
    # Async PPO trains on store-sized batches instead; check_mode checks those.
    if gbs and steps % chunks == 0 and mode != "async" and (calls * n) % gbs:
        return [Finding("error", "actor.global_batch_size",
                        f"{gbs} does not divide the {calls * n} samples of a step ({calls} policy "
                        f"calls per env × {n} envs); RLinf asserts it in the actor's first update",
                        "use a divisor of the samples per step, or change the env count",
                        code="batch-samples-uneven")]
    return []


def check_pipeline(cfg: DictConfig) -> list[Finding]:
    """The training pipeline (``runner.mode: pipeline``): RLinf's switch on, and GAE, the only
    advantage its env workers compute (rlinf/config.py asserts it at launch)."""
    mode = run_mode(cfg)
    switch = setting(cfg, "runner.use_training_pipeline") is True
    findings: list[Finding] = []
    if mode == "pipeline" and not switch:
        findings.append(Finding("error", "runner.use_training_pipeline",
                                "false in pipeline mode: RLinf would run its plain synchronous "
                                "loop with dexrl's pipeline actor", "set "
                                "runner.use_training_pipeline=true (what `--mode pipeline` sets)",
                                code="mode-pipeline-switch-off"))
    if mode == "sync" and switch:
        findings.append(Finding("error", "runner.mode",
                                "sync, but runner.use_training_pipeline is true: RLinf would run "
                                "its pipeline with dexrl's synchronous actor", "use `--mode "
                                "pipeline` (or runner.mode=pipeline), or set "
                                "runner.use_training_pipeline=false",
                                code="mode-pipeline-mismatch"))
    if mode == "pipeline" and setting(cfg, "algorithm.adv_type") != "gae":
        findings.append(Finding("error", "algorithm.adv_type",
                                f"{setting(cfg, 'algorithm.adv_type')} in pipeline mode: RLinf's "
                                "training pipeline computes GAE advantages only",
                                "set algorithm.adv_type=gae, or train in sync or async mode",
                                code="mode-pipeline-advantage"))
    return findings


def check_mode(cfg: DictConfig, sizes: dict[str, int], facts: Facts) -> list[Finding]:
    """What RLinf 0.3.0's async PPO (``runner.mode: async``) asserts, crashes on or ignores.

    Its runner, actor, rollout and env workers (rlinf/runners/async_ppo_embodied_runner.py,
    rlinf/workers/{actor/async_ppo_fsdp_worker,rollout/hf/async_huggingface_worker,
    env/async_env_worker}.py): the decoupled loss, a staleness threshold, no offload, no logprob
    recomputation, no training pipeline, no validation; the actor's batches; the placement.
    """
    if run_mode(cfg) != "async":
        return []
    findings: list[Finding] = []
    loss = setting(cfg, "algorithm.loss_type")
    # GRPO's own check says why it cannot run async (mode-async-grpo), in its one line.
    if loss != "decoupled_actor_critic" and not is_grouped(cfg):
        findings.append(Finding("error", "algorithm.loss_type",
                                f"{loss} does not run in async mode: RLinf's async PPO needs the "
                                "decoupled loss, which corrects the PPO ratio for stale "
                                "trajectories", "set algorithm.loss_type=decoupled_actor_critic "
                                "(what `--mode async` sets)", code="mode-async-loss"))
    if setting(cfg, "algorithm.staleness_threshold") is None:
        findings.append(Finding("error", "algorithm.staleness_threshold",
                                "missing or null in async mode: RLinf's actor computes version - "
                                "staleness_threshold and fails (TypeError) in its receive thread",
                                "set algorithm.staleness_threshold=1 (what `--mode async` sets)",
                                code="mode-async-staleness-missing"))
    # AsyncEnvWorker asserts on env.train/env.eval.enable_offload (RLinf 0.3.0 reads no
    # env.enable_offload), AsyncMultiStepRolloutWorker on rollout.enable_offload.
    for key in ("env.train.enable_offload", "env.eval.enable_offload", "rollout.enable_offload"):
        if setting(cfg, key) is True:
            findings.append(Finding("error", key, "offload is not supported in async mode (RLinf's "
                                    "async env and rollout workers refuse it): they never pause",
                                    f"set {key}=false", code="mode-async-offload"))
    if setting(cfg, "rollout.recompute_logprobs") is True:
        findings.append(Finding("error", "rollout.recompute_logprobs",
                                "not implemented in async mode (RLinf's AsyncPPOEmbodiedRunner "
                                "raises NotImplementedError in its first step)",
                                "set rollout.recompute_logprobs=false",
                                code="mode-async-recompute-logprobs"))
    if setting(cfg, "runner.use_training_pipeline") is True:
        findings.append(Finding("error", "runner.use_training_pipeline",
                                "the training pipeline is another RLinf runner than async PPO; "
                                "the two do not combine", "set runner.use_training_pipeline=false, "
                                "or run synchronously", code="mode-async-pipeline"))
    val = setting(cfg, "runner.val_check_interval", -1)
    if isinstance(val, int) and not isinstance(val, bool) and val > 0:
        findings.append(Finding("warning", "runner.val_check_interval",
                                f"{val}: RLinf's async runner never validates (its eval envs are "
                                "still built)", "set runner.val_check_interval=-1 and evaluate "
                                "checkpoints with `dexrl eval`", code="mode-async-no-validation"))
    findings += _async_batches(cfg, sizes)
    if not facts.cpu_only:  # on CPU nodes every component is its own process anyway
        findings += _async_collocated(cfg, facts)
    return findings


def _async_batches(cfg: DictConfig, sizes: dict[str, int]) -> list[Finding]:
    """The async actor's batches: each step an actor rank trains on the newest
    ``rollout_store_size_per_rank`` trajectories of the one queue all env processes fill.

    A trajectory is a whole round (``rollout_epoch`` × chunk steps policy calls) of one of the
    ``lcm(actor, senders) / senders`` equal parts an env process and stage splits its envs into,
    so it holds ``calls × total_num_envs / lcm(actor, senders)`` samples, and a round makes
    ``lcm(actor, senders) / actor`` trajectories per actor rank (``senders`` = env world size ×
    stages; RLinf's ``compute_split_num``).
    """
    actor_ws, env_ws = sizes.get("actor") or 0, sizes.get("env") or 0
    senders = env_ws * positive(cfg, "rollout.pipeline_stage_num")
    n = positive(cfg, "env.train.total_num_envs", 0)
    if not (actor_ws and senders and n):
        return []
    findings: list[Finding] = []
    parts = math.lcm(actor_ws, senders)
    per_round = parts // actor_ws
    store = positive(cfg, "algorithm.rollout_store_size_per_rank")  # RLinf's default is 1 too
    if store < per_round:
        findings.append(Finding(
            "warning", "algorithm.rollout_store_size_per_rank",
            f"{store} is below the {per_round} trajectories each actor rank receives per env "
            f"round ({senders} env processes × stages split into {parts} parts over {actor_ws} "
            "actor ranks): the rest of each round is never trained on (RLinf counts them in "
            "rollout/discarded_unused_trajs)",
            f"set algorithm.rollout_store_size_per_rank={per_round} (or a multiple)",
            code="mode-async-store-small"))
    steps = positive(cfg, "env.train.max_steps_per_rollout_epoch")
    chunks = positive(cfg, "actor.model.num_action_chunks")
    gbs = positive(cfg, "actor.global_batch_size", 0)
    if n % parts or steps % chunks or not gbs or gbs % actor_ws:
        return findings  # the env and batch arithmetic report these
    per_traj = steps // chunks * positive(cfg, "env.train.rollout_epoch") * (n // parts)
    batch = gbs // actor_ws
    if (store * per_traj) % batch:
        findings.append(Finding(
            "error", "actor.global_batch_size",
            f"each actor rank trains per step on {store} trajectories × {per_traj} samples = "
            f"{store * per_traj} samples, not a multiple of its batch {gbs} / {actor_ws} actor "
            f"ranks = {batch}; RLinf's async actor asserts it",
            f"set algorithm.rollout_store_size_per_rank to a multiple of "
            f"{batch // math.gcd(per_traj, batch)}, or actor.global_batch_size so that it / "
            f"{actor_ws} divides {store * per_traj}", code="mode-async-batch-uneven"))
    return findings


def _async_collocated(cfg: DictConfig, facts: Facts) -> list[Finding]:
    """Async PPO on GPUs the actor shares with the rollout or env has little to overlap."""
    total = positive(cfg, "cluster.num_nodes", 0) * facts.gpus_per_node
    placement = setting(cfg, "cluster.component_placement")
    if not total or not isinstance(placement, DictConfig):
        return []  # placement_world_sizes reports it
    devices: dict[str, set[int]] = {}
    for names in placement:
        try:
            ids = set(parse_placement(placement[names], total))
        except (OmegaConfBaseException, ValueError):
            continue  # the schema or placement_world_sizes reports it
        for name in str(names).split(","):
            devices[name.strip()] = ids
    actor = devices.get("actor", set())
    others = [c for c in ("rollout", "env") if actor & devices.get(c, set())]
    if not others:
        return []
    shared = actor & set().union(*(devices[c] for c in others))
    split = split_placement(facts.gpus_per_node)
    example = ("{" + ", ".join(f"{k}: {v}" for k, v in split.items()) + "}") if split else None
    return [Finding(
        "warning", "cluster.component_placement",
        f"the actor shares {len(shared)} of its {len(actor)} GPU(s) with the "
        f"{' and '.join(others)}: async PPO then trains and rolls out on the same GPUs, so "
        "little of the two overlaps",
        f"give the actor its own GPUs, e.g. cluster.component_placement='{example}' on one "
        f"{facts.gpus_per_node}-GPU node" if example else
        "give the actor its own GPUs (two GPUs or more), or run synchronously",
        code="mode-async-collocated")]


def check_algorithm(s: Settings) -> list[Finding]:
    """PPO actor-critic needs a value head; a setting RLinf's embodied actor ignores is named."""
    findings: list[Finding] = []
    loss = s.algorithm.loss_type
    # GRPO's own checks name a critic loss (algorithm-grpo-loss, mode-async-grpo).
    if loss in ("actor_critic", "decoupled_actor_critic") and not is_grouped(s) and not given(
            s.actor.model.add_value_head, False):
        findings.append(Finding("error", "actor.model.add_value_head",
                                f"algorithm.loss_type={loss} needs a value head",
                                "set actor.model.add_value_head=True",
                                code="algorithm-value-head-missing"))
    if (given(s.algorithm.normalize_advantages, True) is False
            and s.algorithm.adv_type == "gae"
            and not given(s.runner.use_training_pipeline, False)):
        findings.append(Finding(
            "warning", "algorithm.normalize_advantages",
            "false has no effect: RLinf 0.3.0's embodied actor always normalizes GAE advantages "
            "(over each actor rank's samples)", "leave it true, or expect normalized advantages",
            code="algorithm-setting-ignored"))
    return findings


def check_runner(s: Settings) -> list[Finding]:
    """Checkpoint cadence against the run length and the validation cadence."""
    findings: list[Finding] = []
    max_steps = positive_or(s.runner.max_steps, 0)
    save = positive_or(s.runner.save_interval, 0)
    val = positive_or(s.runner.val_check_interval, 0)
    if max_steps and save > max_steps:
        findings.append(Finding("warning", "runner.save_interval",
                                f"{save} exceeds runner.max_steps={max_steps}: only the final "
                                "step is checkpointed, so a crash loses the whole run",
                                f"use a value ≤ {max_steps}", code="runner-save-after-end"))
    steps = s.runner.max_steps
    if isinstance(steps, int) and not isinstance(steps, bool) and steps < 0:
        epochs = s.runner.max_epochs
        findings.append(Finding("warning", "runner.max_steps",
                                f"{steps} is negative: RLinf runs runner.max_epochs = {epochs} "
                                "steps", "set runner.max_steps to the number of steps to run "
                                "(negative only to let runner.max_epochs decide)",
                                code="runner-steps-from-epochs"))
    if val and save and save % val:
        findings.append(Finding("error", "runner.save_interval",
                                f"{save} is not a multiple of runner.val_check_interval={val} "
                                "(RLinf requires it)", f"use a multiple of {val}",
                                code="runner-save-not-on-validation"))
    return findings


def check_model(s: Settings, facts: Facts) -> list[Finding]:
    """Model type, paths, train/eval consistency, and the checkpoint when it exists."""
    findings: list[Finding] = []
    model_type = s.actor.model.model_type
    known = {p.model_type for p in policies().values()}
    if model_type not in known:
        from dexrl.plugins import discover

        broken = [p for p in discover().problems if model_type in p.names]
        findings.append(Finding("error", "actor.model.model_type", broken[0].message,
                                broken[0].hint, code="plugin-unusable") if broken else
                        Finding("error", "actor.model.model_type",
                                f"'{model_type}' is not a dexrl policy",
                                f"use one of {', '.join(sorted(known))}",
                                code="config-model-type-unknown"))
    actor_path = s.actor.model.model_path
    rollout_path = s.rollout.model.model_path
    if actor_path != rollout_path:
        findings.append(Finding("error", "rollout.model.model_path",
                                f"differs from actor.model.model_path ({rollout_path!r} vs "
                                f"{actor_path!r})", "set actor.model.model_path only; the "
                                "rollout follows it", code="config-copy-differs"))
    # Actor settings that the rollout (and the Dexbotic section) read again under other keys: a
    # set copy must equal the actor's value.
    model, dexbotic, rollout = s.actor.model, s.actor.model.dexbotic, s.rollout.model
    mirrored = {("actor.model.num_action_chunks", model.num_action_chunks): (
                    ("actor.model.dexbotic.action_chunk", dexbotic.action_chunk),
                    ("rollout.model.num_action_chunks", rollout.num_action_chunks)),
                ("actor.model.num_steps", model.num_steps): (
                    ("actor.model.dexbotic.num_steps", dexbotic.num_steps),
                    ("rollout.model.num_steps", rollout.num_steps))}
    for (source, value), copies in mirrored.items():
        for key, other in copies:
            if other is not None and other != value:
                findings.append(Finding("error", key, f"{other} differs from {source}={value}",
                                        f"set {source} only", code="config-copy-differs"))
    if facts.suite in SUITES:
        # The shipped configs' own horizon (RLinf's) is no warning: `dexrl eval` uses the
        # standalone one, whatever the training config says (docs/configs.md).
        horizon, shipped = SUITES[facts.suite].horizon, SUITES[facts.suite].shipped_horizon
        for split in ("train", "eval"):
            mes = getattr(s.env, split).max_episode_steps
            if isinstance(mes, int) and mes not in (horizon, shipped):
                also = f" and from the shipped configs' {shipped}" if shipped else ""
                findings.append(Finding(
                    "warning", f"env.{split}.max_episode_steps",
                    f"{mes} differs from the {facts.suite} horizon {horizon} used by the "
                    f"openpi/RLinf standalone evaluations{also} (success rates are not "
                    "comparable)",
                    f"set env.{split}.max_episode_steps={horizon} to compare with published "
                    "numbers" + (f", or {shipped} as shipped" if shipped else ""),
                    code="env-horizon-differs"))
    if isinstance(actor_path, str) and Path(actor_path).expanduser().exists():
        findings += check_checkpoint_dir(Path(actor_path).expanduser(), model_type)
    elif isinstance(actor_path, str):
        findings.append(Finding("warning", "actor.model.model_path",
                                f"checkpoint not found at {actor_path}",
                                "run `dexrl download <repo>` or pass --ckpt / "
                                "actor.model.model_path=...", code="checkpoint-not-found"))
    return findings


def check_dexbotic(cfg: DictConfig, s: Settings) -> list[Finding]:
    """dexrl's ``actor.model.dexbotic`` keys, then the model's own checks (its spec's hook, which
    takes the config: the plugin contract)."""
    findings: list[Finding] = []
    level = s.actor.model.dexbotic.noise_level
    if s.actor.model.dexbotic.noise_method == "flow_cps" and isinstance(
            level, (int, float)) and level > 1:
        findings.append(Finding("error", "actor.model.dexbotic.noise_level",
                                f"{level} exceeds 1, the largest flow_cps noise level (an angle "
                                "fraction)", "use a value in [0, 1] with flow_cps",
                                code="policy-setting-out-of-range"))
    model_type = s.actor.model.model_type
    policy = policy_for(model_type) if isinstance(model_type, str) else None
    if policy is not None and policy.model.check_config is not None:
        findings += load_reference(policy.model.check_config)(cfg)
    return findings


def check_rollout_speed(s: Settings, facts: Facts) -> list[Finding]:
    """RLinf's rollout compile and CUDA-graph keys, where they cannot work."""
    findings: list[Finding] = []
    graphs = s.rollout.enable_cuda_graph is True
    mode = given(s.rollout.torch_compile_mode, "max-autotune-no-cudagraphs")
    if graphs and facts.cpu_only:
        findings.append(Finding("error", "rollout.enable_cuda_graph",
                                "CUDA graphs need a GPU and this run has none",
                                "set rollout.enable_cuda_graph=false (rollout."
                                "enable_torch_compile works on a CPU)",
                                code="policy-cuda-graph-no-gpu"))
    if graphs and s.rollout.enable_torch_compile is True and mode in (
            "reduce-overhead", "max-autotune"):
        findings.append(Finding("error", "rollout.torch_compile_mode",
                                f"{mode} records CUDA graphs itself, which cannot run inside "
                                "the rollout's own CUDA graph",
                                "set rollout.torch_compile_mode=max-autotune-no-cudagraphs (or "
                                "default) with rollout.enable_cuda_graph",
                                code="policy-compile-mode-graphs"))
    if graphs and s.rollout.enable_offload is True:
        findings.append(Finding("warning", "rollout.enable_cuda_graph",
                                "with rollout.enable_offload the graphs are released before "
                                "every offload and captured again after every reload: a "
                                "capture (3 calls per batch size) every global step",
                                "keep it if GPU memory needs the offload; otherwise set "
                                "rollout.enable_offload=false",
                                code="policy-cuda-graph-recaptured"))
    return findings


def check_tasks(cfg: DictConfig, s: Settings) -> list[Finding]:
    """The settings of dexrl's cued reach task, in each env config that runs it."""
    findings: list[Finding] = []
    for split in ("train", "eval"):
        if getattr(s.env, split).dexrl_env != SECTION:
            continue
        env = cfg.env[split]
        findings += check_env(*(OmegaConf.to_container(env.get(key) or {}, resolve=True)
                                for key in (SECTION, "init_params")), f"env.{split}")
    return findings


def run_config_checks(cfg: DictConfig, facts: Facts,
                      settings: Settings | None = None) -> list[Finding]:
    """The value schema, then every check across keys, in a stable order; collects all problems
    (``settings``: the config's, when the caller has read them).

    A cross-key finding at, or naming, a key whose value the schema already refused is left out:
    it would only restate that error.
    """
    values = check_values(cfg)
    bad = {f.where for f in values if f.level == "error"}
    s = settings or Settings.read(cfg)
    sizes, findings = placement_world_sizes(s, facts)
    findings += check_env_arithmetic(s, sizes)
    findings += check_batch_arithmetic(s, sizes)
    findings += check_rollout_split(s, sizes, run_mode(cfg))
    findings += check_mode(cfg, sizes, facts)
    findings += check_pipeline(cfg)
    findings += check_algorithm(s)
    findings += check_grpo(s, sizes, run_mode(cfg))
    findings += check_reward_filter(s)
    findings += check_noise(s)
    findings += check_runner(s)
    findings += check_model(s, facts)
    findings += check_dexbotic(cfg, s)
    findings += check_rollout_speed(s, facts)
    findings += check_tasks(cfg, s)
    return values + [f for f in findings
                     if f.where not in bad and not any(f"{k}=" in f.message for k in bad)]
