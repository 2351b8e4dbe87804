"""dexrl's RLinf π0 adapter (:mod:`dexrl.bridge.policies.pi0`): its builder's settings (the
adapter's maths are in ``test_flow.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexrl.bridge.policies.pi0 import build
from dexrl.errors import DexrlError

CHUNK = 8  # chunk_size of the tiny checkpoint
pytestmark = pytest.mark.parametrize("model", ["pi0"], indirect=True)


def test_sdpa_attention_setting_reaches_the_network(model_dir: Path) -> None:
    cfg = {"model_path": str(model_dir), "num_action_chunks": 5,
           "dexbotic": {"attention": "sdpa"}}
    assert build(cfg, None).pi0.network.attention == "sdpa"


def test_bad_settings_fail_clearly(model_dir: Path) -> None:
    base = {"model_path": str(model_dir), "num_action_chunks": 5, "action_dim": 7}
    cases = [
        ({"dexbotic": {"noise_method": "flow_ode"}}, "noise_method"),
        ({"dexbotic": {"noise_method": "flow_noise", "noise_logvar_range": [0.2, 0.1]}},
         "noise_logvar_range"),
        ({"dexbotic": {"noise_method": "flow_noise", "noise_logvar_range": "wide"}},
         "noise_logvar_range"),
        ({"dexbotic": {"noise_method": "flow_cps", "noise_level": 2.0}}, "noise_level"),
        ({"safe_get_logprob": True}, "safe_get_logprob"),
        ({"num_action_chunks": CHUNK + 1}, "num_action_chunks"),
        ({"num_steps": 1, "ignore_last": True}, "num_steps"),
        ({"model_path": None}, "model_path"),
        ({"dexbotic": {"attention": "flash"}}, "attention"),
        ({"dexbotic": {"prefix_cache": {"host_gb": -2}}}, "prefix_cache.host_gb"),
    ]
    for override, key in cases:
        with pytest.raises(DexrlError) as info:
            build({**base, **override}, None)
        assert key in info.value.where
