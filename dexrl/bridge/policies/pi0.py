"""RLinf policy adapter for dexrl's Dexbotic π0 (RLinf ``model_type: dexbotic_pi0``).

:func:`build` is the builder :mod:`dexrl.bridge.registry` registers; it returns a
:class:`Pi0RLPolicy`, the shared :class:`~dexrl.bridge.policies.flow.FlowRLPolicy` (rollout and
training calls, freezing, forward inputs: see there) on a loaded π0. π0's FSDP units are the
Gemma MLPs and the SigLIP layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from dexrl.bridge.policies.flow import EVAL_NOISE_SEED, FlowRLPolicy
from dexrl.models.pi0.network import Pi0Network
from dexrl.models.pi0.policy import Pi0Policy


class Pi0RLPolicy(FlowRLPolicy):
    """π0 with a value head, serving RLinf's rollout and PPO training calls.

    Args:
        policy: A loaded π0 (network, tokenizer, image preprocessing, norm stats).
        settings: RL settings (see :class:`~dexrl.bridge.policies.chain.RLSettings`).
    """

    model_type = "dexbotic_pi0"
    _no_split_modules = Pi0Network._no_split_modules
    policy_class = Pi0Policy

    @property
    def pi0(self) -> Pi0Policy:
        """The wrapped inference policy."""
        return self.flow


def build(cfg: Mapping[str, Any], torch_dtype: torch.dtype | None = None) -> Pi0RLPolicy:
    """RLinf builder for ``dexbotic_pi0`` (see :meth:`FlowRLPolicy.from_model_cfg`).

    Raises:
        DexrlError: ``model_path`` unset or not a π0 checkpoint, or an invalid setting.
    """
    return Pi0RLPolicy.from_model_cfg(cfg, torch_dtype)


__all__ = ["EVAL_NOISE_SEED", "Pi0RLPolicy", "build"]
