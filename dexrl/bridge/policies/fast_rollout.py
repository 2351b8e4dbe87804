"""The adapter's rollout through torch.compile and CUDA graphs: RLinf's two rollout hooks.

RLinf's rollout worker calls ``enable_torch_compile(mode)`` when ``rollout.enable_torch_compile``
is set and ``capture_cuda_graph(train_batch_size, eval_batch_size)`` when
``rollout.enable_cuda_graph`` is (again after each reload with offload on, after
``release_cuda_graph()``). :class:`FastRollout` is what the adapter keeps once either was called.

Design notes: docs/design/rollout-speed.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dexrl.bridge.policies.rollout_core import (
    INPUTS,
    HostStager,
    RolloutCore,
    RolloutPolicy,
    StepTables,
    step_noise,
)
from dexrl.bridge.policies.rollout_graphs import RolloutGraphs
from dexrl.errors import DexrlError
from dexrl.models.choices import COMPILE_MODES, GRAPHING_MODES

# torch.compile's modes (torch._inductor.list_mode_options() and "default"); RLinf's default
# for the rollout hook is max-autotune-no-cudagraphs.


class FastRollout:
    """The compiled and/or graphed rollout of one adapter, rebuilt when its RL settings change.

    Args:
        adapter: The policy adapter whose network and value head run.
    """

    def __init__(self, adapter: RolloutPolicy) -> None:
        self.adapter = adapter
        self.compile_mode: str | None = None
        self.compile_backend = "inductor"
        self.graphs: RolloutGraphs | None = None
        self._build()

    def _build(self) -> None:
        self.settings = self.adapter.settings
        self.tables = StepTables.build(self.settings)
        self.core = RolloutCore(self.adapter)
        if self.compile_mode is not None:
            self.core.compile(self.compile_mode, self.compile_backend)
        self._stage = None

    def enable_compile(self, mode: str, backend: str = "inductor") -> None:
        """Compile the rollout's functions with ``mode`` (one of :data:`COMPILE_MODES`);
        ``backend`` other than inductor is for tests (``aot_eager`` traces without codegen)."""
        if mode not in COMPILE_MODES:
            raise DexrlError(f"torch.compile mode {mode!r} is not one torch knows",
                             hint=f"use one of {', '.join(COMPILE_MODES)}",
                             where="rollout.torch_compile_mode", code="policy-compile-mode-unknown")
        if self.graphs is not None:
            _refuse_graphing_mode(mode)
        self.compile_mode, self.compile_backend = mode, backend
        self.core.compile(mode, backend)
        if self.graphs is not None:
            self.graphs.core = self.core
            self.graphs.recapture()

    def capture(self, batch_sizes: Sequence[int]) -> None:
        """Capture CUDA graphs of the rollout call at each positive batch size.

        Raises:
            DexrlError: the model is not on a CUDA device, or compiled in a mode that records
                CUDA graphs itself.
        """
        device = self.adapter.flow.device
        if device.type != "cuda":
            raise DexrlError(f"CUDA graphs need the rollout model on a CUDA GPU; it is on "
                             f"{device.type}", hint="set rollout.enable_cuda_graph: false on "
                             "machines without a GPU", where="rollout.enable_cuda_graph",
                             code="policy-cuda-graph-no-gpu")
        _refuse_graphing_mode(self.compile_mode)
        if self.graphs is None:
            self.graphs = RolloutGraphs(self.core, self.adapter.input_template, self.tables,
                                        self.adapter.graph_weights, device)
        for batch in sorted({int(b) for b in batch_sizes if int(b) > 0}):
            self.graphs.capture(batch)

    def release(self) -> None:
        """Destroy the CUDA graphs (the compiled functions stay)."""
        if self.graphs is not None:
            self.graphs.release()
            self.graphs = None

    def run(self, host: dict[str, torch.Tensor], noise: torch.Tensor,
            stochastic: Sequence[int]) -> dict[str, torch.Tensor]:
        """The rollout compute of one call: ``chains``, ``logprobs``, ``values`` on the device.

        Args:
            host: The :data:`~dexrl.bridge.policies.rollout_core.INPUTS` on the CPU.
            noise: Initial x [B, T, D] on the device.
            stochastic: The call's stochastic (scored) steps, empty for a deterministic call.
        """
        if self.adapter.settings != self.settings:
            sizes = self.graphs.sizes if self.graphs is not None else []
            self.release()
            self._build()
            if sizes:
                self.capture(sizes)
        table = self.tables.rows(stochastic)
        noise = noise.contiguous()  # the eval noise is one row expanded: one graph for both
        if self.graphs is not None:
            out = self.graphs.run({**host, "table": table}, noise, stochastic)
            if out is not None:
                return out
        device = noise.device
        if self._stage is None:
            self._stage = HostStager(device)
        buffers = self._stage({**{k: host[k] for k in INPUTS}, "table": table})
        eps = torch.empty((self.settings.num_steps, *noise.shape), device=device)
        buffers.update(noise=noise, eps=step_noise(eps, stochastic))
        return self.core(buffers)


def template_obs(batch: int, size: tuple[int, int], state_dim: int) -> dict[str, object]:
    """Blank LIBERO-shaped env observations (frames already at the model's image size)."""
    frames = np.zeros((batch, *size, 3), dtype=np.uint8)
    return {"main_images": frames, "wrist_images": frames,
            "states": np.zeros((batch, state_dim), dtype=np.float32),
            "task_descriptions": [""] * batch}


def _refuse_graphing_mode(mode: str | None) -> None:
    """A compile mode that records CUDA graphs itself cannot run inside the rollout's graph."""
    if mode in GRAPHING_MODES:
        raise DexrlError(f"torch.compile mode {mode!r} records CUDA graphs itself, which cannot "
                         "run inside the rollout's own CUDA graph",
                         hint="set rollout.torch_compile_mode to max-autotune-no-cudagraphs or "
                         "default with rollout.enable_cuda_graph, or turn "
                         "rollout.enable_cuda_graph off",
                         where="rollout.torch_compile_mode", code="policy-compile-mode-graphs")


__all__ = ["COMPILE_MODES", "GRAPHING_MODES", "FastRollout", "template_obs"]
