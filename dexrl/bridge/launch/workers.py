"""The worker and runner classes dexrl launches: RLinf's own, behind thin subclasses.

Design notes: docs/design/launch-and-supervision.md.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from dexrl.bridge.launch import cpu_platform
from dexrl.bridge.launch.grad_norm import reduce_grad_norm_over_shards
from dexrl.bridge.policies.prefix_cache import release_prefix_cache
from dexrl.config.modes import ASYNC, PIPELINE, SYNC
from dexrl.reach.env import ENVS
from dexrl.runs.layout import rlinf_step_dir

cpu_platform.install()

from omegaconf import OmegaConf, open_dict  # noqa: E402
from rlinf.runners import embodied_runner  # noqa: E402
from rlinf.runners.embodied_runner import EmbodiedRunner  # noqa: E402
from rlinf.utils.metric_logger import MetricLogger  # noqa: E402
from rlinf.workers.actor.fsdp_actor_worker import EmbodiedFSDPActor  # noqa: E402
from rlinf.workers.actor.fsdp_actor_worker_pipeline import PipelineEmbodiedFSDPActor  # noqa: E402
from rlinf.workers.env import env_worker  # noqa: E402
from rlinf.workers.env.env_worker import EnvWorker  # noqa: E402
from rlinf.workers.rollout.hf.huggingface_worker import MultiStepRolloutWorker  # noqa: E402

from dexrl.bridge.launch.async_workers import (  # noqa: E402
    AsyncEnvWorker,
    AsyncMultiStepRolloutWorker,
    AsyncPPOEmbodiedFSDPActor,
    AsyncPPOEmbodiedRunner,
    on_cpu_devices,
)


@contextlib.contextmanager
def replaced(module: Any, name: str, value: Any) -> Iterator[None]:
    """``module.name`` is ``value`` for the duration of the block: how dexrl steers one lookup
    inside an RLinf method it calls unchanged."""
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


class ActorHooks:
    """What dexrl adds to an RLinf FSDP actor (synchronous or async): launched from a module that
    prepares the worker process, clipping by the norm of the whole gradient
    (:func:`reduce_grad_norm_over_shards`), counting skipped updates and freeing the policy's
    training prefix cache after each training round."""

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        reduce_grad_norm_over_shards(self)
        self._updates = self._skipped = 0

    def optimizer_step(self) -> tuple[float, list[float]]:
        """RLinf's optimizer step, counted: RLinf skips it when the gradient norm is not finite
        (and only logs a warning), so the training metrics say how many it skipped."""
        grad_norm, lrs = super().optimizer_step()
        self._updates += 1
        self._skipped += not math.isfinite(float(grad_norm))
        return grad_norm, lrs

    def run_training(self, *args: Any, **kwargs: Any) -> Any:
        """RLinf's training round, its metrics with ``actor/updates`` and
        ``actor/updates_skipped`` (:mod:`dexrl.runs.divergence`); the prefix caches of its
        samples are dropped at its end (and, through RLinf's ``set_global_step`` hook, at the
        start of every global step). The pipeline actor takes its input channel here and nests
        its metrics under ``training_metrics``."""
        self._updates = self._skipped = 0
        try:
            metrics = super().run_training(*args, **kwargs)
        finally:
            release_prefix_cache(self.model)
        if isinstance(metrics, dict):
            nested = metrics.get("training_metrics")
            into = nested if isinstance(nested, dict) else metrics
            into["actor/updates"] = float(self._updates)
            into["actor/updates_skipped"] = float(self._skipped)
        return metrics


class DexrlActor(ActorHooks, EmbodiedFSDPActor):
    """RLinf's synchronous FSDP actor with dexrl's :class:`ActorHooks`."""


class DexrlPipelineActor(ActorHooks, PipelineEmbodiedFSDPActor):
    """RLinf's training-pipeline actor (``runner.use_training_pipeline``: it trains on each
    micro-batch as the env workers send it) with dexrl's :class:`ActorHooks`."""


class DexrlAsyncActor(ActorHooks, AsyncPPOEmbodiedFSDPActor):
    """RLinf's async PPO actor with dexrl's :class:`ActorHooks`.

    RLinf's async training round names ``cuda`` devices directly; on a node without an
    accelerator those lookups resolve to the CPU for the duration of the round
    (:func:`dexrl.bridge.launch.async_workers.on_cpu_devices`), the loop itself unchanged.
    """

    def run_training(self) -> Any:
        """RLinf's async training round (with :class:`ActorHooks`), on this node's device."""
        with on_cpu_devices():
            return super().run_training()


class RolloutHooks:
    """RLinf's Hugging Face multi-step rollout worker, launched the same way, with seeded noise.

    RLinf seeds the actor's shuffle (``actor.seed + rank``) but not the rollout process, so the
    policy's sampling noise came from an unseeded torch generator and two runs of one config saw
    different rollouts. The same seeding here makes a run reproducible from its config (a resumed
    run restarts the stream at the resume step).
    """

    def init_worker(self) -> None:
        """Seed the process's torch generators, then RLinf's own set-up."""
        import torch

        torch.manual_seed(int(self.cfg.actor.seed) + int(self._rank))
        super().init_worker()


class DexrlRollout(RolloutHooks, MultiStepRolloutWorker):
    """RLinf's synchronous rollout worker with dexrl's :class:`RolloutHooks`."""


class DexrlAsyncRollout(RolloutHooks, AsyncMultiStepRolloutWorker):
    """RLinf's long-running async rollout worker with dexrl's :class:`RolloutHooks`."""


class EnvHooks:
    """RLinf's environment worker, launched the same way, that can also serve dexrl's tasks.

    RLinf's env types are a closed enum, so a dexrl task keeps an RLinf ``env_type`` whose
    observation format and action handling it shares (``libero``) and names itself in
    ``dexrl_env``. RLinf's ``init_worker`` resolves each env config's class with its module's
    ``get_env_cls``, which imports that env type's stack (LIBERO, robosuite, MuJoCo); for the
    duration of that call a config with ``dexrl_env`` resolves to dexrl's class instead, so a
    task that renders nothing needs no renderer installed. Without that key nothing changes.
    """

    def init_worker(self) -> None:
        """RLinf's set-up, with dexrl's tasks resolved before RLinf's env stack is imported."""
        rlinf_get_env_cls = env_worker.get_env_cls

        def get_env_cls(env_type: str, env_cfg: Any = None) -> type:
            name = env_cfg.get("dexrl_env") if env_cfg is not None else None
            return dexrl_env_class(name) if name else rlinf_get_env_cls(env_type, env_cfg)

        with replaced(env_worker, "get_env_cls", get_env_cls):
            super().init_worker()


class DexrlEnv(EnvHooks, EnvWorker):
    """RLinf's synchronous environment worker with dexrl's :class:`EnvHooks`."""


class DexrlAsyncEnv(EnvHooks, AsyncEnvWorker):
    """RLinf's long-running async environment worker with dexrl's :class:`EnvHooks`."""


def dexrl_env_class(name: str) -> type:
    """The class of a dexrl task named in ``env.*.dexrl_env``."""
    if name not in ENVS:
        raise ValueError(f"unknown dexrl_env '{name}' (known: {', '.join(ENVS)})")
    return ENVS[name]


class RunListener(Protocol):
    """What :class:`DexrlRunner` reports, from the thread that runs RLinf's loop."""

    def workers_ready(self) -> None:
        """All worker groups finished ``init_worker`` (and loaded the resume checkpoint)."""

    def step_done(self, step: int, total: int, metrics: dict[str, Any]) -> None:
        """Global step ``step`` (1-based) of ``total`` finished with RLinf's logged metrics."""

    def checkpoint_saved(self, step: int, path: Path) -> None:
        """RLinf finished writing the checkpoint of global step ``step`` at ``path``."""


def checkpoint_path(cfg: Any, step: int) -> Path:
    """Where RLinf 0.3.0 saves global step ``step`` (under ``<log_path>/<experiment_name>``)."""
    return rlinf_step_dir(cfg.runner.logger.log_path, cfg.runner.logger.experiment_name, step)


def run_metric_logger(cfg: Any) -> MetricLogger:
    """RLinf's metric logger, with W&B and SwanLab runs named after the run folder.

    dexrl keeps ``runner.logger.experiment_name`` empty (RLinf puts checkpoints under
    ``<log_path>/<experiment_name>``), and RLinf names those runs by it; the logger alone gets a
    copy of the config that names the run. Paths follow ``log_path``, which stays as it is.
    """
    logger = cfg.runner.logger
    if logger.get("experiment_name"):
        return MetricLogger(cfg)
    named = copy.deepcopy(cfg)
    OmegaConf.set_readonly(named, False)
    with open_dict(named):
        named.runner.logger.experiment_name = Path(str(logger.log_path)).name
    return MetricLogger(named)


class RunnerHooks:
    """What dexrl adds to an RLinf embodied runner (synchronous or async): progress reported to a
    :class:`RunListener`, W&B and SwanLab runs named after the run folder
    (:func:`run_metric_logger`)."""

    def __init__(self, *args: Any, listener: RunListener, **kwargs: Any) -> None:
        self._listener = listener
        with replaced(embodied_runner, "MetricLogger", run_metric_logger):
            super().__init__(*args, **kwargs)

    def init_workers(self) -> None:
        """Start every worker group, then report."""
        super().init_workers()
        self._listener.workers_ready()

    def print_metrics_table_async(self, step: int, total_steps: int, start_time: float,
                                  metrics: dict, start_step: int = 0) -> None:
        """RLinf's end-of-step hook: keep its table, and report the same metrics."""
        super().print_metrics_table_async(step, total_steps, start_time, metrics, start_step)
        self._flush_tensorboard()
        self._listener.step_done(step + 1, total_steps, dict(metrics))

    def _flush_tensorboard(self) -> None:
        """Put the step's scalars on disk now (RLinf's writer flushes every 2 minutes), so the
        curves redrawn at the next checkpoint include it."""
        writer = getattr(self.metric_logger.logger.get("tensorboard"), "writer", None)
        if writer is not None:
            writer.flush()

    def _save_checkpoint(self) -> None:
        super()._save_checkpoint()
        # RLinf's save waits for every actor rank, so the checkpoint is complete here.
        step = self.global_step
        self._listener.checkpoint_saved(step, checkpoint_path(self.cfg, step))


class DexrlRunner(RunnerHooks, EmbodiedRunner):
    """RLinf's synchronous embodied runner with dexrl's :class:`RunnerHooks`."""


class DexrlAsyncRunner(RunnerHooks, AsyncPPOEmbodiedRunner):
    """RLinf's async PPO runner with dexrl's :class:`RunnerHooks`: RLinf logs a step's metrics
    before it saves that step's checkpoint, which the supervisor accepts in either order.

    RLinf logs the step's data staleness (``rollout/data_staleness_<d>/ratio``,
    ``rollout/discarded_unused_trajs``) but leaves it out of the metrics its end-of-step hook
    gets; they are kept as logged and reported with the step.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._staleness: dict[str, Any] = {}
        log = self.metric_logger.log

        def log_and_keep(data: dict, step: int, *rest: Any, **kw: Any) -> Any:
            self._staleness.update({k: v for k, v in data.items()
                                    if k.startswith(STALENESS_PREFIXES)})
            return log(data, step, *rest, **kw)

        self.metric_logger.log = log_and_keep

    def print_metrics_table_async(self, step: int, total_steps: int, start_time: float,
                                  metrics: dict, start_step: int = 0) -> None:
        """The step's metrics with its data staleness, then :class:`RunnerHooks`'s hook."""
        merged = {**self._staleness, **metrics}
        self._staleness = {}
        super().print_metrics_table_async(step, total_steps, start_time, merged, start_step)


STALENESS_PREFIXES = ("rollout/data_staleness_", "rollout/discarded_unused_trajs")


WORKERS = {
    SYNC: (DexrlActor, DexrlRollout, DexrlEnv, DexrlRunner),
    ASYNC: (DexrlAsyncActor, DexrlAsyncRollout, DexrlAsyncEnv, DexrlAsyncRunner),
    PIPELINE: (DexrlPipelineActor, DexrlRollout, DexrlEnv, DexrlRunner),
}
"""The worker and runner classes of each mode of :mod:`dexrl.config.modes` (its ``RUNNERS``
names the RLinf runner each runner class subclasses)."""
