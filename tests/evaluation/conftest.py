"""Fixtures: a tiny RLinf run trained (in appearance) from the tiny π0 checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch


@pytest.fixture(scope="session")
def tiny_run(tiny_pi0_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RUN_DIR with config.yaml and checkpoints/global_step_2 (read-only for tests)."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    return write_tiny_rlinf_run(tmp_path_factory.mktemp("run") / "run", tiny_pi0_dir, step=2)


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
