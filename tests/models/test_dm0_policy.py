"""``load_policy(dm0_dir).predict(env_obs)``: dispatch, shapes, determinism, normalization mode."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.dm0.tiny import TINY_PROMPT_LENGTH, TINY_VISION, write_tiny_dm0
from dexrl.models.pi0.policy import Pi0Policy
from dexrl.models.transforms import denormalize

CHUNK = 8  # chunk_size of the tiny checkpoint


@pytest.fixture(scope="module")
def tiny_dm0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_dm0(tmp_path_factory.mktemp("tiny_dm0") / "ckpt", seed=0)


@pytest.fixture(scope="module")
def policy(tiny_dm0_dir: Path) -> Dm0Policy:
    return load_policy(tiny_dm0_dir)


def _env_obs(batch: int = 2, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    tasks = ["pick up the black bowl and place it on the plate", "open the top drawer",
             "put the_butter in the basket\n"]
    return {
        "main_images": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
        "wrist_images": rng.integers(0, 256, (batch, 64, 64, 3), dtype=np.uint8),
        "states": rng.normal(size=(batch, 8)).astype(np.float32),
        "task_descriptions": tasks[:batch],
    }


def _noise(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, CHUNK, 32, generator=torch.Generator().manual_seed(seed))


def test_load_policy_dispatches_on_model_type(policy: Dm0Policy, tiny_pi0_dir: Path) -> None:
    assert type(policy) is Dm0Policy and policy.norm_mode == "mean_std"
    assert type(load_policy(tiny_pi0_dir)) is Pi0Policy


def test_predict_shapes_and_determinism(policy: Dm0Policy) -> None:
    out = policy.predict(_env_obs(3), noise=_noise(3), num_steps=3, num_action_chunks=5)
    assert out["actions"].shape == (3, 5, 7) and out["actions"].dtype == torch.float32
    assert out["raw_actions"].shape == (3, CHUNK, 32) and out["raw_actions"].dtype == torch.float32
    assert torch.isfinite(out["actions"]).all()
    again = policy.predict(_env_obs(3), noise=_noise(3), num_steps=3, num_action_chunks=5)
    assert torch.equal(out["raw_actions"], again["raw_actions"])
    other = policy.predict(_env_obs(3), noise=_noise(3, seed=1), num_steps=3)
    assert not torch.allclose(out["raw_actions"], other["raw_actions"])


def test_prompt_changes_the_actions(policy: Dm0Policy) -> None:
    obs = _env_obs()
    base = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    obs["task_descriptions"] = ["turn on the stove", "push the plate"]
    moved = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    assert (moved - base).abs().amax(dim=(1, 2)).min() > 1e-5


def test_observation_layout(policy: Dm0Policy) -> None:
    obs = policy.observation(_env_obs())
    size = TINY_VISION.image_size  # the tower's size: DM0's preprocessing comes from the tower
    assert obs.images.shape == (2, 3, 3, size, size)
    assert obs.images.min() >= -1 and obs.images.max() <= 1
    assert obs.image_masks.tolist() == [[True, True, False]] * 2
    assert obs.tokens.shape == obs.token_mask.shape == (2, TINY_PROMPT_LENGTH)
    assert obs.state.shape == (2, 32)


def test_actions_are_state_relative_except_the_gripper(policy: Dm0Policy) -> None:
    obs = _env_obs()
    out = policy.predict(obs, noise=_noise(), num_steps=2)
    delta = denormalize(out["raw_actions"], policy.norm_stats.action, "mean_std")[..., :7]
    states = torch.from_numpy(obs["states"])
    torch.testing.assert_close(out["actions"][..., :6], delta[..., :6] + states[:, None, :6])
    torch.testing.assert_close(out["actions"][..., 6], delta[..., 6])


def test_quantile_mode_is_explicit(tiny_dm0_dir: Path, policy: Dm0Policy) -> None:
    quantile = load_policy(tiny_dm0_dir, norm_mode="quantile")
    assert quantile.norm_mode == "quantile"
    obs = _env_obs()
    out = quantile.predict(obs, noise=_noise(), num_steps=2)
    delta = denormalize(out["raw_actions"], quantile.norm_stats.action, "quantile")[..., :7]
    torch.testing.assert_close(out["actions"][..., 6], delta[..., 6])
    mean_std = policy.predict(obs, noise=_noise(), num_steps=2)
    assert not torch.allclose(out["actions"], mean_std["actions"])
    with pytest.raises(DexrlError, match="unknown norm_mode 'minmax'") as err:
        load_policy(tiny_dm0_dir, norm_mode="minmax")
    assert err.value.code == "norm-mode-unknown"


def test_bf16_policy_predicts(tiny_dm0_dir: Path) -> None:
    bf16 = load_policy(tiny_dm0_dir, dtype="bf16")
    assert bf16.network.model.action_out_proj.weight.dtype == torch.bfloat16
    out = bf16.predict(_env_obs(), noise=_noise(), num_steps=2)
    assert out["actions"].dtype == torch.float32 and torch.isfinite(out["actions"]).all()


def test_prompt_length_override_does_not_change_outputs(tiny_dm0_dir: Path, policy) -> None:
    longer = Dm0Policy.from_checkpoint(tiny_dm0_dir, model_max_length=TINY_PROMPT_LENGTH + 40)
    obs = _env_obs()
    assert longer.observation(obs).tokens.shape == (2, TINY_PROMPT_LENGTH + 40)
    out = longer.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    base = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    torch.testing.assert_close(out, base, rtol=1e-5, atol=1e-6)
