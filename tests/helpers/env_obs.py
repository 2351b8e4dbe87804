"""Random LIBERO-shaped env observations (and network inputs) for the policy and adapter tests."""

from __future__ import annotations

import numpy as np
import torch

TASKS = ("open the drawer", "turn on the stove", "pick up the bowl", "close the microwave")
# Prompts with what cleaning must handle (an underscore, a trailing newline).
PROMPTS = ("pick up the black bowl and place it on the plate", "open the top drawer",
           "put the_butter in the basket\n", "turn on the stove")


def random_env_obs(batch: int, seed: int, size: int = 40) -> dict:
    """``batch`` observations: uint8 frames [B, size, size, 3], float64 states [B, 8], prompts."""
    rng = np.random.default_rng(seed)
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)),
            "task_descriptions": [TASKS[i % len(TASKS)] for i in range(batch)]}


def policy_obs(batch: int = 2, seed: int = 0, size: int = 48) -> dict:
    """What the inference tests pass to ``predict``: numpy uint8 frames, float32 states and the
    first ``batch`` (at most 3) of :data:`PROMPTS`."""
    rng = np.random.default_rng(seed)
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)).astype(np.float32),
            "task_descriptions": list(PROMPTS[:3][:batch])}


def rlinf_obs(batch: int = 3, seed: int = 0, size: int = 48) -> dict:
    """What RLinf's LIBERO env worker sends a rollout call: numpy main frames, torch wrist frames,
    float64 torch states, :data:`PROMPTS` in turn."""
    rng = np.random.default_rng(seed)
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": torch.from_numpy(rng.integers(0, 256, (batch, size, size, 3),
                                                          dtype=np.uint8)),
            "states": torch.from_numpy(rng.normal(size=(batch, 8))),
            "task_descriptions": [PROMPTS[i % len(PROMPTS)] for i in range(batch)]}
