"""A contextual task on which PPO must improve a policy, and a run of N PPO updates on it through
dexrl's adapter and RLinf's algorithm (:class:`helpers.local_ppo.LocalPPO`).

The learning check of ``make test`` (``tests/scenarios/test_learning.py``) uses it on the
tiny π0 and DM0 checkpoints; a control run with zeroed advantages cannot learn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

INSTRUCTIONS = ("open the top drawer of the cabinet", "put the bowl on the plate")
HALF_GAP = 0.5  # the contexts' targets lie this far on either side of the untrained policy's mean
# Value-head learning rate for the tiny checkpoints (the shipped 1e-4, like the policy's 5e-6, is
# for 3-billion-parameter models); everything else but the policy's rate is the shipped config.
TINY_VALUE_LR = 1e-2


@dataclass(frozen=True)
class ContextualTarget:
    """LIBERO-format observations whose context selects the target of the executed actions.

    A context (0 or 1) picks the instruction (:data:`INSTRUCTIONS`) and the main camera frame;
    the wrist frame and the state are the same for every sample. An episode is one action chunk,
    rewarded at its last action with minus the distance of the mean executed action, in
    normalized units ``(action - mean) / std`` of the checkpoint's norm stats and averaged over
    actions and dims, to the context's target. A policy that ignores its input scores at most
    :attr:`blind_bound` on balanced contexts (``|m - t0| + |m - t1| >= |t1 - t0|``), so only
    reading the context can pass it. :func:`run_ppo` puts the targets on either side of the
    untrained policy's mean, against the context preference it has by chance, so that it starts
    below the bound and moving its mean gains nothing.

    Attributes:
        action_mean: float32 [action_dim] of the env actions.
        action_std: float32 [action_dim].
        targets: The target of each context.
        image_size: Side of the (fixed, random) frames.
        seed: Seeds the frames.
        cut: Show every sample context 0's instruction and frame (the policy's inputs cut from
            the context), for the demonstration that the check then fails.
    """

    action_mean: torch.Tensor
    action_std: torch.Tensor
    targets: tuple[float, float] = (-HALF_GAP, HALF_GAP)
    image_size: int = 64
    seed: int = 0
    cut: bool = False

    @property
    def blind_bound(self) -> float:
        """The best mean reward of a policy that ignores its input."""
        return -abs(self.targets[1] - self.targets[0]) / 2

    def observations(self, contexts: torch.Tensor) -> dict[str, Any]:
        """Env observations for contexts long [B] (values 0/1)."""
        rng = np.random.default_rng(self.seed)
        shape = (self.image_size, self.image_size, 3)
        frames = rng.integers(0, 256, (len(self.targets) + 1, *shape), dtype=np.uint8)
        index = np.zeros_like(contexts.numpy()) if self.cut else contexts.numpy()
        return {
            "main_images": frames[index],
            "wrist_images": np.repeat(frames[-1:], len(index), axis=0),
            "states": torch.zeros(len(index), 8, dtype=torch.float64),
            "task_descriptions": [INSTRUCTIONS[i] for i in index],
        }

    def chunk_rewards(self, actions: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
        """Reward float32 [B] of env action chunks [B, chunks, dim]."""
        target = torch.tensor(self.targets)[contexts.long()]
        return -(self.normalized_means(actions) - target).abs()

    def normalized_means(self, actions: torch.Tensor) -> torch.Tensor:
        """Mean normalized action float32 [B] of env action chunks [B, chunks, dim]."""
        return ((actions - self.action_mean) / (self.action_std + 1e-6)).mean(dim=(1, 2))

    def rewards(self, actions: torch.Tensor, contexts: torch.Tensor) -> torch.Tensor:
        """Per executed action float32 [B, chunks]: the chunk's reward at its last action."""
        rewards = torch.zeros(actions.shape[:2])
        rewards[:, -1] = self.chunk_rewards(actions, contexts)
        return rewards


@dataclass
class LearningRun:
    """What a run of :func:`run_ppo` measured.

    Attributes:
        start: Mean chunk reward of the deterministic (ODE) policy before training, on a fixed
            set of contexts and initial noises.
        end: The same after the last update, through the rollout policy after the weight sync.
        blind_bound: The best score of a policy that ignores its input (below ``start``).
        rollout_rewards: Mean chunk reward of each update's training rollout.
        metrics: RLinf's mean training metrics of each update.
    """

    start: float
    end: float
    blind_bound: float
    rollout_rewards: list[float] = field(default_factory=list)
    metrics: list[dict[str, float]] = field(default_factory=list)

    @property
    def gain(self) -> float:
        """``end - start``."""
        return self.end - self.start


def learning_config(config_name: str, model_path: str, envs: int, lr: float,
                    overrides: Sequence[str] = ()) -> Any:
    """A shipped config for :func:`run_ppo` on a CPU: the checkpoint, fp32, the bucket weight
    syncer, one global batch of ``envs`` samples per update, the policy's learning rate ``lr``
    and :data:`TINY_VALUE_LR`, then ``overrides``. Algorithm, update epochs, clip ratios, value
    loss, noise method and denoising steps stay the shipped ones."""
    from omegaconf import OmegaConf

    from dexrl.config.compose import compose

    cfg = compose(config_name, [
        f"actor.model.model_path={model_path}", "actor.model.precision=fp32",
        "weight_syncer=bucket_syncer", f"actor.global_batch_size={envs}",
        f"actor.micro_batch_size={envs}", f"actor.optim.lr={lr}",
        f"actor.optim.value_lr={TINY_VALUE_LR}", *overrides,
    ])
    OmegaConf.resolve(cfg)
    return cfg


def run_ppo(cfg: Any, *, updates: int, envs: int, seed: int, control: bool = False,
            cut: bool = False, eval_size: int = 32) -> LearningRun:
    """Train on :class:`ContextualTarget` for ``updates`` PPO updates of one chunk step per env.

    Each update: the weight sync into the rollout policy, contexts drawn at random, a rollout
    call of the rollout policy, rewards, then RLinf's advantages and training round on the actor.
    With a grouped advantage (GRPO) each run of ``algorithm.group_size`` consecutive envs shares
    one context, as the envs of a group share one initial state.

    Args:
        cfg: From :func:`learning_config`.
        updates: PPO updates (global steps).
        envs: Episodes (samples) per update.
        seed: Seeds the model's RNG draws (value head excepted), contexts and shuffles.
        control: Zero the advantages, so that nothing can be learned (the rollouts, value
            training, optimizer steps and weight syncs still run).
        cut: Cut the policy's inputs from the context in training (:class:`ContextualTarget`).
        eval_size: Contexts (alternating) and initial noises of the start/end evaluation.
    """
    from helpers.local_ppo import LocalPPO, RolloutStep

    torch.manual_seed(seed)
    ppo = LocalPPO(cfg)
    stats = ppo.rollout.flow.norm_stats.action
    dim = cfg.actor.model.action_dim
    probe = ContextualTarget(torch.as_tensor(stats.mean[:dim], dtype=torch.float32),
                             torch.as_tensor(stats.std[:dim], dtype=torch.float32))
    task = dataclasses.replace(probe, targets=_against_preference(ppo, probe, eval_size))
    generator = torch.Generator().manual_seed(seed)
    run = LearningRun(_evaluate(ppo, task, eval_size), float("nan"), task.blind_bound)
    train_task = dataclasses.replace(task, cut=cut)
    group = int(cfg.algorithm.group_size) if cfg.algorithm.adv_type != "gae" else 1
    for _ in range(updates):
        ppo.sync_weights()  # as RLinf's runner does at the start of every global step
        contexts = torch.randint(0, 2, (envs // group,), generator=generator)
        contexts = contexts.repeat_interleave(group)
        actions, result = ppo.act(train_task.observations(contexts))
        rewards = task.rewards(actions, contexts)
        run.rollout_rewards.append(float(rewards[:, -1].mean()))
        dones = torch.zeros_like(rewards, dtype=torch.bool)
        dones[:, -1] = True
        run.metrics.append(ppo.train([RolloutStep(result, rewards, dones)], generator,
                                     zero_advantages=control))
    ppo.sync_weights()
    run.end = _evaluate(ppo, task, eval_size)
    return run


def _evaluate(ppo: Any, task: ContextualTarget, size: int) -> float:
    """Mean chunk reward of the rollout policy's ODE actions on fixed contexts and noises."""
    actions, contexts = _eval_actions(ppo, task, size)
    return float(task.chunk_rewards(actions, contexts).mean())


def _eval_actions(ppo: Any, task: ContextualTarget, size: int) -> tuple[torch.Tensor,
                                                                        torch.Tensor]:
    config = ppo.rollout.flow.network.config
    noise = torch.randn(size, config.chunk_size, config.action_dim,
                        generator=torch.Generator().manual_seed(0))
    contexts = torch.arange(size) % 2
    actions, _ = ppo.rollout.predict_action_batch(task.observations(contexts), mode="eval",
                                                  noise=noise)
    return actions, contexts


def _against_preference(ppo: Any, task: ContextualTarget, size: int) -> tuple[float, float]:
    """Targets :data:`HALF_GAP` on either side of the untrained policy's mean, the lower one for
    the context it already answers higher: it starts below the blind bound whatever the chance
    preference of its random weights, and only reading the context can pass the bound."""
    actions, contexts = _eval_actions(ppo, task, size)
    means = task.normalized_means(actions)
    centre = float(means.mean())
    higher = float(means[contexts == 1].mean()) > float(means[contexts == 0].mean())
    sign = -1.0 if higher else 1.0
    return centre - sign * HALF_GAP, centre + sign * HALF_GAP


__all__ = ["HALF_GAP", "INSTRUCTIONS", "ContextualTarget", "LearningRun", "learning_config",
           "run_ppo"]
