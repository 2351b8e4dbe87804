"""Flow-matching denoising math shared by deterministic sampling and the RL adapter.

Convention (Dexbotic/openpi π0): t = 1 is noise, t = 0 is data, the network predicts the velocity
v = noise - data, and sampling walks t from 1 down to 0. One call of :func:`step_moments` gives
the Gaussian (mean, std) of the next sample x_{t-δ}; std is 0 for the deterministic ODE step.
"""

from __future__ import annotations

import math
from typing import Literal

import torch

from dexrl.errors import DexrlError

StepMethod = Literal["ode", "flow_sde", "flow_cps"]
STEP_METHODS: tuple[str, ...] = ("ode", "flow_sde", "flow_cps")
GridSchedule = Literal["dexbotic", "rlinf"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def time_grid(num_steps: int, *, schedule: GridSchedule = "dexbotic") -> torch.Tensor:
    """Return the float32 times [num_steps + 1] visited while denoising, from 1.0 towards 0.

    ``dexbotic`` reproduces Dexbotic's sampling loop: start at 1.0 and add float32(-1/N) each step,
    so interior values carry float32 accumulation error and the last one is only ~0 (within a few
    1e-7, sometimes negative, e.g. -7.45e-8 for N=10). ``rlinf`` is RLinf's RL-adapter grid,
    ``linspace(1, 1/N, N)`` followed by an exact 0.
    """
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    if schedule == "rlinf":
        head = torch.linspace(1.0, 1.0 / num_steps, num_steps, dtype=torch.float32)
        return torch.cat([head, torch.zeros(1, dtype=torch.float32)])
    if schedule != "dexbotic":
        raise ValueError(f"unknown schedule {schedule!r}")
    step = torch.tensor(-1.0 / num_steps, dtype=torch.float32)
    times = [torch.tensor(1.0, dtype=torch.float32)]
    for _ in range(num_steps):
        times.append(times[-1] + step)  # float32 accumulation, as the reference loop does
    return torch.stack(times)


def sincos_time_embedding(
    t: torch.Tensor,
    dim: int,
    min_period: float = 4e-3,
    max_period: float = 4.0,
    *,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Sine-cosine embedding of times ``t`` [B] -> [B, dim] as ``[sin, cos]`` halves.

    Periods are geometric from ``min_period`` to ``max_period`` over ``dim/2`` frequencies; the
    angles t/period·2π are computed in float64 (as the reference does on GPU) and the result is
    cast to ``dtype`` (default: ``t``'s floating dtype, else float32).
    """
    if dim % 2:
        raise ValueError(f"embedding dim must be even, got {dim}")
    if t.ndim != 1:
        raise ValueError(f"expected times of shape [B], got {list(t.shape)}")
    out_dtype = dtype or (t.dtype if t.is_floating_point() else torch.float32)
    fraction = torch.linspace(0.0, 1.0, dim // 2, dtype=torch.float64, device=t.device)
    period = min_period * (max_period / min_period) ** fraction
    angle = t.to(torch.float64)[:, None] / period[None, :] * (2.0 * math.pi)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1).to(out_dtype)


def _sde_sigma(t: torch.Tensor, t_next: torch.Tensor, noise_level: torch.Tensor) -> torch.Tensor:
    # At t = 1 the ratio t/(1-t) is infinite, so the first step borrows the next grid time.
    return noise_level * torch.sqrt(t / (1.0 - torch.where(t == 1.0, t_next, t)))


def sde_sigma(
    grid: torch.Tensor, k: int | torch.Tensor, noise_level: float | torch.Tensor
) -> torch.Tensor:
    """Flow-SDE noise scale σ_k = noise_level·sqrt(τ_k / (1 - τ'_k)) at step(s) ``k`` of ``grid``.

    τ'_k is τ_1 when τ_k == 1, else τ_k. ``k`` may be an int or a LongTensor [B] (< len(grid)-1).
    """
    k = torch.as_tensor(k, device=grid.device)
    level = torch.as_tensor(noise_level, dtype=grid.dtype, device=grid.device)
    return _sde_sigma(grid[k], grid[k + 1], level)


def _as_time(value: float | torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """A scalar or per-sample [B] time as a tensor broadcastable against ``like`` [B, ...]."""
    value = torch.as_tensor(value, dtype=like.dtype, device=like.device)
    if value.ndim == 1:
        value = value.reshape(-1, *([1] * (like.ndim - 1)))
    return value


def step_moments(
    x: torch.Tensor,
    v: torch.Tensor,
    t: float | torch.Tensor,
    delta: float | torch.Tensor,
    method: StepMethod,
    noise_level: float | torch.Tensor = 0.0,
    sigma: float | torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and std of the next sample x_{t-δ} given x_t and the predicted velocity ``v``.

    With the predictions x̂0 = x - v·t (data) and x̂1 = x + v·(1-t) (noise), the mean is
    w0·x̂0 + w1·x̂1 with the weights of :func:`moment_weights`. Computed in ``x``'s dtype (use
    float32 for log-probs). ``t``/``delta``/``sigma``/``noise_level`` are scalars or per-sample
    [B] tensors. Returns (mean, std), both shaped like ``x`` (std is an expanded view).
    """
    t = _as_time(t, x)
    w0, w1, std = moment_weights(t, _as_time(delta, x), method, _as_time(noise_level, x),
                                 None if sigma is None else _as_time(sigma, x))
    mean = combine(x, v, t, w0, w1)
    return mean, std.expand_as(mean)


def moment_weights(
    t: torch.Tensor,
    delta: torch.Tensor,
    method: StepMethod,
    noise_level: torch.Tensor,
    sigma: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The weights (w0, w1) of x̂0 and x̂1 in the next sample's mean, and its std, at time ``t``
    and step ``delta`` (tensors of one shape or broadcastable), with w0 = 1-(t-δ) and:

    - ``ode``: w1 = t-δ, std 0 (the mean equals the Euler step x - v·δ);
    - ``flow_sde``: w1 = (t-δ) - σ²δ/(2t), std = sqrt(δ)·σ, σ from :func:`sde_sigma` (computed
      from t and t-δ when ``sigma`` is None);
    - ``flow_cps``: w1 = (t-δ)·cos(π·nl/2), std = (t-δ)·sin(π·nl/2), clamped at 0 so the float32
      ``dexbotic`` grid's slightly negative last time cannot give a negative std.
    """
    if method not in STEP_METHODS:
        raise DexrlError(f"unknown noise method '{method}'",
                         f"use one of {', '.join(STEP_METHODS)}", where="noise_method",
                         code="policy-noise-method-unknown")
    t_next = t - delta
    w0 = 1.0 - t_next
    if method == "ode":
        return w0, t_next, torch.zeros_like(t_next)
    if method == "flow_sde":
        if sigma is None:
            sigma = _sde_sigma(t, t_next, noise_level)
        return w0, t_next - sigma**2 * delta / (2.0 * t), torch.sqrt(delta) * sigma
    angle = noise_level * (math.pi / 2.0)
    return w0, t_next * torch.cos(angle), (t_next * torch.sin(angle)).clamp_min(0.0)


def combine(x: torch.Tensor, v: torch.Tensor, t: torch.Tensor, w0: torch.Tensor,
            w1: torch.Tensor) -> torch.Tensor:
    """The mean w0·x̂0 + w1·x̂1, with x̂0 = x - v·t and x̂1 = x + v·(1-t)."""
    return (x - v * t) * w0 + (x + v * (1.0 - t)) * w1


def gaussian_logprob(x: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """Elementwise log N(x; mean, std²); exactly 0 (with zero gradient) where ``std == 0``."""
    degenerate = std == 0
    safe = torch.where(degenerate, torch.ones_like(std), std)
    logp = -torch.log(safe) - _HALF_LOG_2PI - 0.5 * ((x - mean) / safe) ** 2
    return torch.where(degenerate, torch.zeros_like(logp), logp)


__all__ = [
    "STEP_METHODS",
    "combine",
    "GridSchedule",
    "StepMethod",
    "gaussian_logprob",
    "moment_weights",
    "sde_sigma",
    "sincos_time_embedding",
    "step_moments",
    "time_grid",
]
