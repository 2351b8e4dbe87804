"""Checks on a composed training config, mirroring what RLinf asserts at launch (and more).

Each key's own type, range and choices are the value schema's (:mod:`dexrl.config.schema`); the
checks here relate keys to each other and to the machine. Every function takes the config (and
facts it needs) and returns findings; none imports rlinf, Ray or torch, so ``dexrl validate``
stays fast and runs anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from dexrl.catalog import SUITES, load_reference, policies, policy_for
from dexrl.checkpoints.verify import check_checkpoint_dir
from dexrl.config.algorithm_checks import check_grpo, check_noise, check_reward_filter
from dexrl.config.algorithms import is_grouped
from dexrl.config.modes import check_mode, check_pipeline, run_mode
from dexrl.config.placement import parse_placement
from dexrl.config.schema import check_values
from dexrl.config.settings import Settings, given, positive_or
from dexrl.errors import Finding
from dexrl.models.choices import GRAPHING_MODES
from dexrl.plugins import discover
from dexrl.reach.rules import SECTION, check_env

COMPONENTS = ("actor", "rollout", "env")


@dataclass(frozen=True)
class Facts:
    """What the checks need beyond the config."""

    suite: str | None = None
    gpus_per_node: int = 8
    cpu_only: bool = False  # the run has no GPU (``--smoke``)


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
    if graphs and s.rollout.enable_torch_compile is True and mode in GRAPHING_MODES:
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


def check_task_env(env: DictConfig, where: str = "") -> list[Finding]:
    """The cued reach task's settings in one env config (its section and ``init_params``), at
    keys under ``where`` (``env.train``; empty for an env config alone, as eval builds one)."""
    return check_env(*(OmegaConf.to_container(env.get(key) or {}, resolve=True)
                       for key in (SECTION, "init_params")), where)


def check_tasks(cfg: DictConfig, s: Settings) -> list[Finding]:
    """The settings of dexrl's cued reach task, in each env config that runs it."""
    findings: list[Finding] = []
    for split in ("train", "eval"):
        if getattr(s.env, split).dexrl_env == SECTION:
            findings += check_task_env(cfg.env[split], f"env.{split}")
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
    mode = run_mode(s)
    sizes, findings = placement_world_sizes(s, facts)
    findings += check_env_arithmetic(s, sizes)
    findings += check_batch_arithmetic(s, sizes)
    findings += check_rollout_split(s, sizes, mode)
    findings += check_mode(s, sizes, facts)
    findings += check_pipeline(s)
    findings += check_algorithm(s)
    findings += check_grpo(s, sizes, mode)
    findings += check_reward_filter(s)
    findings += check_noise(s)
    findings += check_runner(s)
    findings += check_model(s, facts)
    findings += check_dexbotic(cfg, s)
    findings += check_rollout_speed(s, facts)
    findings += check_tasks(cfg, s)
    return values + [f for f in findings
                     if f.where not in bad and not any(f"{k}=" in f.message for k in bad)]
