"""What a launch will do, computed from the config alone (for ``train --dry-run``).

Sizes are analytic estimates from the parameter counts of the checkpoint the config trains (read
from its safetensors headers; ``--smoke``'s tiny one included), else those in the policy's
:class:`~dexrl.catalog.ModelSpec` (0 for a model that declares none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from dexrl.catalog import policy_for
from dexrl.checkpoints.files.headers import read_weights
from dexrl.checkpoints.files.layout import FROZEN_PREFIXES, weight_files
from dexrl.config.algorithms import algorithm_of, algorithm_text
from dexrl.config.checks import Facts
from dexrl.config.modes import describe, run_mode
from dexrl.config.placement import parse_placement
from dexrl.config.resume_rules import planned_steps, steps_source
from dexrl.config.settings import Dexbotic, Settings, given, settings_of
from dexrl.errors import DexrlError, errors
from dexrl.training import memory
from dexrl.units import size

GB = 1e9


@dataclass
class Plan:
    """The numbers ``--dry-run`` prints."""

    placement: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    global_steps: int = 0  # the step the run stops at (runner.max_steps, capped by max_epochs)
    steps_from: str = ""  # which setting decides global_steps, in words (steps_source)
    env_steps: int = 0
    policy_calls: int = 0
    samples: int = 0
    optimizer_steps: float = 0.0
    micro_batches_per_rank: float = 0.0
    params: float = 0.0
    trainable: float = 0.0
    checkpoint_gb: float = 0.0
    saves: int = 0
    save_interval: int = 0  # runner.save_interval (0 or less: no checkpoints)
    memory_gb_per_gpu: dict[int, float] = field(default_factory=dict)  # each GPU's peak
    memory: dict[int, memory.GpuMemory] = field(default_factory=dict)  # its workers and phases
    offload_gb: dict[str, float] = field(default_factory=dict)  # role -> GB moved each way
    prefix_cache: PrefixCachePlan | None = None
    attention: str = "eager"
    rollout_speed: str = "eager"
    mode: str = "sync"  # runner.mode (dexrl.config.modes)
    mode_text: str = "sync (RLinf's EmbodiedRunner: roll out, then train, then sync weights)"
    algorithm: str = "ppo"  # dexrl.config.algorithms.algorithm_of
    algorithm_text: str = "ppo"


@dataclass
class PrefixCachePlan:
    """The training prefix cache of one actor rank (``train_expert_only``).

    Attributes:
        need_gb: Caches of all the rank's samples of a global step.
        device_gb: Of which kept on the GPU (within ``prefix_cache.device_gb``).
        host_gb: Of which kept in pinned host memory (within ``prefix_cache.host_gb``).
        update_epochs: PPO epochs; a cached sample's prefix runs once instead of this often.
    """

    need_gb: float
    device_gb: float
    host_gb: float
    update_epochs: int

    @property
    def cached_fraction(self) -> float:
        """Share of the samples whose prefix is computed once per global step."""
        return min(1.0, (self.device_gb + self.host_gb) / self.need_gb) if self.need_gb else 0.0

    @property
    def passes(self) -> float:
        """Prefix passes per sample per global step (``update_epochs`` without the cache)."""
        return self.cached_fraction + (1 - self.cached_fraction) * self.update_epochs


def placement(cfg: DictConfig | Settings, gpus_per_node: int) -> dict[str, list[tuple[int, int]]]:
    """(node, GPU) of every rank of each component in ``cluster.component_placement``.

    On nodes without GPUs (``gpus_per_node`` 0) RLinf's placement ids are node ranks, one
    process each: the same as one GPU per node.
    """
    cluster = settings_of(cfg).cluster
    per_node = max(gpus_per_node, 1)
    total = int(given(cluster.num_nodes, 1)) * per_node
    out: dict[str, list[tuple[int, int]]] = {}
    for names, spec in (cluster.component_placement or {}).items():
        ids = sorted(set(parse_placement(spec, total)))
        for name in str(names).split(","):
            out[name.strip()] = [(i // per_node, i % per_node) for i in ids]
    return out


def by_node(placed: dict[str, list[tuple[int, int]]]) -> dict[int, dict[str, int]]:
    """Node rank -> {component: ranks on that node}, for the per-node view."""
    nodes: dict[int, dict[str, int]] = {}
    for comp, slots in placed.items():
        for node, _ in slots:
            nodes.setdefault(node, {})
            nodes[node][comp] = nodes[node].get(comp, 0) + 1
    return dict(sorted(nodes.items()))


def render_by_node(placed: dict[str, list[tuple[int, int]]]) -> list[str]:
    """One line per node: ``node 1: env ×1, rollout ×1``."""
    return [f"node {node}: " + ", ".join(f"{c} ×{k}" for c, k in sorted(comps.items()))
            for node, comps in by_node(placed).items()]


def checkpoint_sizes(ckpt_dir: Path) -> tuple[float, float] | None:
    """(parameters, parameters ``train_expert_only`` leaves trainable) of a checkpoint folder,
    from its safetensors headers; None when it has no readable weights."""
    try:
        stats, findings = read_weights(weight_files(Path(ckpt_dir)))
    except (DexrlError, OSError):
        return None
    if errors(findings) or not stats.tensors:
        return None
    frozen = sum(t.numel for name, t in stats.tensors.items() if name.startswith(FROZEN_PREFIXES))
    return float(stats.parameters), float(stats.parameters - frozen)


def make_plan(cfg: DictConfig, facts: Facts, ckpt_dir: Path | None = None,
              settings: Settings | None = None) -> Plan:
    """Compute the plan of one run from a validated config.

    Args:
        cfg: The config.
        settings: Its settings, when the caller has read them.
        facts: Suite and GPUs per node.
        ckpt_dir: The checkpoint to size the model by (default: ``actor.model.model_path``).
    """
    s = settings or Settings.read(cfg)
    train, model, dexbotic = s.env.train, s.actor.model, s.actor.model.dexbotic
    plan = Plan(placement=placement(s, facts.gpus_per_node))
    plan.global_steps, plan.steps_from = planned_steps(cfg), steps_source(cfg)
    plan.mode, plan.mode_text = run_mode(s), describe(s)
    plan.algorithm, plan.algorithm_text = algorithm_of(s), algorithm_text(s)
    envs = int(train.total_num_envs)  # type: ignore[arg-type]  # validated: set
    epochs = int(given(train.rollout_epoch, 1))
    steps = int(train.max_steps_per_rollout_epoch)  # type: ignore[arg-type]
    chunks = int(given(model.num_action_chunks, 1))
    plan.env_steps = envs * epochs * steps
    rollout_ranks = len(plan.placement.get("rollout", [])) or 1
    stages = int(given(s.rollout.pipeline_stage_num, 1))
    plan.policy_calls = rollout_ranks * stages * epochs * (steps // chunks + 1)
    plan.samples = envs * epochs * (steps // chunks)
    update_epochs = int(given(s.algorithm.update_epoch, 1))
    gbs = int(s.actor.global_batch_size)  # type: ignore[arg-type]
    mbs = int(s.actor.micro_batch_size)  # type: ignore[arg-type]
    actor_ranks = len(plan.placement.get("actor", [])) or 1
    plan.optimizer_steps = update_epochs * plan.samples / gbs
    plan.micro_batches_per_rank = update_epochs * plan.samples / (mbs * actor_ranks)

    model_type = str(model.model_type)
    policy = policy_for(model_type)
    declared = policy.model.params if policy is not None else (0.0, 0.0)
    path = ckpt_dir or model.model_path
    plan.params, trainable = (checkpoint_sizes(Path(str(path))) if path else None) or declared
    # Activations and the prefix cache scale with the model's width and depth: a smaller model
    # (--smoke's) needs less than the declared size's figures.
    activation_scale = min(1.0, plan.params / declared[0]) if declared[0] else 1.0
    expert_only = bool(dexbotic.train_expert_only)
    plan.trainable = trainable if expert_only else plan.params
    # full_weights.pt (fp32) + the distributed checkpoint: fp32 params, Adam moments of trainables
    plan.checkpoint_gb = (4 * plan.params + 4 * plan.params + 8 * plan.trainable) / GB
    max_steps = plan.global_steps  # a negative runner.max_steps runs max_epochs steps
    save = plan.save_interval = int(given(s.runner.save_interval, 0))
    plan.saves = saves_between(0, max_steps, save)
    precision = str(model.precision)  # null: the checkpoint's dtype, counted as 4 bytes
    weight_bytes = 2 if precision in ("bf16", "fp16") else 4
    plan.attention = str(given(dexbotic.attention, "eager"))
    plan.rollout_speed = rollout_speed(s)
    kv_bytes = policy.model.prefix_kv_bytes * activation_scale if policy is not None else 0.0
    if expert_only and kv_bytes:
        plan.prefix_cache = _prefix_cache_plan(dexbotic, kv_bytes * weight_bytes / 2 * plan.samples
                                               / actor_ranks / GB, update_epochs)
    train_gb, rollout_gb, graph_gb = (policy.model.memory_gb_per_sample if policy is not None
                                      else (0.0, 0.0, 0.0))
    per_sample = ((train_gb or memory.TRAIN_GB_PER_SAMPLE) if expert_only
                  else memory.FULL_FT_TRAIN_GB_PER_SAMPLE)
    # A joint log-prob (flow_noise's) re-scores every stochastic denoising step with a graph: the
    # expert's activations of each are kept for backward (bench/algorithms.py: 10 steps hold
    # 12-13x the bytes of one scored step; docs/algorithms.md#what-each-costs).
    per_sample *= scored_passes(s)
    graphs = s.rollout.enable_cuda_graph is True
    env_ranks = len(plan.placement.get("env", [])) or 1
    inputs = memory.MemoryInputs(
        params=plan.params, trainable=plan.trainable, weight_bytes=weight_bytes,
        actor_ranks=actor_ranks, micro_batch=mbs, train_gb_per_sample=per_sample * activation_scale,
        cache_device_gb=plan.prefix_cache.device_gb if plan.prefix_cache else 0.0,
        rollout_batch=-(-envs // (rollout_ranks * stages)),
        rollout_gb_per_sample=(rollout_gb or memory.ROLLOUT_GB_PER_SAMPLE) * activation_scale,
        graph_gb_per_sample=((graph_gb or memory.GRAPH_GB_PER_SAMPLE) * activation_scale
                             if graphs else 0.0),
        env_gb=(0.0 if train.dexrl_env else memory.LIBERO_ENV_GB * -(-envs // env_ranks)),
        actor_offload=s.actor.enable_offload is True,
        rollout_offload=s.rollout.enable_offload is True,
        overhead_gb=0.0 if facts.cpu_only else memory.WORKER_OVERHEAD_GB)
    plan.memory = memory.estimate(inputs, plan.placement, facts.gpus_per_node)
    plan.memory_gb_per_gpu = {key: gpu.peak_gb for key, gpu in plan.memory.items()}
    plan.offload_gb = memory.offload_gb(inputs)
    return plan


def saves_between(start: int, end: int, interval: int) -> int:
    """Checkpoints a run writes after step ``start`` up to step ``end``: every ``interval``
    steps and at the last step (none when ``interval`` ≤ 0)."""
    if interval <= 0 or end <= start:
        return 0
    return end // interval - start // interval + (1 if end % interval else 0)


def scored_passes(cfg: DictConfig | Settings) -> int:
    """Denoising passes a training micro-batch runs with a graph: every stochastic step with
    ``actor.model.joint_logprob`` (all but the last with ``ignore_last``), else one."""
    model = settings_of(cfg).actor.model
    if model.joint_logprob is not True:
        return 1
    steps = int(model.num_steps or 1)
    return max(1, steps - int(model.ignore_last is True))


def _prefix_cache_plan(dexbotic: Dexbotic, need_gb: float, update_epochs: int
                       ) -> PrefixCachePlan:
    device = min(need_gb, float(given(dexbotic.prefix_cache.device_gb, 0.0)))
    host = min(need_gb - device, float(given(dexbotic.prefix_cache.host_gb, 0.0)))
    return PrefixCachePlan(need_gb, device, host, update_epochs)


def render_prefix_cache(cache: PrefixCachePlan | None) -> list[str]:
    """The prefix cache lines of the plan (none without ``train_expert_only``)."""
    if cache is None:
        return []
    passes = cache.passes
    return [f"Training prefix cache per actor rank: ≈{size_text(cache.need_gb)} for all "
            f"samples; ≈{size_text(cache.device_gb)} on the GPU, "
            f"≈{size_text(cache.host_gb)} pinned on the host",
            f"  {cache.cached_fraction:.0%} of samples computed once; ≈{passes:.2f} prefix "
            f"passes per sample per global step (recomputing: {cache.update_epochs})"]


def render_plan(plan: Plan, gpus_per_node: int) -> list[str]:
    """The plan as lines of text."""
    lines = ["Placement (node:gpu):"]
    for comp, gpus in plan.placement.items():
        ids = ", ".join(f"{n}:{g}" for n, g in gpus)
        lines.append(f"  {comp:<8} {len(gpus)} rank(s) on {ids}")
    lines += ["Per node (RLINF_NODE_RANK):", *(f"  {line}" for line in
                                                render_by_node(plan.placement))]
    lines += [
        f"Mode: {plan.mode_text}",
        f"Algorithm: {plan.algorithm_text}",
        f"Global steps: {plan.global_steps} ({plan.steps_from})",
        "Per global step:",
        f"  env steps        {plan.env_steps:,}",
        f"  policy calls     {plan.policy_calls:,} (rollout batches, incl. bootstrap values)",
        f"  training samples {plan.samples:,} (action chunks)",
        f"  optimizer steps  {plan.optimizer_steps:g}",
        f"  micro-batches    {plan.micro_batches_per_rank:g} per actor rank",
        f"Model: ≈{_count(plan.params)} parameters, ≈{_count(plan.trainable)} trainable",
        *render_prefix_cache(plan.prefix_cache),
        f"Attention: {plan.attention}" + (" (GPU lever, not yet measured on a GPU)"
                                          if plan.attention != "eager" else
                                          " (reference; sdpa: GPU lever, default off)"),
        f"Rollout calls: {plan.rollout_speed}",
        f"Checkpoints: ≈{size_text(plan.checkpoint_gb)} each, {plan.saves} save(s) → "
        f"≈{size_text(plan.checkpoint_gb * plan.saves)} of disk",
        "Memory estimate per GPU (all its processes, GB; docs/performance.md#the-memory-"
        "estimate):",
    ]
    for key, gpu in sorted(plan.memory.items()):
        lines.append(f"  {key // gpus_per_node}:{key % gpus_per_node}  {memory.render_gpu(gpu)}")
    moved = plan_moves(plan)
    if moved:
        lines.append("Moved off the GPU, per global step (transfer times assumed, not measured):")
        lines += [f"  {what}: ≈{gb:.0f} GB, ≈{seconds:.1f} s" for what, gb, seconds in moved]
    return lines


def plan_moves(plan: Plan) -> list[tuple[str, float, float]]:
    """What the plan's levers move between GPU and host each global step (memory.moves)."""
    cache = plan.prefix_cache
    return memory.moves(plan.offload_gb, cache.host_gb if cache else 0.0,
                        cache.update_epochs if cache else 1)


def plan_record(plan: Plan, gpus_per_node: int) -> dict[str, Any]:
    """The numbers :func:`render_plan` prints, as data (``train --dry-run --json``); sizes in
    GB (10⁹ bytes), unrounded."""
    cache = plan.prefix_cache
    return {
        "placement": {comp: [{"node": n, "gpu": g} for n, g in gpus]
                      for comp, gpus in plan.placement.items()},
        "mode": plan.mode,
        "algorithm": plan.algorithm,
        "algorithm_text": plan.algorithm_text,
        "per_node": [{"node": node, "ranks": comps}
                     for node, comps in by_node(plan.placement).items()],
        "per_global_step": {"env_steps": plan.env_steps, "policy_calls": plan.policy_calls,
                            "training_samples": plan.samples,
                            "optimizer_steps": plan.optimizer_steps,
                            "micro_batches_per_actor_rank": plan.micro_batches_per_rank},
        "model": {"parameters": int(plan.params), "trainable": int(plan.trainable)},
        "prefix_cache": None if cache is None else {
            "need_gb": cache.need_gb, "device_gb": cache.device_gb, "host_gb": cache.host_gb,
            "cached_fraction": cache.cached_fraction, "passes_per_sample": cache.passes,
            "update_epochs": cache.update_epochs},
        "attention": plan.attention,
        "rollout_calls": plan.rollout_speed,
        "checkpoints": {"gb_each": plan.checkpoint_gb, "saves": plan.saves,
                        "gb_total": plan.checkpoint_gb * plan.saves},
        "memory_gb_per_gpu": [{"node": key // gpus_per_node, "gpu": key % gpus_per_node,
                               "gb": gpu.peak_gb, **memory.gpu_record(gpu)}
                              for key, gpu in sorted(plan.memory.items())],
        "moved_per_global_step": [{"what": what, "gb": gb, "seconds": seconds}
                                  for what, gb, seconds in plan_moves(plan)],
    }


def rollout_speed(cfg: DictConfig | Settings) -> str:
    """How the rollout calls run: eager, compiled (with its mode) and/or CUDA-graphed."""
    rollout = settings_of(cfg).rollout
    parts = []
    if rollout.enable_torch_compile is True:
        mode = given(rollout.torch_compile_mode, "max-autotune-no-cudagraphs")
        parts.append(f"compiled ({mode}; one compilation per batch size)")
    if rollout.enable_cuda_graph is True:
        parts.append("CUDA-graphed (one graph per batch size; the graphs hold their "
                     "activations' memory)")
    return " + ".join(parts) if parts else ("eager (rollout.enable_torch_compile and "
                                           "rollout.enable_cuda_graph: off)")


def _count(n: float) -> str:
    """A parameter count in B, M or k (a tiny --smoke model is not "0.00 B")."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f}"


def size_text(gb: float) -> str:
    """A size given in GB, in the unit that reads best."""
    return size(gb * GB)
