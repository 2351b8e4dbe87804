"""CUDA graphs of the rollout call: one per batch size, captured with RLinf's CUDAGraphManager.

Design notes: docs/design/rollout-speed.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import torch
from rlinf.utils.cuda_graph import CUDAGraphManager, GraphCaptureSpec

from dexrl.bridge.policies.rollout_core import (
    INPUTS,
    HostStager,
    RolloutCore,
    StepTables,
    step_noise,
)

# Batch sizes captured at most: RLinf's hook names two (train and eval); a few more cover other
# sizes a worker sees (bootstrap values of a partial batch). Beyond it calls run ungraphed.
MAX_GRAPHS = 4
WARMUP_CALLS = 2
_HOSTED = (*INPUTS, "table")  # inputs that come from the host, through pinned buffers
log = logging.getLogger(__name__)


class RolloutGraphs:
    """Captured rollout calls per batch size, with static input and output buffers.

    Args:
        core: The rollout compute (compiled or not) to capture.
        template: ``template(batch)`` gives host inputs of that batch (their shapes and dtypes).
        tables: The step tables (the capture runs an ODE table).
        weights: The tensors the graphs read in place (parameters and buffers); a graph replays
            only while they keep their storage, and is captured again otherwise.
    """

    def __init__(self, core: RolloutCore, template: Callable[[int], dict[str, torch.Tensor]],
                 tables: StepTables, weights: Callable[[], Sequence[torch.Tensor]],
                 device: torch.device) -> None:
        self.core = core
        self.template = template
        self.tables = tables
        self.weights = weights
        self.device = device
        self.manager = CUDAGraphManager(device)
        self.stage = HostStager(device)
        self.batches: set[int] = set()
        self.held_bytes = 0  # memory reserved by the captures (their private pool)
        self._storage: tuple[int, ...] = ()
        self._refused: set[int] = set()

    @property
    def sizes(self) -> list[int]:
        """Captured batch sizes."""
        return sorted(self.batches)

    def capture(self, batch: int) -> None:
        """Warm up and capture the rollout call at ``batch`` (a no-op when captured)."""
        if batch in self.batches:
            return
        host = self.template(batch)
        host["table"] = self.tables.rows([])
        static = {k: v.to(self.device, copy=True) for k, v in host.items()}
        config = self.core.adapter.flow.network.config
        shape = (batch, config.chunk_size, config.action_dim)
        static["noise"] = torch.zeros(shape, device=self.device)
        static["eps"] = torch.zeros((self.core.num_steps, *shape), device=self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):  # warm-up (and compilation) outside the capture
            for _ in range(WARMUP_CALLS):
                self.core(static)
        torch.cuda.current_stream(self.device).wait_stream(side)
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()  # the warm-up's blocks, so the growth below is the graph's
        before = torch.cuda.memory_reserved(self.device)
        self.manager.capture(GraphCaptureSpec(name=_name(batch), func=self.core, inputs=static,
                                              warmup_iters=0))
        self.held_bytes += torch.cuda.memory_reserved(self.device) - before
        self.batches.add(batch)
        self._storage = self._storage_of_weights()

    def run(self, host: dict[str, torch.Tensor], noise: torch.Tensor,
            stochastic: Sequence[int]) -> dict[str, torch.Tensor] | None:
        """Replay the graph of this batch (capturing it first while fewer than
        :data:`MAX_GRAPHS` are held); None where no graph can serve the batch.

        ``host`` holds the :data:`INPUTS` and ``table`` on the CPU; ``noise`` [B, T, D] is on
        the device. Returns fresh copies of ``chains``, ``logprobs`` and ``values``.
        """
        batch = noise.shape[0]
        if self.batches and self._storage != self._storage_of_weights():
            log.warning("rollout weights were reallocated; capturing the CUDA graphs again")
            self.recapture()
        if batch not in self.batches:
            if len(self.batches) >= MAX_GRAPHS or batch in self._refused:
                self._refused.add(batch)
                return None
            log.info("capturing the rollout's CUDA graph for batch %d", batch)
            self.capture(batch)
        spec = self.manager[_name(batch)]
        self.stage({key: host[key] for key in _HOSTED}, into=spec.inputs)
        spec.inputs["noise"].copy_(noise)
        step_noise(spec.inputs["eps"], stochastic)
        spec.graph.replay()
        return {key: value.clone() for key, value in spec.outputs.items()}

    def recapture(self) -> None:
        """Release every graph, then capture the same batch sizes again."""
        sizes = self.sizes
        self.release()
        for batch in sizes:
            self.capture(batch)

    def release(self) -> None:
        """Destroy the graphs and their memory pool (RLinf's offload calls this first)."""
        self.manager.destroy()
        self.manager = CUDAGraphManager(self.device)
        self.batches.clear()
        self.held_bytes = 0

    def _storage_of_weights(self) -> tuple[int, ...]:
        return tuple(t.data_ptr() for t in self.weights())


def _name(batch: int) -> str:
    return f"dexrl_rollout_b{batch}"


__all__ = ["MAX_GRAPHS", "RolloutGraphs"]
