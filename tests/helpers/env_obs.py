"""Random LIBERO-shaped env observations for the adapter tests."""

from __future__ import annotations

import numpy as np

TASKS = ("open the drawer", "turn on the stove", "pick up the bowl", "close the microwave")


def random_env_obs(batch: int, seed: int, size: int = 40) -> dict:
    """``batch`` observations: uint8 frames [B, size, size, 3], float64 states [B, 8], prompts."""
    rng = np.random.default_rng(seed)
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)),
            "task_descriptions": [TASKS[i % len(TASKS)] for i in range(batch)]}
