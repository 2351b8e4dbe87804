"""RLinf's PPO iteration in one process (:mod:`helpers.local_ppo`): the pieces the learning
check relies on."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.learning_task import learning_config
from helpers.local_ppo import LocalPPO, RolloutStep, rollout_batch


@pytest.fixture(scope="module")
def ppo(tiny_pi0_dir: Path) -> LocalPPO:
    return LocalPPO(learning_config("libero_spatial_ppo_dexbotic_pi0", str(tiny_pi0_dir), 4, 1e-3))


def test_weight_sync_copies_the_actor_into_a_separate_rollout_policy(ppo: LocalPPO) -> None:
    rollout = dict(ppo.rollout.named_parameters())
    actor = dict(ppo.actor.named_parameters())
    assert ppo.rollout is not ppo.actor
    assert all(rollout[n].data_ptr() != p.data_ptr() for n, p in actor.items())
    with torch.no_grad():
        for p in actor.values():
            if p.requires_grad:
                p.add_(0.01)
    changed = [n for n, p in actor.items() if not torch.equal(p, rollout[n])]
    assert "value_head.weight" in changed and "model.action_out_proj.weight" in changed
    ppo.sync_weights()
    assert all(torch.equal(p, rollout[n]) for n, p in actor.items())


def test_rollout_batch_has_rlinfs_layout(ppo: LocalPPO) -> None:
    from helpers.learning_task import ContextualTarget

    task = ContextualTarget(torch.zeros(7), torch.ones(7), image_size=16)
    contexts = torch.tensor([0, 1, 1, 0])
    actions, result = ppo.act(task.observations(contexts))
    rewards = task.rewards(actions, contexts)
    done = torch.zeros_like(rewards, dtype=torch.bool)
    batch = rollout_batch([RolloutStep(result, rewards, done),
                           RolloutStep(result, rewards, done | True)])
    assert batch["rewards"].shape == (2, 4, 5) and batch["dones"].shape == (3, 4, 5)
    assert batch["prev_values"].shape == (3, 4, 1) and not batch["dones"][0].any()
    assert batch["forward_inputs"]["chains_bits"].shape[:2] == (2, 4)
    with pytest.raises(ValueError, match="must end"):
        rollout_batch([RolloutStep(result, rewards, done)])


def test_a_training_round_computes_each_prefix_once(ppo: LocalPPO) -> None:
    """RLinf's order (step hook, epochs of micro-batches, end of round) with the shipped
    update_epoch: one prefix pass per sample, the other epochs reuse it, the round frees it."""
    from helpers.learning_task import ContextualTarget

    task = ContextualTarget(torch.zeros(7), torch.ones(7), image_size=16)
    contexts = torch.tensor([0, 1, 1, 0])
    actions, result = ppo.act(task.observations(contexts))
    rewards = task.rewards(actions, contexts)
    store = ppo.actor.prefix_store
    computed, reused = store.computed_rows, store.reused_rows
    ppo.train([RolloutStep(result, rewards, torch.ones_like(rewards, dtype=torch.bool))],
              torch.Generator().manual_seed(0))
    epochs = ppo.cfg.algorithm.update_epoch
    assert epochs > 1
    assert (store.computed_rows - computed, store.reused_rows - reused) == (4, 4 * (epochs - 1))
    assert len(store) == 0
