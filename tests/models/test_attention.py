"""The shared attention's ``sdpa`` implementation (a GPU speed lever, off by default) against the
eager reference: equal to float noise in fp32 on the CPU; bf16 on CUDA under the ``gpu`` marker."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dexrl.checkpoints.policy import load_policy
from dexrl.models.dm0.tiny import write_tiny_dm0

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _obs(batch: int, size: int) -> dict:
    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8),
            "states": rng.normal(size=(batch, 8)),
            "task_descriptions": ["open the top drawer", "turn on the stove"][:batch]}


def _both(path: Path, device: str, dtype: torch.dtype | None) -> tuple[torch.Tensor, ...]:
    """Raw actions of the eager and the sdpa attention on the same inputs and noise."""
    policy = load_policy(path, device=device, dtype=dtype)
    obs = _obs(2, 48)
    chunk = policy.network.config.chunk_size
    noise = torch.randn(2, chunk, 32, generator=torch.Generator().manual_seed(0))
    outputs = []
    for attention in ("eager", "sdpa"):
        policy.network.attention = attention
        outputs.append(policy.predict(obs, noise=noise, num_steps=4)["raw_actions"].float())
    return tuple(outputs)


@pytest.fixture(scope="module")
def tiny_dm0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_dm0(tmp_path_factory.mktemp("tiny_dm0_attention") / "ckpt")


@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_sdpa_equals_eager_to_float_noise_on_the_cpu(model: str, tiny_pi0_dir: Path,
                                                     tiny_dm0: Path) -> None:
    eager, sdpa = _both(tiny_pi0_dir if model == "pi0" else tiny_dm0, "cpu", None)
    torch.testing.assert_close(sdpa, eager, rtol=0, atol=1e-5)
    assert not torch.equal(eager, torch.zeros_like(eager))


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_sdpa_equals_eager_to_bf16_noise_on_cuda(model: str, tiny_pi0_dir: Path,
                                                 tiny_dm0: Path) -> None:
    eager, sdpa = _both(tiny_pi0_dir if model == "pi0" else tiny_dm0, "cuda", torch.bfloat16)
    torch.testing.assert_close(sdpa, eager, rtol=0, atol=3e-2)
