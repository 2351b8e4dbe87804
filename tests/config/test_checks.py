"""The built-in tasks' configs: compose, validate, and keep the LIBERO PPO settings."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from dexrl.catalog import smoke_overlay
from dexrl.config.checks import Facts, run_config_checks
from dexrl.config.compose import compose
from dexrl.errors import errors

REACH = "reach_ppo_dexbotic_pi0"
BUILTIN = [f"{task}_ppo_dexbotic_{m}" for task in ("reach", "reach_cued") for m in ("pi0", "dm0")]


def _plain(cfg, key: str) -> dict:  # noqa: ANN001
    return OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_task_configs_are_valid_on_a_cpu_and_on_eight_gpus(name: str) -> None:
    cfg = compose(name)
    task, _, model = name.partition("_ppo_")
    for gpus in (1, 8):
        assert not errors(run_config_checks(cfg, Facts(task, gpus))), gpus
    for split in ("train", "eval"):
        assert cfg.env[split].dexrl_env == task and cfg.env[split].env_type == "libero"
    assert cfg.actor.model.model_type == model and cfg.runner.logger.experiment_name == name
    assert cfg.actor.fsdp_config.strategy == "fsdp2" and cfg.weight_syncer.type == "bucket"


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_task_configs_keep_the_ppo_settings_of_libero_spatial(name: str) -> None:
    model = name.partition("_ppo_")[2]
    reach, spatial = compose(name), compose(f"libero_spatial_ppo_{model}")
    assert _plain(reach, "algorithm") == _plain(spatial, "algorithm")
    assert _plain(reach, "rollout.sampling_params") == _plain(spatial, "rollout.sampling_params")
    mine, theirs = _plain(reach, "actor.model.dexbotic"), _plain(spatial, "actor.model.dexbotic")
    if name == "reach_cued_ppo_dexbotic_dm0":  # the tiny DM0 reads its cues only so
        assert mine.pop("train_expert_only") is False and theirs.pop("train_expert_only")
    if name.startswith("reach_cued"):  # a random policy explores more to find the cues
        assert mine.pop("noise_level") == 1.5 and theirs.pop("noise_level") == 0.5
        assert mine.pop("noise_logvar_range") == [0.5, 1.5]
        assert theirs.pop("noise_logvar_range") == [0.08, 0.16]
    if model == "dexbotic_dm0":  # the task's short prompts
        assert mine.pop("model_max_length") == 48 and theirs.pop("model_max_length") == 200
    assert mine == theirs


def test_bad_cued_task_settings_are_config_errors() -> None:
    cfg = compose("reach_cued_ppo_dexbotic_pi0", ["env.train.reach_cued.colors=[red,green]",
                                                  "env.eval.init_params.camera_widths=8"])
    found = {(f.code, f.where) for f in errors(run_config_checks(cfg, Facts("reach_cued", 1)))}
    assert found == {("reach-colors-count", "env.train.reach_cued.colors"),
                     ("reach-images-too-small", "env.eval.init_params")}


def test_smoke_adds_no_overlay_to_reach() -> None:
    assert smoke_overlay("reach", None) is None
    assert smoke_overlay(None, REACH) is None
    assert smoke_overlay("spatial", None) == "cpu"
    assert smoke_overlay(None, "libero_10_ppo_dexbotic_dm0") == "cpu"
