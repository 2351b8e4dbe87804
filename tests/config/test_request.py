"""The one override list of train, validate and doctor (dexrl/config/request.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexrl.config.request import ConfigRequest
from dexrl.errors import DexrlError


def test_no_flags_add_no_overrides() -> None:
    assert ConfigRequest(suite="libero_spatial", model="pi0").hydra_overrides() == []


def test_overrides_apply_in_order_the_users_last() -> None:
    request = ConfigRequest(suite="libero_spatial", model="pi0", mode="async", algo="grpo",
                            smoke=True, ckpt_path=Path("/ckpt"), overrides=("runner.max_steps=2",))
    assert request.hydra_overrides() == ["+smoke=cpu", "actor.model.model_path=/ckpt",
                                         "+mode=async", "+algo=grpo", "runner.max_steps=2"]


def test_sync_is_the_shipped_mode() -> None:
    assert ConfigRequest(config_name="reach_ppo_dexbotic_pi0", mode="sync").hydra_overrides() == []


@pytest.mark.parametrize(("flags", "code"), [({"mode": "asink"}, "flags-mode-unknown"),
                                              ({"algo": "dpo"}, "flags-algo-unknown")])
def test_unknown_choices_are_refused(flags: dict[str, str], code: str) -> None:
    with pytest.raises(DexrlError) as err:
        ConfigRequest(suite="libero_spatial", model="pi0", **flags).hydra_overrides()
    assert err.value.code == code


def test_only_a_model_or_config_names_a_config() -> None:
    assert not ConfigRequest(suite="reach").names_config
    assert ConfigRequest(suite="reach", model="pi0").names_config
    assert ConfigRequest(config_name="reach_ppo_dexbotic_pi0").names_config
