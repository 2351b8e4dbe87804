"""Eval and export work for DM0 as for π0 (any model type ``load_policy`` supports)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from dexrl.checkpoints.export import export_checkpoint
from dexrl.checkpoints.policy import load_eval_policy, load_policy
from dexrl.checkpoints.sources import resolve_checkpoint
from dexrl.evaluation.request import EvalRequest
from dexrl.evaluation.settings import resolve_settings


@pytest.fixture(scope="module")
def dm0_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from helpers.rlinf_run import write_tiny_rlinf_run

    from dexrl.models.dm0.tiny import write_tiny_dm0

    root = tmp_path_factory.mktemp("dm0")
    base = write_tiny_dm0(root / "base")
    return write_tiny_rlinf_run(root / "run", base, model_type="dexbotic_dm0", suite="libero_goal")


def test_dm0_training_checkpoint_round_trip(dm0_run: Path, tmp_path: Path,
                                            actions: Callable) -> None:
    source = resolve_checkpoint(dm0_run)
    assert (source.model_type, source.training.suite) == ("dexbotic_dm0", "libero_goal")
    trained = actions(load_eval_policy(source, "cpu"))
    assert not torch.allclose(trained, actions(load_eval_policy(
        resolve_checkpoint(source.model_dir), "cpu")))
    out = export_checkpoint(source, tmp_path / "out").out
    assert torch.equal(actions(load_eval_policy(resolve_checkpoint(out), "cpu")), trained)
    assert isinstance(load_policy(out).network, type(load_policy(source.model_dir).network))


def test_dm0_defaults(dm0_run: Path) -> None:
    source = resolve_checkpoint(dm0_run)
    s = resolve_settings(source, EvalRequest(
        ckpt=str(dm0_run), suite="libero_goal", episodes_per_task=1, num_envs=None, seed=0,
        num_steps=None, action_chunk=None, max_episode_steps=None, video="none", device="cpu",
        dtype=None, env_overrides=()), [0])
    assert (s.action_chunk, s.num_steps, s.max_episode_steps) == (5, 4, 300)


def test_fixture_keys_equal_what_the_rlinf_dm0_adapter_saves(dm0_run: Path) -> None:
    from dexrl.bridge.policies.dm0 import build
    from dexrl.checkpoints.policy import read_training_weights
    from dexrl.config.compose import compose

    source = resolve_checkpoint(dm0_run)
    cfg = compose("libero_goal_ppo_dexbotic_dm0",
                  ["+smoke=cpu", f"actor.model.model_path={source.model_dir}"])
    adapter = build(cfg.actor.model)
    saved, head = read_training_weights(source.weights)
    assert set(adapter.state_dict()) == set(saved) | set(head)
    assert {k: v.shape for k, v in adapter.state_dict().items() if k in head} == {
        k: v.shape for k, v in head.items()}
