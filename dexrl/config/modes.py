"""Execution modes (``runner.mode``), in one place: their names and help, the overrides each
stands for, async's default placement, their checks, the description the dry-run plan prints,
and which RLinf runner each uses (the bridge maps these names to its classes,
:data:`dexrl.bridge.launch.workers.WORKERS`).

Design notes: docs/execution-modes.md.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from omegaconf import DictConfig, open_dict
from omegaconf.errors import OmegaConfBaseException

from dexrl.config.algorithms import is_grouped
from dexrl.config.placement import parse_placement
from dexrl.config.settings import Settings, given, positive_or, settings_of
from dexrl.errors import DexrlError, Finding

__all__ = ["ASYNC", "MODES", "MODE_SUMMARY", "PIPELINE", "RUNNERS", "SYNC", "check_mode",
           "check_pipeline", "describe", "mode_overrides", "place_async", "run_mode",
           "split_placement"]

SYNC, ASYNC, PIPELINE = MODES = ("sync", "async", "pipeline")
"""``sync``: RLinf's EmbodiedRunner (roll out, then train, then sync weights); ``async``: its
AsyncPPOEmbodiedRunner (env and rollout run on while the actor trains); ``pipeline``: the
synchronous runner with its training pipeline (``runner.use_training_pipeline``: the actor
trains on each micro-batch as the envs finish it, within the step)."""

RUNNERS = {SYNC: "EmbodiedRunner", ASYNC: "AsyncPPOEmbodiedRunner", PIPELINE: "EmbodiedRunner"}
"""The RLinf runner each mode runs (dexrl's subclass of it in the bridge)."""

MODE_SUMMARY = ("sync (default: roll out, then train), async (RLinf's async PPO: rollouts go on "
                "while the actor trains), pipeline (training starts on each micro-batch as the "
                "rollout finishes it)")


COLLOCATED = {"actor,env,rollout": "all"}
"""The shipped configs' placement: every component on every GPU."""


class Machine(Protocol):
    """What the checks need to know of the machine (:class:`dexrl.config.checks.Facts`)."""

    gpus_per_node: int
    cpu_only: bool  # the run has no GPU (``--smoke``)


def run_mode(cfg: Any) -> str:
    """The config's ``runner.mode``; without one, ``pipeline`` when RLinf's
    ``runner.use_training_pipeline`` is on (its runner then runs the pipeline), else ``sync``."""
    runner = settings_of(cfg).runner
    if runner.mode is not None:
        return runner.mode
    return PIPELINE if runner.use_training_pipeline is True else SYNC


def mode_overrides(mode: str | None) -> list[str]:
    """The Hydra overrides ``--mode`` stands for: ``+mode=async`` applies conf/mode/async.yaml;
    ``sync`` (the shipped configs' mode) adds nothing."""
    if mode in (None, SYNC):
        return []
    if mode not in MODES:
        raise DexrlError(f"--mode {mode} is not an execution mode",
                         f"use one of {', '.join(MODES)} (docs/execution-modes.md)",
                         code="flags-mode-unknown")
    return [f"+mode={mode}"]


def split_placement(gpus_per_node: int) -> dict[str, str] | None:
    """Async PPO's default placement on one node of ``gpus_per_node`` GPUs: the actor on the
    first half, env and rollout on the second (None for one GPU, which cannot be split).

    Why half: the actor's FSDP training and the rollout's generation then run on separate GPUs
    at the same time, and each side keeps the memory it has in a synchronous run on that many
    GPUs (docs/execution-modes.md#placement).
    """
    if gpus_per_node < 2:
        return None
    half = gpus_per_node // 2
    return {"actor": f"0-{half - 1}" if half > 1 else "0",
            "env,rollout": f"{half}-{gpus_per_node - 1}" if gpus_per_node - half > 1
            else str(half)}


def place_async(cfg: Any, gpus_per_node: int, cpu_only: bool) -> dict[str, str] | None:
    """Give an async run on GPUs :func:`split_placement` when it kept the shipped collocated
    placement; return the placement set, or None when nothing changed (a synchronous run, a
    CPU-only run, where every component is its own process anyway, or a placement the user
    chose)."""
    if run_mode(cfg) != ASYNC or cpu_only:
        return None
    current = settings_of(cfg).cluster.component_placement
    split = split_placement(gpus_per_node)
    if current != COLLOCATED or split is None:
        return None
    with open_dict(cfg):
        cfg.cluster.component_placement = split
    return split


def describe(cfg: DictConfig | Settings) -> str:
    """The execution mode in words, with what bounds an async run's data (the dry-run plan's
    ``Mode:`` line)."""
    mode = run_mode(cfg)
    if mode == PIPELINE:
        return (f"pipeline (RLinf's {RUNNERS[PIPELINE]} with its training pipeline: the actor "
                "trains on each micro-batch as the envs finish it; weights synced between steps)")
    if mode != ASYNC:
        return f"sync (RLinf's {RUNNERS[SYNC]}: roll out, then train, then sync weights)"
    algorithm = settings_of(cfg).algorithm
    stale, store = algorithm.staleness_threshold, given(algorithm.rollout_store_size_per_rank, 1)
    return (f"async (RLinf's {RUNNERS[ASYNC]}: env and rollout run on while the actor "
            f"trains; each step trains on {store} trajectory(ies) per actor rank, at most "
            f"{stale} policy version(s) old)")


# --- checks: what RLinf's runner of each mode asserts, crashes on or ignores ------------------


def check_pipeline(s: Settings) -> list[Finding]:
    """The training pipeline (``runner.mode: pipeline``): RLinf's switch on, and GAE, the only
    advantage its env workers compute (rlinf/config.py asserts it at launch)."""
    mode = run_mode(s)
    switch = s.runner.use_training_pipeline is True
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
    if mode == "pipeline" and s.algorithm.adv_type != "gae":
        findings.append(Finding("error", "algorithm.adv_type",
                                f"{s.algorithm.adv_type} in pipeline mode: RLinf's "
                                "training pipeline computes GAE advantages only",
                                "set algorithm.adv_type=gae, or train in sync or async mode",
                                code="mode-pipeline-advantage"))
    return findings


def check_mode(s: Settings, sizes: dict[str, int], facts: Machine) -> list[Finding]:
    """What RLinf 0.3.0's async PPO (``runner.mode: async``) asserts, crashes on or ignores.

    Its runner, actor, rollout and env workers (rlinf/runners/async_ppo_embodied_runner.py,
    rlinf/workers/{actor/async_ppo_fsdp_worker,rollout/hf/async_huggingface_worker,
    env/async_env_worker}.py): the decoupled loss, a staleness threshold, no offload, no logprob
    recomputation, no training pipeline, no validation; the actor's batches; the placement.
    """
    if run_mode(s) != "async":
        return []
    findings: list[Finding] = []
    loss = s.algorithm.loss_type
    # GRPO's own check says why it cannot run async (mode-async-grpo), in its one line.
    if loss != "decoupled_actor_critic" and not is_grouped(s):
        findings.append(Finding("error", "algorithm.loss_type",
                                f"{loss} does not run in async mode: RLinf's async PPO needs the "
                                "decoupled loss, which corrects the PPO ratio for stale "
                                "trajectories", "set algorithm.loss_type=decoupled_actor_critic "
                                "(what `--mode async` sets)", code="mode-async-loss"))
    if s.algorithm.staleness_threshold is None:
        findings.append(Finding("error", "algorithm.staleness_threshold",
                                "missing or null in async mode: RLinf's actor computes version - "
                                "staleness_threshold and fails (TypeError) in its receive thread",
                                "set algorithm.staleness_threshold=1 (what `--mode async` sets)",
                                code="mode-async-staleness-missing"))
    # AsyncEnvWorker asserts on env.train/env.eval.enable_offload (RLinf 0.3.0 reads no
    # env.enable_offload), AsyncMultiStepRolloutWorker on rollout.enable_offload.
    offloads = {"env.train.enable_offload": s.env.train.enable_offload,
                "env.eval.enable_offload": s.env.eval.enable_offload,
                "rollout.enable_offload": s.rollout.enable_offload}
    for key, offload in offloads.items():
        if offload is True:
            findings.append(Finding("error", key, "offload is not supported in async mode (RLinf's "
                                    "async env and rollout workers refuse it): they never pause",
                                    f"set {key}=false", code="mode-async-offload"))
    if s.rollout.recompute_logprobs is True:
        findings.append(Finding("error", "rollout.recompute_logprobs",
                                "not implemented in async mode (RLinf's AsyncPPOEmbodiedRunner "
                                "raises NotImplementedError in its first step)",
                                "set rollout.recompute_logprobs=false",
                                code="mode-async-recompute-logprobs"))
    if s.runner.use_training_pipeline is True:
        findings.append(Finding("error", "runner.use_training_pipeline",
                                "the training pipeline is another RLinf runner than async PPO; "
                                "the two do not combine", "set runner.use_training_pipeline=false, "
                                "or run synchronously", code="mode-async-pipeline"))
    val = s.runner.val_check_interval
    if val is not None and val > 0:
        findings.append(Finding("warning", "runner.val_check_interval",
                                f"{val}: RLinf's async runner never validates (its eval envs are "
                                "still built)", "set runner.val_check_interval=-1 and evaluate "
                                "checkpoints with `dexrl eval`", code="mode-async-no-validation"))
    findings += _async_batches(s, sizes)
    if not facts.cpu_only:  # on CPU nodes every component is its own process anyway
        findings += _async_collocated(s, facts)
    return findings


def _async_batches(s: Settings, sizes: dict[str, int]) -> list[Finding]:
    """The async actor's batches: each step an actor rank trains on the newest
    ``rollout_store_size_per_rank`` trajectories of the one queue all env processes fill.

    A trajectory is a whole round (``rollout_epoch`` × chunk steps policy calls) of one of the
    ``lcm(actor, senders) / senders`` equal parts an env process and stage splits its envs into,
    so it holds ``calls × total_num_envs / lcm(actor, senders)`` samples, and a round makes
    ``lcm(actor, senders) / actor`` trajectories per actor rank (``senders`` = env world size ×
    stages; RLinf's ``compute_split_num``).
    """
    actor_ws, env_ws = sizes.get("actor") or 0, sizes.get("env") or 0
    senders = env_ws * positive_or(s.rollout.pipeline_stage_num)
    n = positive_or(s.env.train.total_num_envs, 0)
    if not (actor_ws and senders and n):
        return []
    findings: list[Finding] = []
    parts = math.lcm(actor_ws, senders)
    per_round = parts // actor_ws
    store = positive_or(s.algorithm.rollout_store_size_per_rank)  # RLinf's default is 1 too
    if store < per_round:
        findings.append(Finding(
            "warning", "algorithm.rollout_store_size_per_rank",
            f"{store} is below the {per_round} trajectories each actor rank receives per env "
            f"round ({senders} env processes × stages split into {parts} parts over {actor_ws} "
            "actor ranks): the rest of each round is never trained on (RLinf counts them in "
            "rollout/discarded_unused_trajs)",
            f"set algorithm.rollout_store_size_per_rank={per_round} (or a multiple)",
            code="mode-async-store-small"))
    steps = positive_or(s.env.train.max_steps_per_rollout_epoch)
    chunks = positive_or(s.actor.model.num_action_chunks)
    gbs = positive_or(s.actor.global_batch_size, 0)
    if n % parts or steps % chunks or not gbs or gbs % actor_ws:
        return findings  # the env and batch arithmetic report these
    per_traj = steps // chunks * positive_or(s.env.train.rollout_epoch) * (n // parts)
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


def _async_collocated(s: Settings, facts: Machine) -> list[Finding]:
    """Async PPO on GPUs the actor shares with the rollout or env has little to overlap."""
    total = positive_or(s.cluster.num_nodes, 0) * facts.gpus_per_node
    placement = s.cluster.component_placement
    if not total or placement is None:
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
