"""The one override parser and applier: Hydra's grammar for training and run configs, free-text
values for eval's env config, YAML typing, and each target's error codes."""

from __future__ import annotations

import pytest
from omegaconf import DictConfig, OmegaConf

from dexrl.config.overrides import ENV, RUN, TRAINING, apply_overrides, parse_overrides
from dexrl.errors import DexrlError


def _cfg() -> DictConfig:
    cfg = OmegaConf.create({"runner": {"max_steps": 3}, "env": {"task": {"text": "a"}}})
    OmegaConf.set_struct(cfg, True)
    return cfg


def test_values_are_typed_as_yaml_and_plus_adds_a_key() -> None:
    cfg = _cfg()
    apply_overrides(cfg, parse_overrides(["runner.max_steps=7", "+runner.tags=[a,b]",
                                          "env.task={extra: 1}"], RUN), RUN)
    assert cfg.runner.max_steps == 7 and list(cfg.runner.tags) == ["a", "b"]
    assert cfg.env.task.extra == 1 and cfg.env.task.text == "a"


@pytest.mark.parametrize(("items", "target", "code"), [
    (["runner.max_stepz=1"], RUN, "override-unknown-key"),
    (["~runner.max_steps"], RUN, "override-unknown-key"),
    (["runner.max_steps"], RUN, "override-syntax"),
    (["runner.max_steps=1,2"], TRAINING, "override-sweep"),
    (["=1"], TRAINING, "override-no-key"),
    (["runner.max_stepz=1"], ENV, "eval-env-override-invalid"),
    (["+runner.new=1"], ENV, "eval-env-override-invalid"),
    (["runner.max_steps"], ENV, "eval-env-override-syntax"),
])
def test_each_target_refuses_with_its_code(items: list[str], target: str, code: str) -> None:
    with pytest.raises(DexrlError) as err:
        apply_overrides(_cfg(), parse_overrides(items, target), target)
    assert err.value.code == code


def test_env_values_are_free_text() -> None:
    """An instruction may hold commas and quotes, which Hydra's grammar refuses."""
    cfg = _cfg()
    text = "put the robot's cup left, then right"
    apply_overrides(cfg, parse_overrides([f"env.task.text={text}"], ENV), ENV)
    assert cfg.env.task.text == text
    with pytest.raises(DexrlError):
        parse_overrides([f"env.task.text={text}"], RUN)
