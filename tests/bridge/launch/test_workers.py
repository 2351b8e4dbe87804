"""The worker and runner subclasses' own behaviour, without a cluster: W&B and SwanLab run names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from dexrl.bridge.launch import workers


def _cfg(run_dir: Path, experiment_name: str = "") -> Any:
    cfg = OmegaConf.create({"runner": {"logger": {
        "log_path": str(run_dir), "project_name": "dexrl-test", "experiment_name": experiment_name,
        "logger_backends": ["wandb", "swanlab"]}}})
    OmegaConf.set_readonly(cfg, True)
    return cfg


@pytest.fixture
def hub_inits(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict]:
    """What W&B's and SwanLab's ``init`` were called with (their services are never reached)."""
    import swanlab
    import wandb

    seen: dict[str, dict] = {}
    monkeypatch.setattr(wandb, "init", lambda **kw: seen.setdefault("wandb", kw))
    monkeypatch.setattr(swanlab, "init", lambda **kw: seen.setdefault("swanlab", kw))
    return seen


def test_wandb_and_swanlab_runs_are_named_after_the_run_folder(
        tmp_path: Path, hub_inits: dict[str, dict]) -> None:
    cfg = _cfg(tmp_path / "libero_spatial_pi0_20261125-0100")
    workers.run_metric_logger(cfg)
    assert hub_inits["wandb"]["name"] == "libero_spatial_pi0_20261125-0100"
    assert hub_inits["swanlab"]["experiment_name"] == "libero_spatial_pi0_20261125-0100"
    assert cfg.runner.logger.experiment_name == ""  # the checkpoint path RLinf derives stays put
    assert Path(hub_inits["wandb"]["dir"]) == tmp_path / "libero_spatial_pi0_20261125-0100/wandb"


def test_a_name_the_config_gives_is_kept(tmp_path: Path, hub_inits: dict[str, dict]) -> None:
    workers.run_metric_logger(_cfg(tmp_path / "run", experiment_name="mine"))
    assert hub_inits["wandb"]["name"] == "mine"


def test_the_runner_builds_its_logger_with_the_run_name(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """RLinf's constructor looks its MetricLogger up in its module: dexrl's is found there."""
    built: list[Any] = []

    def rlinf_init(self: Any, cfg: Any, *args: Any) -> None:
        built.append(workers.embodied_runner.MetricLogger)

    monkeypatch.setattr(workers.EmbodiedRunner, "__init__", rlinf_init)
    workers.DexrlRunner(_cfg(tmp_path), None, None, None, listener=None)
    assert built == [workers.run_metric_logger]
    assert workers.embodied_runner.MetricLogger is workers.MetricLogger  # restored afterwards


def test_the_env_worker_builds_dexrl_tasks_by_name() -> None:
    from dexrl.reach.env import ReachEnv

    assert workers.dexrl_env_class("reach") is ReachEnv
    with pytest.raises(ValueError, match="unknown dexrl_env 'rech'"):
        workers.dexrl_env_class("rech")
