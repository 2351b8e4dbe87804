"""RLinf's embodied PPO iteration in one process, without Ray: for checks that training moves a
dexrl policy the right way (the learning check, tests/helpers/learning_task.py).

Design notes: docs/design/learning-checks.md.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, open_dict
from torch import nn

from dexrl.bridge import registry
from dexrl.bridge.policies.prefix_cache import release_prefix_cache

# The per-step arrays RLinf's rollout records that have one more entry than there are chunk
# steps (the state after the last one); run_training drops that entry before flattening.
_BOOTSTRAPPED = ("dones", "prev_values")


@dataclass
class RolloutStep:
    """One policy call of a rollout and what the environment returned for it.

    Attributes:
        result: ``predict_action_batch``'s dict (``prev_logprobs``, ``prev_values``,
            ``forward_inputs``).
        rewards: float32 [envs, num_action_chunks], per executed action.
        dones: bool [envs, num_action_chunks], episode ends after each executed action.
    """

    result: Mapping[str, Any]
    rewards: torch.Tensor
    dones: torch.Tensor


class LocalPPO:
    """An actor policy, its optimizer, a separate rollout policy and the weight sync between them.

    Args:
        cfg: A composed training config (``actor``, ``rollout``, ``algorithm``, ``weight_syncer``
            with ``type: bucket``).
    """

    def __init__(self, cfg: DictConfig) -> None:
        from rlinf.hybrid_engines.weight_syncer import WeightSyncer
        from rlinf.models import get_model
        from rlinf.utils.utils import collect_param_names_need_sync

        if cfg.algorithm.entropy_bonus > 0:
            raise ValueError("algorithm.entropy_bonus > 0 is not mirrored here")
        registry.register()
        self.cfg = cfg
        self.actor = get_model(cfg.actor.model)
        rollout_cfg = copy.deepcopy(cfg.actor.model)
        with open_dict(rollout_cfg):
            rollout_cfg.precision = cfg.rollout.model.precision
            rollout_cfg.model_path = cfg.rollout.model.model_path
        self.rollout = get_model(rollout_cfg)
        self.rollout.eval()
        self.optimizer = build_optimizer(self.actor, cfg.actor.optim)
        syncer_cfg = copy.deepcopy(cfg.weight_syncer)
        with open_dict(syncer_cfg):
            syncer_cfg.bucket.bucket_device = "cpu"  # RLinf's default is the worker's device
        self.syncer = WeightSyncer.create(syncer_cfg)
        self._sync_names = collect_param_names_need_sync(self.actor)
        self.version = 0

    def sync_weights(self) -> None:
        """Copy the actor's weights into the rollout policy through RLinf's weight syncer."""
        asyncio.run(self._sync())

    async def _sync(self) -> None:
        channel: asyncio.Queue[dict[str, torch.Tensor]] = asyncio.Queue()
        state = self.actor.state_dict()
        if not self.syncer.sender_initialized():
            await self.syncer.init_sender(state_dict=state, send=channel.put, recv=None,
                                          param_names_need_sync=self._sync_names)
        await self.syncer.sync(state, channel.put, version=self.version)
        await self.syncer.apply(self.rollout, channel.get)

    def act(self, env_obs: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        """One rollout call of the rollout policy (sampling, as for training rollouts)."""
        return self.rollout.predict_action_batch(env_obs=env_obs, mode="train")

    def train(self, steps: Sequence[RolloutStep], generator: torch.Generator,
              zero_advantages: bool = False) -> dict[str, float]:
        """Advantages and one training round on a finished rollout; returns the mean metrics.

        ``steps`` hold the chunk steps of every env in order; every episode must end with the last
        one (its bootstrap value is then masked, so none is computed). ``zero_advantages`` makes
        a control that cannot learn: everything runs, the value head trains, but the policy loss
        has no signal.
        """
        batch = rollout_batch(steps)
        batch.update(self.advantages(batch))
        if zero_advantages:
            batch["advantages"] = torch.zeros_like(batch["advantages"])
        if hasattr(self.actor, "set_global_step"):  # EmbodiedRunner.run, at each step's start
            self.actor.set_global_step(self.version)
        try:
            metrics = self.run_training(batch, generator)
        finally:
            release_prefix_cache(self.actor)  # DexrlActor.run_training
        self.version += 1
        return metrics

    def advantages(self, batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """``advantages`` and ``returns`` as RLinf's embodied actor computes them."""
        from rlinf.algorithms.registry import calculate_adv_and_returns
        from rlinf.utils.metric_utils import compute_loss_mask

        algorithm = self.cfg.algorithm
        loss_mask = None
        if algorithm.adv_type != "gae":  # GRPO needs the episode mask RLinf's actor computes
            loss_mask, _ = compute_loss_mask(batch["dones"])
            if algorithm.reward_type == "chunk_level":
                loss_mask = loss_mask.any(dim=-1, keepdim=True)
        return calculate_adv_and_returns(
            task_type="embodied",
            adv_type=algorithm.adv_type,
            rewards=batch["rewards"],
            dones=batch["dones"],
            values=batch.get("prev_values"),
            gamma=algorithm.get("gamma", 1),
            gae_lambda=algorithm.get("gae_lambda", 1),
            group_size=algorithm.get("group_size", 8),
            reward_type=algorithm.reward_type,
            loss_mask=loss_mask,
            loss_mask_sum=None,
        )

    def run_training(self, batch: Mapping[str, Any], generator: torch.Generator
                     ) -> dict[str, float]:
        """``run_training``'s update loop on one process; returns the mean of RLinf's metrics."""
        from rlinf.utils.nested_dict_process import split_dict_to_chunk

        actor_cfg = self.cfg.actor
        flat = _flatten(batch, torch.randperm(batch["prev_logprobs"].shape[0]
                                              * batch["prev_logprobs"].shape[1],
                                              generator=generator))
        size = flat["prev_logprobs"].shape[0]
        if size % actor_cfg.global_batch_size or actor_cfg.global_batch_size % \
                actor_cfg.micro_batch_size:
            raise ValueError(f"{size} samples do not split into global batches of "
                             f"{actor_cfg.global_batch_size} and micro-batches of "
                             f"{actor_cfg.micro_batch_size}")
        accumulation = actor_cfg.global_batch_size // actor_cfg.micro_batch_size
        self.actor.train()
        metrics: dict[str, list[float]] = {}
        for _ in range(self.cfg.algorithm.get("update_epoch", 1)):
            for global_batch in split_dict_to_chunk(flat, size // actor_cfg.global_batch_size):
                self.optimizer.zero_grad()
                for micro in split_dict_to_chunk(global_batch, accumulation):
                    loss, step_metrics = self._loss(micro)
                    (loss / accumulation).backward()
                    _append(metrics, step_metrics)
                trainable = [p for p in self.actor.parameters() if p.requires_grad]
                grad_norm = nn.utils.clip_grad_norm_(trainable, actor_cfg.optim.clip_grad)
                self.optimizer.step()
                _append(metrics, {"actor/grad_norm": grad_norm})
        return {k: sum(v) / len(v) for k, v in metrics.items()}

    def _loss(self, micro: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        from rlinf.algorithms.registry import policy_loss

        algorithm = self.cfg.algorithm
        out = self.actor(forward_inputs=micro["forward_inputs"], compute_logprobs=True,
                         compute_entropy=False,
                         compute_values=algorithm.adv_type == "gae", use_cache=False)
        loss, metrics = policy_loss(
            loss_type=algorithm.loss_type,
            logprob_type=algorithm.logprob_type,
            reward_type=algorithm.reward_type,
            single_action_dim=self.cfg.actor.model.get("action_dim", 7),
            logprobs=out["logprobs"],
            values=out.get("values"),
            old_logprobs=micro["prev_logprobs"],
            advantages=micro["advantages"],
            returns=micro.get("returns"),
            prev_values=micro.get("prev_values"),
            clip_ratio_high=algorithm.clip_ratio_high,
            clip_ratio_low=algorithm.clip_ratio_low,
            value_clip=algorithm.get("value_clip", None),
            huber_delta=algorithm.get("huber_delta", None),
            loss_mask=None,
            loss_mask_sum=None,
            max_episode_steps=self.cfg.env.train.max_episode_steps,
            task_type="embodied",
            critic_warmup=False,
        )
        return loss, metrics


def build_optimizer(model: nn.Module, optim: DictConfig) -> torch.optim.AdamW:
    """AdamW with RLinf's FSDP manager's groups: ``lr`` for the policy, ``value_lr`` for
    ``value_head``; only parameters that require gradients."""
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    betas = (optim.adam_beta1, optim.adam_beta2)
    groups = [
        {"params": [p for n, p in trainable if "value_head" not in n], "lr": optim.lr,
         "betas": betas},
        {"params": [p for n, p in trainable if "value_head" in n], "lr": optim.value_lr,
         "betas": betas},
    ]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=optim.lr, betas=betas,
                             eps=optim.get("adam_eps", 1e-8),
                             weight_decay=optim.get("weight_decay", 1e-2))


def rollout_batch(steps: Sequence[RolloutStep]) -> dict[str, Any]:
    """Stack rollout steps into RLinf's rollout batch: ``[T, envs, ...]`` per key, and
    ``[T + 1, envs, ...]`` for ``dones`` (no episode ends before the first step) and
    ``prev_values`` (the last entry, the bootstrap value, is zero: every episode has ended)."""
    first = steps[0]
    envs = first.rewards.shape[0]
    inputs = first.result["forward_inputs"]
    dones = [torch.zeros_like(first.dones), *(s.dones for s in steps)]
    if not bool(dones[-1][:, -1].all()):
        raise ValueError("every episode must end with the last rollout step")
    values = [s.result["prev_values"] for s in steps]
    return {
        "prev_logprobs": torch.stack([s.result["prev_logprobs"] for s in steps]),
        "prev_values": torch.stack([*values, torch.zeros(envs, 1)]),
        "rewards": torch.stack([s.rewards for s in steps]),
        "dones": torch.stack(dones),
        "forward_inputs": {k: torch.stack([s.result["forward_inputs"][k] for s in steps])
                           for k in inputs},
    }


def _flatten(batch: Mapping[str, Any], order: torch.Tensor) -> dict[str, Any]:
    """``[T(+1), envs, ...]`` -> ``[T * envs, ...]`` in ``order`` (RLinf's
    ``process_nested_dict_for_train``)."""
    flat: dict[str, Any] = {}
    for key, value in batch.items():
        if isinstance(value, Mapping):
            flat[key] = _flatten(value, order)
            continue
        if key in _BOOTSTRAPPED:
            value = value[:-1]
        flat[key] = value.reshape(-1, *value.shape[2:])[order]
    return flat


def _append(metrics: dict[str, list[float]], new: Mapping[str, Any]) -> None:
    for key, value in new.items():
        metrics.setdefault(key, []).append(float(value))


__all__ = ["LocalPPO", "RolloutStep", "build_optimizer", "rollout_batch"]
