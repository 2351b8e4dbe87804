"""Denoising schedule, time embedding, per-step Gaussian moments and log-probs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from dexrl.errors import DexrlError
from dexrl.models.flow.sampling import (
    gaussian_logprob,
    sde_sigma,
    sincos_time_embedding,
    step_moments,
    time_grid,
)


@pytest.mark.parametrize("n", [1, 4, 10, 13])
def test_dexbotic_grid_accumulates_float32_steps(n: int) -> None:
    grid = time_grid(n)
    expected = [np.float32(1.0)]
    for _ in range(n):
        expected.append(np.float32(expected[-1] + np.float32(-1.0 / n)))
    assert grid.dtype == torch.float32 and grid.shape == (n + 1,)
    assert grid.numpy().tolist() == [float(v) for v in expected]
    assert abs(float(grid[-1])) < 1e-6
    assert torch.allclose(grid, torch.linspace(1, 0, n + 1), atol=1e-6)


def test_dexbotic_grid_last_time_is_not_exactly_zero_for_ten_steps() -> None:
    # Documented behaviour: float32 accumulation overshoots zero slightly.
    assert float(time_grid(10)[-1]) < 0


def test_rlinf_grid_ends_at_exact_zero() -> None:
    grid = time_grid(4, schedule="rlinf")
    assert grid.tolist() == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_sincos_embedding_values() -> None:
    t = torch.tensor([0.0, 0.3, 1.0])
    emb = sincos_time_embedding(t, 8, min_period=0.5, max_period=4.0)
    assert emb.shape == (3, 8) and emb.dtype == torch.float32
    assert emb[0].tolist() == [0.0] * 4 + [1.0] * 4
    periods = [0.5 * 8.0 ** (i / 3) for i in range(4)]  # geometric from 0.5 to 4.0
    for row, time in enumerate(t.tolist()):
        angles = [time / p * 2 * math.pi for p in periods]
        expected = [math.sin(a) for a in angles] + [math.cos(a) for a in angles]
        assert emb[row].tolist() == pytest.approx(expected, abs=1e-6)


def test_sincos_embedding_is_computed_in_float64_then_cast() -> None:
    t = torch.rand(5, dtype=torch.float32)
    emb64 = sincos_time_embedding(t, 64, dtype=torch.float64)
    emb16 = sincos_time_embedding(t, 64, dtype=torch.bfloat16)
    assert emb64.dtype == torch.float64 and emb16.dtype == torch.bfloat16
    assert torch.equal(emb16, emb64.to(torch.bfloat16))
    assert torch.equal(sincos_time_embedding(t, 64), emb64.to(torch.float32))
    with pytest.raises(ValueError):
        sincos_time_embedding(t, 7)


def _xv(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    shape = (3, 5, 4)
    return (torch.randn(shape, generator=gen, dtype=torch.float64),
            torch.randn(shape, generator=gen, dtype=torch.float64))


@pytest.mark.parametrize("k", [0, 1, 3])
def test_ode_step_is_euler(k: int) -> None:
    x, v = _xv()
    grid = time_grid(4).double()
    t, delta = grid[k], grid[k] - grid[k + 1]
    mean, std = step_moments(x, v, t, delta, "ode")
    assert torch.allclose(mean, x - v * delta, atol=1e-12)
    assert std.shape == x.shape and not std.any()


def test_per_sample_times_broadcast_over_the_batch() -> None:
    x, v = _xv()
    t = torch.tensor([1.0, 0.5, 0.25], dtype=torch.float64)
    delta = torch.tensor([0.25, 0.25, 0.125], dtype=torch.float64)
    mean, _ = step_moments(x, v, t, delta, "ode")
    for b in range(3):
        row, _ = step_moments(x[b : b + 1], v[b : b + 1], float(t[b]), float(delta[b]), "ode")
        assert torch.allclose(mean[b : b + 1], row, atol=1e-12)


@pytest.mark.parametrize("method", ["flow_sde", "flow_cps"])
def test_stochastic_methods_reduce_to_ode_without_noise(method: str) -> None:
    x, v = _xv(1)
    for k in range(4):
        grid = time_grid(4).double()
        args = (x, v, grid[k], grid[k] - grid[k + 1])
        ode_mean, _ = step_moments(*args, "ode")
        mean, std = step_moments(*args, method, noise_level=0.0)
        assert torch.allclose(mean, ode_mean, atol=1e-12) and not std.any()
        near, near_std = step_moments(*args, method, noise_level=1e-4)
        assert torch.allclose(near, ode_mean, atol=1e-3) and float(near_std.max()) < 1e-3


def test_sde_sigma_from_grid_matches_formula_and_step_default() -> None:
    grid = time_grid(4).double()
    level = 0.5
    # τ'_0 is τ_1 because τ_0 = 1.
    assert float(sde_sigma(grid, 0, level)) == pytest.approx(level * math.sqrt(1 / (1 - 0.75)))
    assert float(sde_sigma(grid, 2, level)) == pytest.approx(level * math.sqrt(0.5 / 0.5))
    ks = torch.tensor([0, 2, 3])
    assert sde_sigma(grid, ks, level).shape == (3,)
    x, v = _xv(2)
    for k in range(4):
        t, delta = grid[k], grid[k] - grid[k + 1]
        sigma = sde_sigma(grid, k, level)
        implied = step_moments(x, v, t, delta, "flow_sde", noise_level=level)
        given = step_moments(x, v, t, delta, "flow_sde", noise_level=level, sigma=sigma)
        assert torch.allclose(implied[0], given[0]) and torch.allclose(implied[1], given[1])
        assert torch.allclose(given[1], torch.sqrt(delta) * sigma * torch.ones_like(x))
        w1 = (t - delta) - sigma**2 * delta / (2 * t)
        expected = (x - v * t) * (1 - (t - delta)) + (x + v * (1 - t)) * w1
        assert torch.allclose(given[0], expected, atol=1e-12)


def test_sde_step_keeps_the_gaussian_marginal_to_first_order() -> None:
    # Data a ~ N(0, s²), x_t = t·ε + (1-t)·a; the exact velocity E[ε - a | x_t] is linear in x.
    s2, t, delta, sigma = 0.3, 0.6, 1e-3, 1.2
    var_t = t**2 + (1 - t) ** 2 * s2
    slope = (t - (1 - t) * s2) / var_t
    x = torch.ones(1, 1, dtype=torch.float64)
    mean, std = step_moments(x, slope * x, t, delta, "flow_sde", sigma=sigma)
    var_next = float(mean) ** 2 * var_t + float(std) ** 2
    target = (t - delta) ** 2 + (1 - t + delta) ** 2 * s2
    # The injected noise adds σ²δ ≈ 1.4e-3 of variance; the drift correction must remove it.
    assert abs(var_next - target) < 1e-5


def test_cps_moments_formula() -> None:
    x, v = _xv(3)
    t, delta, level = 0.75, 0.25, 0.4
    mean, std = step_moments(x, v, t, delta, "flow_cps", noise_level=level)
    tn = t - delta
    expected = (x - v * t) * (1 - tn) + (x + v * (1 - t)) * tn * math.cos(math.pi * level / 2)
    assert torch.allclose(mean, expected, atol=1e-12)
    assert torch.allclose(std, torch.full_like(x, tn * math.sin(math.pi * level / 2)))
    # A float32-grid time just below zero must not give a negative std.
    _, std = step_moments(x, v, 0.1, 0.1 + 1e-7, "flow_cps", noise_level=level)
    assert float(std.min()) == 0.0


def test_unknown_method_is_a_user_error() -> None:
    x, v = _xv()
    with pytest.raises(DexrlError, match="flow_noise") as err:
        step_moments(x, v, 1.0, 0.25, "flow_noise")  # type: ignore[arg-type]
    assert err.value.code == "policy-noise-method-unknown"


def test_logprob_matches_torch_normal_and_is_zero_without_noise() -> None:
    gen = torch.Generator().manual_seed(4)
    x, mean = torch.randn(2, 6, 3, generator=gen), torch.randn(2, 6, 3, generator=gen)
    std = torch.rand(2, 6, 3, generator=gen) + 0.1
    expected = torch.distributions.Normal(mean, std).log_prob(x)
    assert torch.allclose(gaussian_logprob(x, mean, std), expected, atol=1e-6)

    std = std.clone()
    std[0] = 0.0
    std.requires_grad_(True)
    mean.requires_grad_(True)
    logp = gaussian_logprob(x, mean, std)
    assert torch.all(logp[0] == 0)
    assert torch.allclose(logp[1], expected[1], atol=1e-6)
    logp.sum().backward()
    assert torch.isfinite(std.grad).all() and torch.isfinite(mean.grad).all()
    assert not mean.grad[0].any()
