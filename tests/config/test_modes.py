"""Execution modes (``--mode``): which runner a config selects, the overrides a mode stands for,
async PPO's default placement, and what ``dexrl validate --mode`` composes."""

from __future__ import annotations

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf
from typer.testing import CliRunner

from dexrl.cli import app
from dexrl.config.modes import (
    COLLOCATED,
    MODES,
    mode_overrides,
    place_async,
    run_mode,
    split_placement,
)
from dexrl.errors import DexrlError

runner = CliRunner()
SPATIAL_PI0 = ["validate", "--suite", "libero_spatial", "--model", "pi0"]


def run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


# --- run_mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "mode"), [
    ({}, "sync"),
    ({"runner": None}, "sync"),
    ({"runner": {"max_steps": 3}}, "sync"),
    ({"runner": {"mode": "sync"}}, "sync"),
    ({"runner": {"mode": "async"}}, "async"),
    ({"runner": {"mode": "pipeline", "use_training_pipeline": True}}, "pipeline"),
    ({"runner": {"use_training_pipeline": True}}, "pipeline"),  # RLinf's own switch, no mode
    ({"runner": {"use_training_pipeline": False}}, "sync"),
    ({"runner": {"mode": "async", "use_training_pipeline": True}}, "async"),  # the mode wins
])
def test_run_mode_reads_runner_mode_else_rlinf_pipeline_switch(content: dict, mode: str) -> None:
    assert run_mode(OmegaConf.create(content)) == mode
    assert run_mode(content) == mode  # a plain dict (a config.yaml read as data) reads the same


def test_run_mode_of_something_that_is_no_config_is_sync() -> None:
    assert run_mode(None) == "sync"
    assert run_mode({"runner": "async"}) == "sync"  # a runner that is not a mapping


# --- mode_overrides ---------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "overrides"), [
    (None, []), ("sync", []), ("async", ["+mode=async"]), ("pipeline", ["+mode=pipeline"])])
def test_mode_overrides(mode: str | None, overrides: list[str]) -> None:
    assert mode_overrides(mode) == overrides


@pytest.mark.parametrize("mode", ["bogus", "Async", "", "pipelined"])
def test_an_unknown_mode_is_refused_with_its_code(mode: str) -> None:
    with pytest.raises(DexrlError) as caught:
        mode_overrides(mode)
    assert caught.value.code == "flags-mode-unknown"
    assert all(m in caught.value.hint for m in MODES)


def test_every_mode_but_sync_has_an_overlay_file() -> None:
    from dexrl.config.compose import conf_dir

    assert sorted(p.stem for p in (conf_dir() / "mode").glob("*.yaml")) == ["async", "pipeline"]


# --- split_placement --------------------------------------------------------------------------


def gpus(spec: str) -> list[int]:
    """The GPU ids of one placement value: ``"3"`` or ``"2-5"``."""
    first, _, last = spec.partition("-")
    return list(range(int(first), int(last or first) + 1))


def test_one_gpu_cannot_be_split() -> None:
    assert split_placement(1) is None


@pytest.mark.parametrize(("count", "want"), [
    (2, {"actor": "0", "env,rollout": "1"}),
    (3, {"actor": "0", "env,rollout": "1-2"}),
    (4, {"actor": "0-1", "env,rollout": "2-3"}),
    (8, {"actor": "0-3", "env,rollout": "4-7"}),
])
def test_split_placement_values(count: int, want: dict[str, str]) -> None:
    assert split_placement(count) == want


@pytest.mark.parametrize("count", [2, 3, 5, 7, 8, 16])
def test_split_placement_uses_every_gpu_once_actor_first(count: int) -> None:
    split = split_placement(count)
    assert split is not None and list(split) == ["actor", "env,rollout"]
    actor, env = gpus(split["actor"]), gpus(split["env,rollout"])
    assert sorted(actor + env) == list(range(count))  # each GPU exactly once
    assert actor and env and max(actor) < min(env)  # the actor on the first GPUs
    assert len(actor) == count // 2


# --- place_async ------------------------------------------------------------------------------


def config(mode: str | None, placement: dict[str, str] | None = COLLOCATED) -> DictConfig:
    """A struct config (as Hydra composes them) with ``runner.mode`` and a placement."""
    content: dict = {"runner": {"max_steps": 1}}
    if mode is not None:
        content["runner"]["mode"] = mode
    if placement is not None:
        content["cluster"] = {"num_nodes": 1, "component_placement": dict(placement)}
    cfg = OmegaConf.create(content)
    OmegaConf.set_struct(cfg, True)
    return cfg


def placement_of(cfg: DictConfig) -> dict | None:
    value = OmegaConf.select(cfg, "cluster.component_placement")
    return None if value is None else OmegaConf.to_container(value)


@pytest.mark.parametrize(("count", "want"), [
    (8, {"actor": "0-3", "env,rollout": "4-7"}), (2, {"actor": "0", "env,rollout": "1"})])
def test_place_async_splits_the_shipped_collocated_placement(count: int,
                                                             want: dict[str, str]) -> None:
    cfg = config("async")
    assert place_async(cfg, count, cpu_only=False) == want
    assert placement_of(cfg) == want


@pytest.mark.parametrize(("mode", "count", "cpu_only"), [
    (None, 8, False),  # sync by default
    ("sync", 8, False),
    ("pipeline", 8, False),
    ("async", 8, True),  # CPU-only: every component is its own process anyway
    ("async", 1, False),  # one GPU cannot be split
])
def test_place_async_leaves_other_runs_alone(mode: str | None, count: int,
                                             cpu_only: bool) -> None:
    cfg = config(mode)
    assert place_async(cfg, count, cpu_only=cpu_only) is None
    assert placement_of(cfg) == COLLOCATED


@pytest.mark.parametrize("placement", [
    {"actor": "0-5", "env,rollout": "6-7"},
    {"actor,env,rollout": "0-7"},  # collocated, but chosen: the user's, not the shipped one
    {"actor,rollout": "all", "env": "all"},
])
def test_place_async_never_touches_a_users_placement(placement: dict[str, str]) -> None:
    cfg = config("async", placement)
    assert place_async(cfg, 8, cpu_only=False) is None
    assert placement_of(cfg) == placement


def test_place_async_without_a_placement_adds_none() -> None:
    cfg = config("async", placement=None)
    assert place_async(cfg, 8, cpu_only=False) is None
    assert placement_of(cfg) is None


# --- composition through `dexrl validate --mode` ----------------------------------------------


def printed(*args: str) -> dict:
    """The resolved config `dexrl validate ... --print` prints, as data."""
    result = run(*SPATIAL_PI0, *args, "--print")
    assert result.exit_code == 0, (result.stdout, result.stderr)
    data = yaml.safe_load(result.stdout)
    assert isinstance(data, dict), result.stdout
    return data


def test_validate_mode_async_composes_the_overlay_and_splits_the_gpus() -> None:
    cfg = printed("--mode", "async")
    assert cfg["cluster"]["component_placement"] == {"actor": "0-3", "env,rollout": "4-7"}
    assert cfg["runner"]["mode"] == "async"
    assert cfg["algorithm"]["loss_type"] == "decoupled_actor_critic"
    assert cfg["algorithm"]["staleness_threshold"] == 1


def test_validate_mode_async_splits_the_gpus_per_node_given() -> None:
    cfg = printed("--mode", "async", "--gpus-per-node", "4")
    assert cfg["cluster"]["component_placement"] == {"actor": "0-1", "env,rollout": "2-3"}


def test_validate_mode_async_keeps_a_placement_the_user_set() -> None:
    cfg = printed("--mode", "async", "~cluster.component_placement",
                  "+cluster.component_placement={actor:4-7,env\\,rollout:0-3}")
    assert cfg["cluster"]["component_placement"] == {"actor": "4-7", "env,rollout": "0-3"}


def test_validate_without_a_mode_keeps_the_shipped_collocated_placement() -> None:
    cfg = printed()
    assert cfg["cluster"]["component_placement"] == COLLOCATED
    assert "mode" not in cfg["runner"] and not cfg["runner"].get("use_training_pipeline")


def test_validate_mode_pipeline_turns_on_rlinfs_training_pipeline() -> None:
    cfg = printed("--mode", "pipeline")
    assert cfg["runner"]["use_training_pipeline"] is True
    assert cfg["runner"]["mode"] == "pipeline"
    assert cfg["cluster"]["component_placement"] == COLLOCATED  # only async is split
    assert cfg["algorithm"]["loss_type"] != "decoupled_actor_critic"


def test_validate_with_an_unknown_mode_is_one_error_line() -> None:
    result = run(*SPATIAL_PI0, "--mode", "bogus", "--print")
    assert result.exit_code == 2, (result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "[flags-mode-unknown]" in errors[0], result.stderr
    assert "bogus" in errors[0]
    assert "Traceback" not in result.output and result.stdout == ""  # nothing composed
