"""The learning check: PPO through dexrl's adapters and RLinf's own algorithm improves a policy.

Tiny π0 and DM0 train on :class:`~learning_task.ContextualTarget` exactly as RLinf's
actor and rollout workers run them (:class:`~dexrl.bridge.local_ppo.LocalPPO`): rollout calls of a
separate rollout policy, RLinf's GAE and actor-critic loss with the shipped config's clip ratios,
value clipping, Huber delta, update epochs, ``noise_method``, ``num_steps`` and
``detach_critic_input: true``, AdamW steps, and RLinf's bucket weight sync back into the rollout
policy. The reward is measured on the rollout policy, so stale weights after the sync, a wrong
sign of the chain's log-prob or of the advantage would all fail it (with the advantage's sign
flipped the gains are -0.134, -0.094 and -0.167 instead of +0.259, +0.052 and +0.112). In the
same test a control with zeroed advantages (rollouts, value training, optimizer steps and syncs
all run; nothing to learn) must not improve.

Both noise methods are covered on π0 (their maths is shared by both adapters,
:mod:`dexrl.bridge.rl_steps`); DM0 runs the shipped ``flow_sde``.

Seed-to-seed spread of the gain (end - start of the deterministic policy's mean reward after
``UPDATES`` updates of ``ENVS`` episodes; start -1.227 for π0, -1.068 for DM0; one thread):

====================  =====  =====  =====  =====  =====
run                   seeds  mean   sd     min    max
====================  =====  =====  =====  =====  =====
π0 flow_sde           0-6    0.252  0.124  0.114  0.469
π0 flow_cps           0-5    0.218  0.123  0.052  0.418
DM0 flow_sde          0-7    0.136  0.084  0.050  0.322
control               0-2    |gain| <= 0.0001 (π0 flow_sde, DM0 seeds 0-1; weight decay only)
====================  =====  =====  =====  =====  =====

``MARGIN`` = 0.02 lies below every training run's gain (smallest 0.050 of 21) and far above any
control's. (A control with the rewards shuffled across samples was tried first: its policy
drifts at random, and with this task's asymmetric targets a drift upwards pays, so its gains
ranged from -0.18 to +0.36 and overlapped the training runs.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from learning_task import learning_config, run_ppo

from dexrl.testing.dm0 import write_tiny_dm0

UPDATES = 30
ENVS = 32
SEED = 0
MARGIN = 0.02
# Policy learning rates for the tiny checkpoints (the shipped 5e-6 is for 3-billion-parameter
# models); DM0's tiny tower reacts less to its weights than π0's.
LR = {"pi0": 1e-3, "dm0": 3e-3}
# DM0's shipped prompt length is 200 tokens; the tiny prompts need 40 (padding is masked, so this
# only saves time).
OVERRIDES = {"pi0": [], "dm0": ["actor.model.dexbotic.model_max_length=48"]}


@pytest.fixture(scope="module")
def tiny_dm0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_dm0(tmp_path_factory.mktemp("tiny_dm0") / "ckpt", seed=0)


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Tensors this small run fastest on one thread, above all on a machine shared with others."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("model", "noise_method"),
                         [("pi0", "flow_sde"), ("pi0", "flow_cps"), ("dm0", "flow_sde")])
def test_ppo_improves_the_policy_and_a_control_does_not(
    request: pytest.FixtureRequest, one_thread: None, model: str, noise_method: str
) -> None:
    checkpoint = request.getfixturevalue(f"tiny_{model}_dir")
    cfg = learning_config(f"libero_spatial_ppo_dexbotic_{model}", str(checkpoint), ENVS,
                          LR[model], [f"actor.model.dexbotic.noise_method={noise_method}",
                                      *OVERRIDES[model]])
    assert cfg.actor.model.dexbotic.detach_critic_input  # the shipped configs' setting
    learned = run_ppo(cfg, updates=UPDATES, envs=ENVS, seed=SEED)
    control = run_ppo(cfg, updates=UPDATES, envs=ENVS, seed=SEED, control=True)

    assert learned.start == control.start
    summary = (f"start {learned.start:.3f}, after training {learned.end:.3f}, "
               f"control {control.end:.3f}, margin {MARGIN}")
    assert learned.gain > MARGIN, f"PPO did not improve the policy: {summary}"
    assert control.gain < MARGIN, f"the control improved, so the check proves nothing: {summary}"
    value_loss = [m["critic/value_loss"] for m in learned.metrics]
    assert value_loss[-1] < 0.5 * value_loss[0], "the value head did not learn"
