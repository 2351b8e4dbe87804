"""``load_policy(...).predict(env_obs)``: shapes, dtypes, determinism, action transform, errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.pi0.policy import Pi0Policy
from dexrl.models.transforms import denormalize

CHUNK = 8  # chunk_size of the tiny checkpoint


@pytest.fixture(scope="module")
def policy(tiny_pi0_dir: Path) -> Pi0Policy:
    return load_policy(tiny_pi0_dir)


def _env_obs(batch: int = 2, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    tasks = [
        "pick up the black bowl and place it on the plate",
        "open the top drawer",
        "put the_butter in the basket\n",
    ]
    return {
        "main_images": rng.integers(0, 256, (batch, 48, 48, 3), dtype=np.uint8),
        "wrist_images": rng.integers(0, 256, (batch, 48, 48, 3), dtype=np.uint8),
        "states": rng.normal(size=(batch, 8)).astype(np.float32),
        "task_descriptions": tasks[:batch],
    }


def _noise(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, CHUNK, 32, generator=torch.Generator().manual_seed(seed))


def test_predict_shapes_and_dtypes(policy: Pi0Policy) -> None:
    out = policy.predict(_env_obs(3), noise=_noise(3), num_steps=3, num_action_chunks=5)
    assert out["actions"].shape == (3, 5, 7) and out["actions"].dtype == torch.float32
    assert out["raw_actions"].shape == (3, CHUNK, 32) and out["raw_actions"].dtype == torch.float32
    assert torch.isfinite(out["actions"]).all()
    assert policy.predict(_env_obs(), num_steps=1)["actions"].shape == (2, CHUNK, 7)


def test_predict_is_deterministic_given_noise(policy: Pi0Policy) -> None:
    first = policy.predict(_env_obs(), noise=_noise(seed=1), num_steps=4)
    again = policy.predict(_env_obs(), noise=_noise(seed=1), num_steps=4)
    other = policy.predict(_env_obs(), noise=_noise(seed=2), num_steps=4)
    assert torch.equal(first["raw_actions"], again["raw_actions"])
    assert torch.equal(first["actions"], again["actions"])
    assert not torch.allclose(first["raw_actions"], other["raw_actions"])


def test_prompt_changes_the_actions(policy: Pi0Policy) -> None:
    obs = _env_obs()
    base = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    obs["task_descriptions"] = ["turn on the stove", "push the plate"]
    moved = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    assert (moved - base).abs().amax(dim=(1, 2)).min() > 1e-4


def test_actions_are_state_relative_except_the_gripper(policy: Pi0Policy) -> None:
    obs = _env_obs()
    out = policy.predict(obs, noise=_noise(), num_steps=2)
    delta = denormalize(out["raw_actions"], policy.norm_stats.action, "mean_std")[..., :7]
    states = torch.from_numpy(obs["states"])
    torch.testing.assert_close(out["actions"][..., :6], delta[..., :6] + states[:, None, :6])
    torch.testing.assert_close(out["actions"][..., 6], delta[..., 6])


def test_observation_layout(policy: Pi0Policy) -> None:
    obs = policy.observation(_env_obs())
    assert obs.images.shape == (2, 3, 3, 32, 32)
    assert obs.image_masks.tolist() == [[True, True, False]] * 2
    assert torch.equal(obs.images[:, 2], torch.zeros_like(obs.images[:, 2]))
    assert obs.tokens.shape == obs.token_mask.shape == (2, 16)
    assert obs.state.shape == (2, 32) and obs.state.dtype == torch.float32


def test_dtype_by_name(tiny_pi0_dir: Path) -> None:
    bf16 = load_policy(tiny_pi0_dir, dtype="bf16")
    assert bf16.network.model.state_proj.weight.dtype == torch.bfloat16
    out = bf16.predict(_env_obs(), noise=_noise(), num_steps=2)
    assert out["actions"].dtype == torch.float32 and torch.isfinite(out["actions"]).all()
    with pytest.raises(DexrlError) as err:
        load_policy(tiny_pi0_dir, dtype="int3")
    assert err.value.code == "model-dtype-unknown"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda o: o.pop("states"), "lacks states"),
        (lambda o: o.update(task_descriptions="one string"), "single string"),
        (lambda o: o.update(task_descriptions=["only one"]), "batch sizes differ"),
        (lambda o: o.update(main_images=o["main_images"].astype(np.float32)), "main_images must"),
        (lambda o: o.update(states=np.zeros((2, 40))), "states must"),
    ],
)
def test_bad_env_obs(policy: Pi0Policy, change, message: str) -> None:
    obs = _env_obs()
    change(obs)
    with pytest.raises(DexrlError, match=message):
        policy.predict(obs, num_steps=1)


def test_bad_predict_arguments(policy: Pi0Policy) -> None:
    with pytest.raises(DexrlError) as err:
        policy.predict(_env_obs(), noise=torch.zeros(2, CHUNK + 1, 32))
    assert err.value.code == "policy-noise-shape"
    with pytest.raises(DexrlError) as err:
        policy.predict(_env_obs(), num_action_chunks=CHUNK + 1)
    assert err.value.code == "policy-action-chunks-invalid"
    with pytest.raises(DexrlError) as err:
        policy.predict(_env_obs(), num_steps=0)
    assert err.value.code == "policy-num-steps-invalid"


@pytest.mark.spawns
def test_package_import_is_light() -> None:
    code = (
        "import sys, dexrl.models; print(any(m in sys.modules for m in ('torch', 'transformers')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "False"
