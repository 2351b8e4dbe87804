"""RLinf policy adapter for dexrl's Dexbotic DM0 (RLinf ``model_type: dexbotic_dm0``).

Design notes: docs/design/policy-adapters.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.models.dm0.network import Dm0Network
from dexrl.models.dm0.policy import Dm0Policy


class Dm0RLPolicy(FlowRLPolicy):
    """DM0 with a value head, serving RLinf's rollout and PPO training calls.

    Args:
        policy: A loaded DM0 (network, tokenizer, image preprocessing, norm stats).
        settings: RL settings (see :class:`~dexrl.bridge.policies.chain.RLSettings`).
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
