"""Fixtures: LIBERO-like observations and a policy's actions on them (``tiny_run`` is in
tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch


@pytest.fixture
def env_obs() -> dict:
    """Two LIBERO-like observations."""
    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8),
            "states": rng.normal(size=(2, 8)).astype(np.float32),
            "task_descriptions": ["pick up the black bowl", "open the top drawer"]}


@pytest.fixture
def actions(env_obs: dict) -> Callable[[object], torch.Tensor]:
    """Deterministic actions of a policy on :func:`env_obs` (fixed noise, 3 denoising steps)."""

    def act(policy) -> torch.Tensor:  # noqa: ANN001 - a FlowPolicy
        config = policy.network.config
        noise = torch.randn((2, config.chunk_size, config.action_dim),
                            generator=torch.Generator().manual_seed(0))
        return policy.predict(env_obs, noise=noise, num_steps=3)["actions"]

    return act
