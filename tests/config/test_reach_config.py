"""The reach learning-run config: composes, validates, and keeps the LIBERO PPO settings."""

from __future__ import annotations

from omegaconf import OmegaConf

from dexrl.catalog import smoke_overlay
from dexrl.config.checks import Facts, run_config_checks
from dexrl.config.compose import compose
from dexrl.errors import errors

REACH = "reach_ppo_dexbotic_pi0"


def _plain(cfg, key: str) -> dict:  # noqa: ANN001
    return OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)


def test_reach_config_is_valid_on_a_cpu_and_on_eight_gpus() -> None:
    cfg = compose(REACH)
    for gpus in (1, 8):
        assert not errors(run_config_checks(cfg, Facts("reach", gpus))), gpus
    assert cfg.env.train.dexrl_env == "reach" and cfg.env.train.env_type == "libero"
    assert cfg.actor.fsdp_config.strategy == "fsdp2" and cfg.weight_syncer.type == "bucket"


def test_reach_keeps_the_ppo_settings_of_libero_spatial() -> None:
    reach, spatial = compose(REACH), compose("libero_spatial_ppo_dexbotic_pi0")
    assert _plain(reach, "algorithm") == _plain(spatial, "algorithm")
    assert _plain(reach, "actor.model.dexbotic") == _plain(spatial, "actor.model.dexbotic")
    assert _plain(reach, "rollout.sampling_params") == _plain(spatial, "rollout.sampling_params")


def test_smoke_adds_no_overlay_to_reach() -> None:
    assert smoke_overlay("reach", None) is None
    assert smoke_overlay(None, REACH) is None
    assert smoke_overlay("spatial", None) == "cpu"
    assert smoke_overlay(None, "libero_10_ppo_dexbotic_dm0") == "cpu"
