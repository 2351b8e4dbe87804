"""``dexrl eval``'s policy calls through the rollout's fast paths (``--torch-compile``,
``--cuda-graph``): the RLinf adapter's deterministic eval call, compiled and/or replayed as a CUDA
graph, at a few fixed batch sizes.

The evaluation's batch is the number of busy envs, which shrinks at the end of the queue. A
compiled function compiles once per batch size and a CUDA graph serves one batch size, so each
call is padded (with copies of its first row, whose outputs are dropped) to the smallest of at
most :data:`~dexrl.bridge.policies.rollout_graphs.MAX_GRAPHS` sizes (:func:`batch_buckets`), all
compiled and captured before the first episode (:meth:`FastEvalPolicy.warm_up`). Rows are
independent in the network, so padding changes no row's actions beyond float rounding.

Design notes: docs/design/evaluation.md#fast-policy-calls.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

from dexrl.bridge.policies.chain import RLSettings
from dexrl.bridge.policies.fast_rollout import FastRollout
from dexrl.bridge.policies.flow import FlowRLPolicy
from dexrl.bridge.policies.rollout_graphs import MAX_GRAPHS
from dexrl.bridge.registry import ADAPTER_CLASSES
from dexrl.catalog import load_reference
from dexrl.errors import DexrlError
from dexrl.models.flow.policy import FlowPolicy, check_env_obs
from dexrl.vec_env import take_rows

COMPILE_BACKEND = "inductor"  # torch.compile's backend (tests trace with aot_eager)


def batch_buckets(num_envs: int) -> list[int]:
    """The padded batch sizes of an evaluation with ``num_envs`` envs: ``num_envs``, about its
    half and quarter, and 1 (at most :data:`MAX_GRAPHS`, ascending)."""
    sizes = {num_envs, math.ceil(num_envs / 2), math.ceil(num_envs / 4), 1}
    return sorted(sizes)[-MAX_GRAPHS:]


class FastEvalPolicy:
    """An inference policy's ``predict`` through the rollout adapter's fast path.

    Args:
        policy: The loaded inference policy (its network is shared, not copied).
        model_type: The checkpoint's model type, one with a fast path
            (:func:`dexrl.evaluation.settings.check_fast_path` refuses the others up front).
        num_steps: Denoising steps of every call.
        action_chunk: Actions returned per call.
        num_envs: The evaluation's envs (the largest batch).
        compile_mode: torch.compile mode, or None for no compilation.
        cuda_graph: Replay CUDA graphs (the policy must be on a CUDA GPU).
        compile_backend: torch.compile backend (None: :data:`COMPILE_BACKEND`; ``aot_eager``
            traces without code generation, for tests).

    Raises:
        DexrlError: an unknown compile mode (:meth:`warm_up`: a CUDA graph off the GPU or with
            a compile mode that records graphs itself).
    """

    def __init__(self, policy: FlowPolicy, model_type: str, *, num_steps: int,
                 action_chunk: int, num_envs: int, compile_mode: str | None = None,
                 cuda_graph: bool = False, compile_backend: str | None = None) -> None:
        adapter_class: type[FlowRLPolicy] = load_reference(ADAPTER_CLASSES[model_type])
        settings = RLSettings(num_steps=num_steps, num_action_chunks=action_chunk,
                              add_value_head=False, train_expert_only=False,
                              norm_mode=policy.norm_mode)
        self.network = policy.network
        self.adapter = adapter_class(policy, settings).eval()
        self.num_steps, self.action_chunk = num_steps, action_chunk
        self.buckets = batch_buckets(num_envs)
        self.cuda_graph = cuda_graph
        self.fast: FastRollout = self.adapter._fast_rollout()
        if compile_mode is not None:
            self.fast.enable_compile(compile_mode, compile_backend or COMPILE_BACKEND)

    @torch.no_grad()  # as the calls run: grad mode is part of what a compiled graph guards on
    def warm_up(self) -> None:
        """Compile and/or capture every batch size before the first episode (each compiles on
        its first call otherwise, inside the evaluation's time)."""
        if self.cuda_graph:
            self.fast.capture(self.buckets)
            return
        device = self.adapter.flow.device
        config = self.network.config
        for batch in self.buckets:
            noise = torch.zeros(batch, config.chunk_size, config.action_dim, device=device)
            self.fast.run(self.adapter.input_template(batch), noise, [])

    @torch.no_grad()
    def predict(self, env_obs: Mapping[str, Any], noise: torch.Tensor | None = None,
                num_steps: int = 10, num_action_chunks: int | None = None
                ) -> dict[str, torch.Tensor]:
        """:meth:`FlowPolicy.predict`'s ``actions`` for the same observations and noise.

        Raises:
            DexrlError: ``num_steps`` or ``num_action_chunks`` other than the ones built for,
                or noise missing (the evaluation always passes its seeded noise).
        """
        if num_steps != self.num_steps or (num_action_chunks or self.action_chunk) \
                != self.action_chunk:
            raise DexrlError(f"the fast policy call was built for {self.num_steps} steps and "
                             f"{self.action_chunk} actions, not {num_steps} and "
                             f"{num_action_chunks}", hint="build FastEvalPolicy with the "
                             "evaluation's settings", code="eval-fast-path-settings")
        if noise is None:
            raise DexrlError("the fast policy call needs the evaluation's noise",
                             hint="pass noise [batch, chunk_size, action_dim]",
                             code="policy-noise-shape")
        batch = check_env_obs(env_obs)
        size = next((b for b in self.buckets if b >= batch), batch)
        rows = list(range(batch)) + [0] * (size - batch)
        padded = take_rows(env_obs, rows)
        actions, _ = self.adapter.predict_action_batch(
            padded, mode="eval", compute_values=False, noise=noise[rows])
        return {"actions": actions[:batch]}


__all__ = ["FastEvalPolicy", "batch_buckets"]
