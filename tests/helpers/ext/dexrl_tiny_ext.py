"""An RLinf extension module for bridge tests: dexrl's registrations plus a tiny state policy.

The policy (model type ``dexrl_tiny``) reads only LIBERO's 8-d robot state, so the pipeline can be
driven end to end in seconds of compute. Ray workers import this module by name, so the tests put
its folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
from rlinf.models.embodiment.base_policy import BasePolicy
from torch import nn
from torch.distributions import Normal

from dexrl.bridge import registry

TINY = "dexrl_tiny"
STATE_DIM = 8
# Failure injection for the supervision tests: "train" raises in the actor's training forward,
# "oom" raises CUDA's out-of-memory error there, "hang" blocks the rollout's first policy call.
FAIL_VAR = "DEXRL_TINY_FAIL"


class TinyBlock(nn.Module):
    """The FSDP unit (named in ``_no_split_modules``)."""

    def __init__(self, in_dim: int, hidden: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_dim, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(x))


class TinyPolicy(nn.Module, BasePolicy):
    """A Gaussian policy over flattened action chunks with a linear value head."""

    _no_split_modules = ["TinyBlock"]

    def __init__(self, action_dim: int, num_action_chunks: int, hidden: int = 16) -> None:
        super().__init__()
        self.action_dim, self.num_action_chunks = action_dim, num_action_chunks
        self.body = TinyBlock(STATE_DIM, hidden)
        self.mean = nn.Linear(hidden, action_dim * num_action_chunks)
        self.log_std = nn.Parameter(torch.full((action_dim * num_action_chunks,), -1.0))
        self.value_head = nn.Linear(hidden, 1)

    def _heads(self, states: torch.Tensor) -> tuple[Normal, torch.Tensor]:
        # LIBERO reports float64 states; the parameters decide the dtype.
        feat = self.body(states.to(self.log_std.dtype))
        return Normal(self.mean(feat), self.log_std.exp()), self.value_head(feat)

    @torch.no_grad()
    def predict_action_batch(self, env_obs: dict[str, Any], mode: str = "train",
                             **kwargs: Any) -> tuple[torch.Tensor, dict[str, Any]]:
        if os.environ.get(FAIL_VAR) == "hang":
            time.sleep(3600)
        states = env_obs["states"].to(self.log_std.device, self.log_std.dtype)
        dist, values = self._heads(states)
        action = dist.mean if mode == "eval" else dist.sample()
        chunks = action.reshape(-1, self.num_action_chunks, self.action_dim)
        return chunks, {
            "prev_logprobs": dist.log_prob(action),
            "prev_values": values,
            "forward_inputs": {"states": states, "action": action},
        }

    def forward(self, forward_inputs: dict[str, torch.Tensor], **kwargs: Any) -> dict[str, Any]:
        """RLinf's training call (nn.Module's forward shadows BasePolicy's dispatcher)."""
        if os.environ.get(FAIL_VAR) == "train":
            raise RuntimeError("dexrl_tiny was told to fail in training")
        if os.environ.get(FAIL_VAR) == "oom":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB "
                                         "(dexrl_tiny was told to run out)")
        return self.default_forward(forward_inputs, **kwargs)

    def default_forward(self, forward_inputs: dict[str, torch.Tensor],
                        compute_logprobs: bool = True, compute_entropy: bool = False,
                        compute_values: bool = True, **kwargs: Any) -> dict[str, torch.Tensor]:
        dist, values = self._heads(forward_inputs["states"])
        out: dict[str, torch.Tensor] = {}
        if compute_logprobs:
            out["logprobs"] = dist.log_prob(forward_inputs["action"].to(values.dtype))
        if compute_entropy:
            out["entropy"] = dist.entropy()
        if compute_values:
            out["values"] = values
        return out


def build(cfg: Any, torch_dtype: Any) -> TinyPolicy:
    """RLinf model builder for ``dexrl_tiny``."""
    model = TinyPolicy(int(cfg.action_dim), int(cfg.num_action_chunks))
    return model.to(torch_dtype) if torch_dtype is not None else model


def register() -> list[str]:
    """dexrl's registrations, then the tiny policy."""
    import rlinf.models

    types = registry.register()
    rlinf.models.register_model(TINY, build, category="embodied", force=True)
    return [*types, TINY]
