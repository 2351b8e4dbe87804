"""RLinf policy adapter for dexrl's Dexbotic DM0 (RLinf ``model_type: dexbotic_dm0``).

:func:`build` is the builder :mod:`dexrl.bridge.registry` registers in place of RLinf's built-in
``dexbotic_dm0`` (which needs the ``dexbotic`` package); it returns a :class:`Dm0RLPolicy`, the
shared :class:`~dexrl.bridge.flow_policy.FlowRLPolicy` on a loaded DM0. What differs from π0:

- FSDP units are the Qwen3 MLPs and the PE residual blocks (``Dm0Network._no_split_modules``)
  plus every RMSNorm (``Dm0RMSNorm``, see below).
- ``train_expert_only`` freezes the PE tower with its two downsampling convs, the projector and
  the LLM; DM0 has no state projection, so the expert, the action/time projections and the value
  head train. The state still enters ``forward_inputs``: it turns delta actions into absolute ones.
- ``actor.model.dexbotic.model_max_length`` sets the prompt length (Dexbotic trains DM0 with 200
  tokens; a checkpoint's ``tokenizer_config.json`` may record a longer one, which only costs
  compute since padding is masked).
- Images are kept at the PE tower's size (728 px: ≈3.2 MB of uint8 per sample for two views).

**bf16.** The loader keeps the vision stem, position embedding and RMSNorms in float32 (DM0's
mixed-precision rule). FSDP2 requires one original dtype among the trainable parameters of a unit,
and the expert's fp32 norms would share the root unit with its bf16 projections, so each RMSNorm
is a unit of its own. FSDP2's ``param_dtype`` bf16 still computes those fp32 weights in bf16 in
the actor while the rollout (no FSDP) uses fp32, so in bf16 the first PPO ratio is only close to 1
(exactly 1 in fp32, as for π0). Full fine-tuning (``train_expert_only: false``) in bf16 cannot be
sharded this way: the PE tower's fp32 position embedding and bf16 CLS token are direct parameters
of one module; ``dexrl validate`` rejects that combination.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from dexrl.bridge.flow_policy import FlowRLPolicy
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.policy import Dm0Policy


class Dm0RLPolicy(FlowRLPolicy):
    """DM0 with a value head, serving RLinf's rollout and PPO training calls.

    Args:
        policy: A loaded DM0 (network, tokenizer, image preprocessing, norm stats).
        settings: RL settings (see :class:`~dexrl.bridge.rl_steps.RLSettings`).
    """

    model_type = "dexbotic_dm0"
    # The network's units, plus the RMSNorms: in bf16 they are the only fp32 trainable weights
    # (the expert's), and FSDP2 rejects a unit whose trainable parameters mix dtypes.
    _no_split_modules = [*Dm0Network._no_split_modules, "Dm0RMSNorm"]
    policy_class = Dm0Policy

    @property
    def dm0(self) -> Dm0Policy:
        """The wrapped inference policy."""
        return self.flow


def build(cfg: Mapping[str, Any], torch_dtype: torch.dtype | None = None) -> Dm0RLPolicy:
    """RLinf builder for ``dexbotic_dm0`` (see :meth:`FlowRLPolicy.from_model_cfg`).

    Raises:
        DexrlError: ``model_path`` unset or not a DM0 checkpoint, or an invalid setting.
    """
    return Dm0RLPolicy.from_model_cfg(cfg, torch_dtype)


__all__ = ["Dm0RLPolicy", "build"]
