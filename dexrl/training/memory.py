"""The per-GPU memory estimate of a launch: every process on the GPU, phase by phase.

Each worker (an actor, rollout or env rank) on a GPU holds its **overhead** (CUDA context,
allocator slack, communication buffers) always, its **resident** memory (weights, the actor's
gradients and optimizer state) unless RLinf offloads it between phases (``actor.enable_offload``,
``rollout.enable_offload``), and its **working** memory (activations, the prefix cache, CUDA
graphs), which torch's caching allocator keeps reserved after the phase unless the offload
empties it. A synchronous step has two phases: the rollout (env and rollout active) and
training (actor active); the GPU's peak is the larger. Terms and their basis:
docs/performance.md#the-memory-estimate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

GB = 1e9
# Fitted to the one whole-run peak measured (H100, real-size π0 in bf16 on the reach task, all
# workers on one GPU, micro-batch 16, 32 envs: 23,625-24,001 MiB by nvidia-smi): what the
# terms below leave over, split evenly over the three worker processes.
WORKER_OVERHEAD_GB = 2.3
# Without a model's own figures (ModelSpec.memory_gb_per_sample): a training micro-batch of 32
# with a frozen prefix ≈ 5 GB, full fine-tuning without checkpointing ≈ 40 GB.
TRAIN_GB_PER_SAMPLE = 5.0 / 32
FULL_FT_TRAIN_GB_PER_SAMPLE = 40.0 / 32
ROLLOUT_GB_PER_SAMPLE = 0.05
GRAPH_GB_PER_SAMPLE = 0.35
LIBERO_ENV_GB = 0.25  # EGL context and frame buffers per LIBERO env (not measured)
PHASES = ("rollout", "training")
ACTIVE = {"actor": "training", "rollout": "rollout", "env": "both"}


@dataclass(frozen=True)
class WorkerMemory:
    """One worker rank's share of a GPU, in GB."""

    role: str  # actor, rollout or env
    resident: float
    working: float
    offloaded: bool = False  # resident and working memory leave the GPU outside its phase
    overhead: float = WORKER_OVERHEAD_GB

    def in_phase(self, phase: str) -> float:
        """What the worker holds on the GPU during ``phase``."""
        active = ACTIVE[self.role] in (phase, "both")
        if self.offloaded and not active:
            return self.overhead
        return self.overhead + self.resident + self.working


@dataclass
class GpuMemory:
    """The estimate of one GPU: its workers and the peak of each phase."""

    workers: list[WorkerMemory] = field(default_factory=list)

    def phase_gb(self, phase: str) -> float:
        return sum(w.in_phase(phase) for w in self.workers)

    @property
    def peak_gb(self) -> float:
        return max((self.phase_gb(p) for p in PHASES), default=0.0)

    @property
    def peak_phase(self) -> str:
        return max(PHASES, key=self.phase_gb)


@dataclass(frozen=True)
class MemoryInputs:
    """What the estimate needs from the plan (sizes in parameters, GB or samples).

    Attributes:
        params: Parameters of the model.
        trainable: Of which trained (gradients and Adam's two moments).
        weight_bytes: Bytes per parameter (2 in bf16/fp16, else 4); gradients and optimizer
            moments take the parameters' dtype.
        actor_ranks: FSDP ranks the actor's weights and optimizer state are sharded over.
        micro_batch: ``actor.micro_batch_size``.
        train_gb_per_sample: Activations of one training sample (scored passes included).
        cache_device_gb: The prefix cache an actor rank keeps on the GPU.
        rollout_batch: Samples of one rollout call on a rollout rank.
        rollout_gb_per_sample: Activations of one rollout sample.
        graph_gb_per_sample: CUDA graphs' private pool per sample (0: no graphs).
        env_gb: GPU memory of an env rank's envs (EGL contexts), 0 for CPU envs.
        actor_offload: ``actor.enable_offload``.
        rollout_offload: ``rollout.enable_offload``.
        overhead_gb: Each worker's CUDA context and allocator slack.
    """

    params: float
    trainable: float
    weight_bytes: int
    actor_ranks: int
    micro_batch: int
    train_gb_per_sample: float
    cache_device_gb: float
    rollout_batch: int
    rollout_gb_per_sample: float
    graph_gb_per_sample: float
    env_gb: float
    actor_offload: bool
    rollout_offload: bool
    overhead_gb: float = WORKER_OVERHEAD_GB  # 0 on the CPU (--smoke): no CUDA context

    def worker(self, role: str) -> WorkerMemory:
        """The memory of one rank of ``role``."""
        if role == "actor":
            state = self.weight_bytes * (self.params + 3 * self.trainable) / self.actor_ranks
            working = self.train_gb_per_sample * self.micro_batch + self.cache_device_gb
            return WorkerMemory(role, state / GB, working, self.actor_offload, self.overhead_gb)
        if role == "rollout":
            per_sample = self.rollout_gb_per_sample + self.graph_gb_per_sample
            return WorkerMemory(role, self.weight_bytes * self.params / GB,
                                per_sample * self.rollout_batch, self.rollout_offload,
                                self.overhead_gb)
        return WorkerMemory(role, 0.0, self.env_gb, overhead=self.overhead_gb)


def estimate(inputs: MemoryInputs, placement: dict[str, list[tuple[int, int]]],
             gpus_per_node: int) -> dict[int, GpuMemory]:
    """GPU index (node × GPUs per node + GPU) -> its :class:`GpuMemory`."""
    gpus: dict[int, GpuMemory] = {}
    for role, slots in placement.items():
        if role not in ACTIVE:
            continue
        for node, gpu in slots:
            key = node * max(gpus_per_node, 1) + gpu
            gpus.setdefault(key, GpuMemory()).workers.append(inputs.worker(role))
    return dict(sorted(gpus.items()))


def offload_gb(inputs: MemoryInputs) -> dict[str, float]:
    """GB each offloading worker moves to the host and back every global step."""
    out = {}
    if inputs.actor_offload:
        out["actor"] = inputs.worker("actor").resident
    if inputs.rollout_offload:
        out["rollout"] = inputs.worker("rollout").resident
    return out


# Host-device copies (not measured on dexrl's machines: PCIe 4.0 ×16 figures). RLinf's offload
# moves pageable memory (`.to("cpu")`); the prefix cache's host tier is pinned.
PAGEABLE_GB_S = 10.0
PINNED_GB_S = 20.0


def moves(offloaded: dict[str, float], cache_host_gb: float, update_epochs: int
          ) -> list[tuple[str, float, float]]:
    """(what moves where, GB per global step, seconds per global step) of a plan's levers."""
    out = []
    names = {"actor": "actor weights, gradients and optimizer state",
             "rollout": "rollout weights"}
    for role, gb in offloaded.items():
        out.append((f"{names[role]} ≈{gb:.1f} GB to the host between phases and back "
                    f"({role}.enable_offload)", 2 * gb, 2 * gb / PAGEABLE_GB_S))
    if cache_host_gb:
        out.append((f"prefix cache ≈{cache_host_gb:.1f} GB pinned on the host, copied to the GPU "
                    f"in each of {update_epochs} PPO epochs", cache_host_gb * update_epochs,
                    cache_host_gb * update_epochs / PINNED_GB_S))
    return out


def render_gpu(gpu: GpuMemory) -> str:
    """One GPU's peak, its phase and the workers' shares of that phase."""
    phase = gpu.peak_phase
    other = next(p for p in PHASES if p != phase)
    shares = ", ".join(f"{w.role} ≈{w.in_phase(phase):.1f}" for w in gpu.workers)
    if abs(gpu.phase_gb(other) - gpu.peak_gb) < 0.05:  # nothing offloaded: all held throughout
        return f"≈{gpu.peak_gb:.1f} GB in both phases ({shares})"
    return (f"≈{gpu.peak_gb:.1f} GB in the {phase} phase ({shares}); {other} phase "
            f"≈{gpu.phase_gb(other):.1f} GB")


def gpu_record(gpu: GpuMemory) -> dict[str, object]:
    """:func:`render_gpu` as data (GB)."""
    return {"peak_phase": gpu.peak_phase,
            "phases_gb": {p: gpu.phase_gb(p) for p in PHASES},
            "workers": [{"role": w.role, "resident_gb": w.resident, "working_gb": w.working,
                         "overhead_gb": w.overhead, "offloaded": w.offloaded}
                        for w in gpu.workers]}
