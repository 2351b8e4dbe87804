"""The memory plans' settings: what each sets on the shipped configs, that they reach the
composed config RLinf gets, and that a user's key=value wins over them."""

from __future__ import annotations

import pytest

from dexrl.config.compose import compose
from dexrl.config.memory_plans import (
    CHOICES,
    NAMES,
    apply_plan,
    check_choice,
    micro_batch,
    plan_named,
    plan_overrides,
    plan_settings,
    user_wins,
)
from dexrl.config.settings import Settings
from dexrl.errors import DexrlError

SPATIAL = {"pi0": "libero_spatial_ppo_dexbotic_pi0", "dm0": "libero_spatial_ppo_dexbotic_dm0"}


def _settings(name: str, overrides: list[str] | None = None) -> Settings:
    return Settings.read(compose(name, overrides or []))


def test_the_plans_go_from_large_to_small_and_auto_comes_first() -> None:
    assert NAMES == ("80gb", "48gb", "24gb") and CHOICES[0] == "auto"
    assert check_choice(None) == check_choice("auto") == "auto"
    with pytest.raises(DexrlError) as err:
        check_choice("16gb")
    assert err.value.code == "flags-memory-plan-unknown"


def test_the_80gb_plan_is_the_shipped_config() -> None:
    for name in SPATIAL.values():
        assert plan_settings(plan_named("80gb"), _settings(name)) == {}


@pytest.mark.parametrize(("model", "mbs"), [("pi0", 16), ("dm0", 8)])
def test_the_24gb_plan_moves_the_cache_and_the_idle_workers_to_the_host(model: str,
                                                                        mbs: int) -> None:
    """DM0's activations per sample are three times π0's: its micro-batch is halved again."""
    s = _settings(SPATIAL[model])
    assert plan_settings(plan_named("24gb"), s) == {
        "actor.micro_batch_size": mbs,
        "actor.model.dexbotic.prefix_cache.device_gb": 0.0,
        "actor.model.dexbotic.prefix_cache.host_gb": 32.0,
        "actor.enable_offload": True,
        "rollout.enable_offload": True,
    }


@pytest.mark.parametrize("plan", NAMES)
@pytest.mark.parametrize("model", ["pi0", "dm0"])
def test_each_plan_reaches_the_config_rlinf_gets(plan: str, model: str) -> None:
    base = _settings(SPATIAL[model])
    settings = plan_settings(plan_named(plan), base)
    cfg = compose(SPATIAL[model], plan_overrides(plan_named(plan), base))
    assert cfg.runner.memory_plan == plan
    for key, value in settings.items():
        node = cfg
        for part in key.split("."):
            node = node[part]
        assert node == value, key
    # the global batch still divides: the micro-batch is a divisor of the shipped one
    assert cfg.actor.global_batch_size % cfg.actor.micro_batch_size == 0


def test_a_plan_never_raises_what_a_config_has_lower() -> None:
    """The reach recipe's micro-batch of 2 and a user's cache of 1 GB stay as they are."""
    s = _settings("reach_ppo_dexbotic_pi0", ["actor.model.dexbotic.prefix_cache.device_gb=0",
                                             "actor.model.dexbotic.prefix_cache.host_gb=64"])
    assert s.actor.micro_batch_size == 2
    settings = plan_settings(plan_named("24gb"), s)
    assert "actor.micro_batch_size" not in settings
    assert not any(key.startswith("actor.model.dexbotic.prefix_cache") for key in settings)
    assert micro_batch(plan_named("48gb"), _settings(SPATIAL["pi0"])) == 16


def test_the_async_mode_gets_no_offload() -> None:
    s = _settings(SPATIAL["pi0"], ["+mode=async"])
    settings = plan_settings(plan_named("24gb"), s)
    assert "actor.enable_offload" not in settings and "rollout.enable_offload" not in settings


def test_a_users_key_value_wins_and_is_named() -> None:
    base = _settings(SPATIAL["pi0"], ["actor.micro_batch_size=32"])
    plan = plan_named("24gb")
    user = ["actor.micro_batch_size=32", "runner.max_steps=3"]
    cfg = compose(SPATIAL["pi0"], [*plan_overrides(plan, base), *user])
    assert cfg.actor.micro_batch_size == 32  # the user's, not the plan's 16
    assert cfg.actor.enable_offload is True  # the plan's, which the user left alone
    assert user_wins(plan_settings(plan, base), user) == {"actor.micro_batch_size": "32"}
    assert user_wins(plan_settings(plan, base), ["runner.max_steps=3"]) == {}


@pytest.mark.parametrize("plan", NAMES)
def test_a_plan_applied_to_a_composed_config_equals_composing_with_it(plan: str) -> None:
    """What train does (one composition, the plan set on a copy) is what Hydra composes with
    the plan's overrides before the user's."""
    from omegaconf import OmegaConf

    user = ["actor.micro_batch_size=32", "runner.max_steps=3"]
    cfg = compose(SPATIAL["dm0"], user)
    applied, settings, kept = apply_plan(cfg, plan_named(plan), user)
    hydra = compose(SPATIAL["dm0"], [*plan_overrides(plan_named(plan), Settings.read(cfg)),
                                     *user])
    assert OmegaConf.to_container(applied) == OmegaConf.to_container(hydra)
    assert OmegaConf.to_container(cfg) != OmegaConf.to_container(applied)  # a copy, changed
    assert (kept == {"actor.micro_batch_size": "32"}) == (plan != "80gb")
