"""DM0's own inference facts: the quantile normalization mode and the prompt length override.

What DM0 shares with π0 (dispatch, shapes, determinism, layout, errors) is in
``tests/models/flow/test_policy.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.env_obs import policy_obs

from dexrl.checkpoints.policy import load_policy
from dexrl.errors import DexrlError
from dexrl.models.dm0.policy import Dm0Policy
from dexrl.models.dm0.tiny import TINY_PROMPT_LENGTH
from dexrl.models.transforms import denormalize

CHUNK = 8  # chunk_size of the tiny checkpoint


@pytest.fixture(scope="module")
def policy(tiny_dm0_dir: Path) -> Dm0Policy:
    return load_policy(tiny_dm0_dir)


def _env_obs() -> dict:
    return policy_obs(2, 0, size=64)


def _noise(batch: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.randn(batch, CHUNK, 32, generator=torch.Generator().manual_seed(seed))


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


def test_prompt_length_override_does_not_change_outputs(tiny_dm0_dir: Path, policy) -> None:
    longer = Dm0Policy.from_checkpoint(tiny_dm0_dir, model_max_length=TINY_PROMPT_LENGTH + 40)
    obs = _env_obs()
    assert longer.observation(obs).tokens.shape == (2, TINY_PROMPT_LENGTH + 40)
    out = longer.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    base = policy.predict(obs, noise=_noise(), num_steps=2)["raw_actions"]
    torch.testing.assert_close(out, base, rtol=1e-5, atol=1e-6)
