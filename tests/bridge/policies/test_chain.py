"""The denoising chain's PPO maths (:mod:`dexrl.bridge.policies.chain`) that stand alone; the
chain inside the adapter is tested in ``test_flow.py``."""

from __future__ import annotations

import torch

from dexrl.bridge.policies.chain import gaussian_entropy


def test_entropy_is_the_gaussian_entropy() -> None:
    std = torch.tensor([0.0, 0.1, 1.0, 3.0])
    expected = torch.distributions.Normal(0.0, std[1:]).entropy()
    assert gaussian_entropy(std)[0] == 0
    torch.testing.assert_close(gaussian_entropy(std)[1:], expected)
