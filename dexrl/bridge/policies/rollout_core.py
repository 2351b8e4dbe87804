"""The rollout call's device compute as fixed-shape tensor functions, for torch.compile.

The eager chain (:func:`dexrl.bridge.policies.chain.sample_chain`) branches in Python on which
denoising steps are stochastic and draws their noise as it goes. Here every choice of a call arrives
as a tensor: a step table (each step's time, mean weights and std, chosen on the host from the
scored steps), the initial noise, and the noise of every stochastic step, drawn before the call in
the order the eager chain draws it. One traced graph then serves every call of a batch size: train
and eval mode, any scored step, new weights in place.

Design notes: docs/design/rollout-speed.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from dexrl.bridge.policies.chain import RLSettings, initial_logprob
from dexrl.models.flow.mot import PrefixCache
from dexrl.models.flow.sampling import (
    combine,
    gaussian_logprob,
    moment_weights,
    sde_sigma,
    time_grid,
)

# A step table's columns: t, w0, w1, std (float32: rows of 16 bytes, so every row's view is
# aligned as compiled kernels assume). The row after the N steps holds (terms, initial weight).
T, W0, W1, STD = range(4)
TERMS, INITIAL = range(2)
INPUTS = ("images", "tokens", "token_mask", "state")  # the host inputs, as _rollout_inputs has them


class RolloutPolicy(Protocol):
    """What the core reads of the adapter (:class:`dexrl.bridge.policies.flow.FlowRLPolicy`)."""

    flow: Any
    settings: RLSettings

    @property
    def has_value_head(self) -> bool: ...

    def _value(self, hidden: torch.Tensor) -> torch.Tensor: ...

    @property
    def learned_std(self) -> Callable[[torch.Tensor], torch.Tensor] | None: ...

    def _model_inputs(self, images: torch.Tensor, tokens: torch.Tensor,
                      token_mask: torch.Tensor, state: torch.Tensor) -> Any: ...

    def input_template(self, batch: int) -> dict[str, torch.Tensor]: ...

    def graph_weights(self) -> list[torch.Tensor]: ...


@dataclass(frozen=True)
class StepTables:
    """Rows (t, w0, w1, std) per denoising step, float32 [N, 4], for ODE and stochastic steps.

    Computed once per setting with the functions the eager chain calls per step
    (:func:`~dexrl.models.flow.sampling.moment_weights`), on the same float32 grid. For
    ``flow_noise`` a stochastic row holds the ODE weights and std 1: a scale of the noise head's
    std, which the step computes.
    """

    ode: torch.Tensor
    stochastic: torch.Tensor
    joint: bool

    @classmethod
    def build(cls, settings: RLSettings) -> StepTables:
        """The tables of ``settings`` (steps, noise method and level, joint log-prob)."""
        grid = time_grid(settings.num_steps)
        k = torch.arange(settings.num_steps)
        t = grid[k]
        delta = t - grid[k + 1]
        level = torch.tensor(settings.noise_level, dtype=torch.float32)
        ode = moment_weights(t, delta, "ode", level)
        sigma = (sde_sigma(grid, k, settings.noise_level)
                 if settings.noise_method == "flow_sde" else None)
        if settings.noise_method == "flow_noise":
            stochastic = (*ode[:2], torch.ones_like(ode[2]))
        else:
            stochastic = moment_weights(t, delta, settings.noise_method, level, sigma)  # type: ignore[arg-type]
        return cls(torch.stack([t, *ode], dim=1), torch.stack([t, *stochastic], dim=1),
                   settings.joint_logprob)

    def rows(self, stochastic: Sequence[int]) -> torch.Tensor:
        """float32 [N + 1, 4]: each step's row (stochastic or ODE), then the log-prob's number of
        terms and the weight of the initial noise's term (1 for a joint log-prob, else 0)."""
        table = self.ode.clone()
        steps = sorted(stochastic)
        if steps:
            table[steps] = self.stochastic[steps]
        initial = 1.0 if steps and self.joint else 0.0
        tail = torch.tensor([[len(steps) + initial, initial, 0.0, 0.0]])
        return torch.cat([table, tail])


class RolloutCore:
    """``predict_action_batch``'s device compute for one adapter, as three tensor functions.

    :meth:`prefix` (image normalization, vision tower, projector, LLM prefix pass), :meth:`step`
    (one denoising step with its next sample and log-prob term) and :meth:`finish` (log-probs and
    value) take tensors only and sync nothing with the host; :meth:`__call__` runs the chain.
    :meth:`compile` replaces the three by ``torch.compile``'d versions.
    """

    def __init__(self, adapter: RolloutPolicy) -> None:
        self.adapter = adapter
        self.num_steps = adapter.settings.num_steps
        self.prefix_fn: Callable[..., Any] = self.prefix
        self.step_fn: Callable[..., Any] = self.step
        self.finish_fn: Callable[..., Any] = self.finish
        self.compile_mode: tuple[str, str] | None = None

    def compile(self, mode: str, backend: str = "inductor") -> None:
        """Compile the three functions (lazily, at their first call per batch size).

        ``dynamic=False``: one graph per batch size, no dynamic-shape guards; the weights are
        inputs of the graphs, so in-place weight updates recompile nothing. ``backend`` other
        than inductor (``aot_eager``: tracing without code generation) takes no mode.
        """
        if self.compile_mode == (mode, backend):
            return
        options: dict[str, Any] = {"mode": mode} if backend == "inductor" else {}
        self.prefix_fn, self.step_fn, self.finish_fn = (
            torch.compile(fn, backend=backend, dynamic=False, **options)
            for fn in (self.prefix, self.step, self.finish))
        self.compile_mode = (mode, backend)

    def prefix(self, images: torch.Tensor, tokens: torch.Tensor, token_mask: torch.Tensor,
               state: torch.Tensor) -> tuple[Any, ...]:
        """The prefix's keys/values of uint8 views [B, V, S, S, 3] and the prompt."""
        obs = self.adapter._model_inputs(images, tokens, token_mask, state)
        cache = self.adapter.flow.network.encode_prefix(obs)
        return cache.keys, cache.values, cache.valid, cache.ar

    def step(self, cache: PrefixCache, state: torch.Tensor, x: torch.Tensor, row: torch.Tensor,
             eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x at the next grid time, its log-prob term (0 where std is 0) and the action tokens'
        hidden states, from x [B, T, D], a step-table row and the step's noise (zeros where the
        step is not stochastic)."""
        t = row[T]
        velocity, hidden = self.adapter.flow.network.denoise_step(
            cache, state, x, t.expand(x.shape[0]))
        mean = combine(x, velocity.float(), t, row[W0], row[W1])
        learned = self.adapter.learned_std
        std = row[STD] if learned is None else row[STD] * learned(hidden)
        x_next = mean + std * eps
        return x_next, gaussian_logprob(x_next, mean, std), hidden

    def finish(self, noise: torch.Tensor, first_hidden: torch.Tensor, terms: torch.Tensor,
               tail: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probs float32 [B, T, D] (the mean over the scored terms, zeros when none) and
        values float32 [B] (zeros without a value head)."""
        logprobs = ((terms + tail[INITIAL] * initial_logprob(noise))
                    / tail[TERMS].clamp_min(1.0))
        if self.adapter.has_value_head:
            values = self.adapter._value(first_hidden)
        else:
            values = noise.new_zeros(noise.shape[0])
        return logprobs, values

    def __call__(self, buffers: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The chain over device tensors: the :data:`INPUTS`, ``noise`` [B, T, D], ``eps``
        [N, B, T, D] and ``table`` [N + 1, 4]; returns ``chains`` [B, N+1, T, D],
        ``logprobs`` and ``values``."""
        state, table, eps = buffers["state"], buffers["table"], buffers["eps"]
        cache = PrefixCache(*self.prefix_fn(*(buffers[k] for k in INPUTS)))
        x = buffers["noise"]
        chains, terms, first_hidden = [x], None, None
        for k in range(self.num_steps):
            x, term, hidden = self.step_fn(cache, state, x, table[k], eps[k])
            chains.append(x)
            terms = term if terms is None else terms + term
            if first_hidden is None:
                first_hidden = hidden
        logprobs, values = self.finish_fn(buffers["noise"], first_hidden, terms,
                                          table[self.num_steps])
        return {"chains": torch.stack(chains, dim=1), "logprobs": logprobs, "values": values}


class HostStager:
    """Host tensors to the device through reusable pinned buffers, copied without blocking.

    A buffer is written again only after the copies out of it finished (an event per call), so
    a caller need not synchronize. Without CUDA, a plain copy.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.buffers: dict[tuple[str, tuple[int, ...], torch.dtype], torch.Tensor] = {}
        self.done: torch.cuda.Event | None = None

    def __call__(self, tensors: dict[str, torch.Tensor],
                 into: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """Copy ``tensors`` to the device, into the tensors of ``into`` where given; returns
        the device tensors."""
        if self.device.type != "cuda":
            if into is None:
                return {k: v.to(self.device) for k, v in tensors.items()}
            return {k: into[k].copy_(v) for k, v in tensors.items()}
        if self.done is not None:
            self.done.synchronize()
        out = {}
        for name, tensor in tensors.items():
            key = (name, tuple(tensor.shape), tensor.dtype)
            buffer = self.buffers.get(key)
            if buffer is None:
                buffer = self.buffers[key] = torch.empty_like(tensor, device="cpu").pin_memory()
            buffer.copy_(tensor)
            out[name] = (into[name].copy_(buffer, non_blocking=True) if into is not None
                         else buffer.to(self.device, non_blocking=True))
        self.done = torch.cuda.Event()
        self.done.record()
        return out


def step_noise(eps: torch.Tensor, stochastic: Sequence[int]) -> torch.Tensor:
    """Fill ``eps`` [N, B, T, D] in place: standard normal at the stochastic steps, in step order
    (the draws the eager chain makes, from the same generator), zeros elsewhere."""
    eps.zero_()
    for k in sorted(stochastic):
        eps[k].normal_()
    return eps


__all__ = ["INPUTS", "HostStager", "RolloutCore", "StepTables", "step_noise"]
