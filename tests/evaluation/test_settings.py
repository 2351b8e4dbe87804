"""Defaults and their sources, checkpoint/suite mismatch, and the LIBERO env config."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexrl.checkpoints.sources import CheckpointSource, resolve_checkpoint
from dexrl.errors import DexrlError
from dexrl.evaluation.request import EvalRequest
from dexrl.evaluation.settings import EvalSettings, env_config, resolve_settings

ARGS = dict(suite="libero_spatial", tasks=[0, 1], episodes_per_task=3, num_envs=None, seed=0,
            num_steps=None, action_chunk=None, max_episode_steps=None, video="none",
            device="cpu", dtype=None, env_overrides=[])


def settings_of(source: CheckpointSource, *, tasks: list[int], env_overrides: list[str],
                **options: object) -> EvalSettings:
    """:func:`resolve_settings` of the options as an EvalRequest (``tasks`` already ids)."""
    request = EvalRequest(ckpt=str(source.path), env_overrides=tuple(env_overrides), **options)
    return resolve_settings(source, request, tasks)


def test_rlinf_checkpoint_defaults_come_from_training(tiny_run: Path) -> None:
    s = settings_of(resolve_checkpoint(tiny_run), **ARGS)
    assert (s.action_chunk, s.num_steps, s.max_episode_steps) == (5, 4, 220)
    assert s.sources["action_chunk"].startswith("training config")
    assert s.sources["max_episode_steps"] == "suite horizon of libero_spatial"
    assert 1 <= s.num_envs <= 6


def test_rlinf_weights_run_the_training_protocol(tiny_run: Path) -> None:
    s = settings_of(resolve_checkpoint(tiny_run), **ARGS)
    assert (s.protocol, s.settle_steps, s.scene_seed, s.deviations) == ("training", 15, None, [])
    assert s.sources["protocol"] == "default for a rlinf checkpoint on libero_spatial"


def test_a_dexbotic_checkpoint_runs_the_published_protocol(tiny_pi0_dir: Path) -> None:
    s = settings_of(resolve_checkpoint(tiny_pi0_dir), **{**ARGS, "num_envs": 8})
    assert (s.protocol, s.action_chunk, s.num_steps, s.max_episode_steps) == ("standard", 5,
                                                                              10, 220)
    assert (s.settle_steps, s.scene_seed, s.deviations) == (10, 7, [])
    assert "replan_steps=5" in s.sources["action_chunk"]
    assert "max_steps per suite" in s.sources["max_episode_steps"]
    assert s.num_envs == 2 and "capped at 2 (tasks)" in s.sources["num_envs"]  # one env a task
    off = settings_of(resolve_checkpoint(tiny_pi0_dir), **{
        **ARGS, "action_chunk": 8, "num_steps": 10, "env_overrides": ["use_rel_reward=false"]})
    assert off.protocol == "standard" and off.deviations == ["--action-chunk 8",
                                                             "use_rel_reward=false"]
    assert not off.protocol_value().exact and s.protocol_value().exact


def test_the_standard_protocol_is_libero_s(tiny_pi0_dir: Path) -> None:
    for protocol, code in (("standard", "eval-protocol-unavailable"),
                           ("openpi", "eval-protocol-unknown")):
        with pytest.raises(DexrlError) as err:
            settings_of(resolve_checkpoint(tiny_pi0_dir), **{**ARGS, "suite": "reach"},
                        protocol=protocol)
        assert err.value.code == code and err.value.where == "--protocol"
    s = settings_of(resolve_checkpoint(tiny_pi0_dir), **{**ARGS, "suite": "reach"})
    assert s.protocol == "training"


def test_no_libero_env_is_stepped_past_robosuite_s_horizon(tiny_pi0_dir: Path) -> None:
    source = resolve_checkpoint(tiny_pi0_dir)
    with pytest.raises(DexrlError, match="robosuite's horizon") as err:
        settings_of(source, **{**ARGS, "max_episode_steps": 987})  # 10 + 987 + 5 - 1 > 1000
    assert err.value.code == "eval-horizon-too-long" and "986 or less" in err.value.hint
    assert settings_of(source, **{**ARGS, "max_episode_steps": 986}).max_episode_steps == 986


def test_dexbotic_checkpoint_defaults_come_from_the_model_config(tiny_pi0_dir: Path) -> None:
    s = settings_of(resolve_checkpoint(tiny_pi0_dir),
                    **{**ARGS, "suite": "goal", "num_steps": 2, "num_envs": 50},
                    protocol="training")
    # the model config's 10 actions per call, capped at the tiny checkpoint's chunk of 8
    assert (s.suite, s.action_chunk, s.num_steps, s.max_episode_steps) == ("libero_goal", 8,
                                                                           2, 300)
    assert s.sources["num_steps"] == "command line"
    assert s.sources["action_chunk"] == ("dexrl model config model/dexbotic_pi0.yaml, capped "
                                         "at the checkpoint's chunk_size 8")
    assert s.num_envs == 6  # never more envs than episodes


def test_suite_mismatch(tiny_run: Path) -> None:
    source = resolve_checkpoint(tiny_run)
    with pytest.raises(DexrlError, match="trained on libero_spatial, not libero_10") as err:
        settings_of(source, **{**ARGS, "suite": "libero_10"})
    assert err.value.code == "eval-suite-mismatch"
    assert "--allow-suite-mismatch" in err.value.hint
    s = settings_of(source, **{**ARGS, "suite": "libero_10"}, allow_suite_mismatch=True)
    assert s.suite == "libero_10"


@pytest.mark.parametrize(
    ("change", "code"),
    [({"suite": "libero_100"}, "unknown-suite"), ({"action_chunk": 9}, "eval-value-out-of-range"),
     ({"num_steps": 0}, "eval-value-out-of-range"),
     ({"max_episode_steps": -5}, "eval-value-out-of-range"),
     ({"video": "some"}, "eval-video-mode-unknown"), ({"device": "tpu"}, "eval-device-unknown"),
     ({"num_envs": -1}, "eval-value-out-of-range")],
)
def test_bad_values(tiny_pi0_dir: Path, change: dict, code: str) -> None:
    with pytest.raises(DexrlError) as err:
        settings_of(resolve_checkpoint(tiny_pi0_dir), **{**ARGS, **change})
    assert err.value.code == code


def test_env_config(tiny_run: Path) -> None:
    source = resolve_checkpoint(tiny_run)
    s = settings_of(source, **{**ARGS, "env_overrides": [
        "init_params.camera_heights=128", "reset_gripper_open=false"]})
    cfg = env_config(s, source)
    assert cfg.task_suite_name == "libero_spatial" and list(cfg.task_id_filter) == [0, 1]
    assert cfg.init_params.camera_heights == 128 and cfg.init_params.camera_widths == 256
    assert cfg.reset_gripper_open is False
    assert (cfg.is_eval, cfg.auto_reset, cfg.ignore_terminations) == (True, False, False)
    assert cfg.max_episode_steps == 220 and cfg.total_num_envs == s.num_envs


@pytest.mark.parametrize(
    ("item", "code"),
    [("seed=3", "eval-env-override-owned"), ("auto_reset=true", "eval-env-override-owned"),
     ("camera=1", "eval-env-override-invalid"),
     ("init_params.camera_heights", "eval-env-override-syntax"),
     ("=3", "eval-env-override-syntax")],
)
def test_env_overrides_rejected(tiny_pi0_dir: Path, item: str, code: str) -> None:
    source = resolve_checkpoint(tiny_pi0_dir)
    s = settings_of(source, **{**ARGS, "env_overrides": [item]})
    with pytest.raises(DexrlError) as err:
        env_config(s, source)
    assert err.value.code == code
    assert err.value.where == item
