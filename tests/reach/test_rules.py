"""The cued reach task's settings (:mod:`dexrl.reach.rules`): read from the config section, and
each bad one named."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from dexrl.config.compose import compose
from dexrl.reach.rules import CuedTask, check_section


def env_cfg(*overrides: str):  # noqa: ANN201
    return compose("reach_cued_ppo_dexbotic_pi0", list(overrides)).env.train


def test_the_task_is_read_from_its_config_section() -> None:
    section = OmegaConf.to_container(env_cfg().reach_cued)
    task = CuedTask.from_config(section)
    assert len(task.targets) == 3 and task.colors == ("red", "green", "blue")
    assert task.instruction_for(2) == "reach the blue target"


GOOD = OmegaConf.to_container(compose("reach_cued_ppo_dexbotic_pi0").env.train.reach_cued)


@pytest.mark.parametrize(("change", "size", "where", "code"), [
    ({"targets": [[0.5, 0, 0]], "colors": ["red"]}, (64, 64), "targets", "reach-too-few-targets"),
    ({"colors": ["red", "green"]}, (64, 64), "colors", "reach-colors-count"),
    ({"colors": ["red", "red", "blue"]}, (64, 64), "colors", "reach-colors-invalid"),
    ({}, (8, 64), "init_params", "reach-images-too-small"),
    ({"instruction": "reach the target"}, (64, 64), "instruction", "reach-instruction-no-color"),
    ({"success_radius": 0.5}, (64, 64), "success_radius", "reach-success-balls-overlap"),
    ({"targets": [[0.2, 0, 0], [-0.5, 0, 0], [0, 0.6, 0]]}, (64, 64), "success_radius",
     "reach-success-ball-at-start"),
])
def test_bad_settings_are_named(change: dict, size: tuple, where: str, code: str) -> None:
    findings = check_section({**GOOD, **change}, size, "env.train.reach_cued")
    assert findings and all(f.level == "error" for f in findings)
    assert any(f.where.endswith(where) and f.code == code for f in findings), findings
    assert not check_section(GOOD, (64, 64), "env.train.reach_cued")
