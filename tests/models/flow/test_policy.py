"""``load_policy(...).predict(obs)`` on the tiny π0 and DM0 (:mod:`dexrl.models.flow.policy`):
dispatch, shapes, dtypes, determinism, the action transform, the observation layout, errors.

DM0's normalization modes and prompt length are in ``tests/models/dm0/test_policy.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.env_obs import policy_obs

from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.dm0.tiny import TINY_PROMPT_LENGTH, TINY_VISION
from dexrl.models.flow.policy import FlowPolicy
from dexrl.models.pi0.policy import Pi0Policy
from dexrl.models.transforms import denormalize

CHUNK = 8  # chunk_size of the tiny checkpoints
POLICY = {"pi0": Pi0Policy, "dm0": Dm0Policy}
FRAME = {"pi0": 48, "dm0": 64}  # env frame size (the policy resizes to its tower's)
IMAGE = {"pi0": 32, "dm0": TINY_VISION.image_size}  # the tower's (DM0's comes from the tower)
PROMPT = {"pi0": 16, "dm0": TINY_PROMPT_LENGTH}
# The least change of the raw actions when the prompts change.
PROMPT_EFFECT = {"pi0": 1e-4, "dm0": 1e-5}
# Weights that load_policy(dtype="bf16") must have cast.
BF16_PROBES = {"pi0": ("state_proj", "action_out_proj"), "dm0": ("action_out_proj",)}


@pytest.fixture(scope="module")
def policy(model_dir: Path) -> FlowPolicy:
    return load_policy(model_dir)


@pytest.fixture
def make_env_obs(model: str):  # noqa: ANN201 - (batch, seed) -> observations
    return lambda batch=2, seed=0: policy_obs(batch, seed, FRAME[model])


def _noise(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, CHUNK, 32, generator=torch.Generator().manual_seed(seed))


def test_load_policy_dispatches_on_model_type(model: str, policy: FlowPolicy) -> None:
    assert type(policy) is POLICY[model] and policy.norm_mode == "mean_std"


def test_predict_shapes_and_dtypes(policy: FlowPolicy, make_env_obs) -> None:
    out = policy.predict(make_env_obs(3), noise=_noise(3), num_steps=3, num_action_chunks=5)
    assert out["actions"].shape == (3, 5, 7) and out["actions"].dtype == torch.float32
    assert out["raw_actions"].shape == (3, CHUNK, 32) and out["raw_actions"].dtype == torch.float32
    assert torch.isfinite(out["actions"]).all()
    assert policy.predict(make_env_obs(), num_steps=1)["actions"].shape == (2, CHUNK, 7)


def test_predict_is_deterministic_given_noise(policy: FlowPolicy, make_env_obs) -> None:
    first = policy.predict(make_env_obs(), noise=_noise(seed=1), num_steps=4)
    again = policy.predict(make_env_obs(), noise=_noise(seed=1), num_steps=4)
    other = policy.predict(make_env_obs(), noise=_noise(seed=2), num_steps=4)
    assert torch.equal(first["raw_actions"], again["raw_actions"])
    assert torch.equal(first["actions"], again["actions"])
    assert not torch.allclose(first["raw_actions"], other["raw_actions"])


def test_prompt_changes_the_actions(model: str, policy: FlowPolicy, make_env_obs) -> None:
    obs = make_env_obs()
    base = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    obs["task_descriptions"] = ["turn on the stove", "push the plate"]
    moved = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    assert (moved - base).abs().amax(dim=(1, 2)).min() > PROMPT_EFFECT[model]


def test_actions_are_state_relative_except_the_gripper(policy: FlowPolicy, make_env_obs) -> None:
    obs = make_env_obs()
    out = policy.predict(obs, noise=_noise(), num_steps=2)
    delta = denormalize(out["raw_actions"], policy.norm_stats.action, "mean_std")[..., :7]
    states = torch.from_numpy(obs["states"])
    torch.testing.assert_close(out["actions"][..., :6], delta[..., :6] + states[:, None, :6])
    torch.testing.assert_close(out["actions"][..., 6], delta[..., 6])


def test_observation_layout(model: str, policy: FlowPolicy, make_env_obs) -> None:
    obs = policy.observation(make_env_obs())
    size = IMAGE[model]
    assert obs.images.shape == (2, 3, 3, size, size)
    assert obs.images.min() >= -1 and obs.images.max() <= 1
    assert obs.image_masks.tolist() == [[True, True, False]] * 2
    assert torch.equal(obs.images[:, 2], torch.zeros_like(obs.images[:, 2]))
    assert obs.tokens.shape == obs.token_mask.shape == (2, PROMPT[model])
    assert obs.state.shape == (2, 32) and obs.state.dtype == torch.float32


def test_dtype_by_name(model: str, model_dir: Path, make_env_obs) -> None:
    bf16 = load_policy(model_dir, dtype="bf16")
    for name in BF16_PROBES[model]:
        assert getattr(bf16.network.model, name).weight.dtype == torch.bfloat16, name
    out = bf16.predict(make_env_obs(), noise=_noise(), num_steps=2)
    assert out["actions"].dtype == torch.float32 and torch.isfinite(out["actions"]).all()
    with pytest.raises(DexrlError) as err:
        load_policy(model_dir, dtype="int3")
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
def test_bad_env_obs(policy: FlowPolicy, make_env_obs, change, message: str) -> None:
    obs = make_env_obs()
    change(obs)
    with pytest.raises(DexrlError, match=message):
        policy.predict(obs, num_steps=1)


def test_bad_predict_arguments(policy: FlowPolicy, make_env_obs) -> None:
    with pytest.raises(DexrlError) as err:
        policy.predict(make_env_obs(), noise=torch.zeros(2, CHUNK + 1, 32))
    assert err.value.code == "policy-noise-shape"
    with pytest.raises(DexrlError) as err:
        policy.predict(make_env_obs(), num_action_chunks=CHUNK + 1)
    assert err.value.code == "policy-action-chunks-invalid"
    with pytest.raises(DexrlError) as err:
        policy.predict(make_env_obs(), num_steps=0)
    assert err.value.code == "policy-num-steps-invalid"
