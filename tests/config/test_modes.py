"""Execution modes (``--mode``): which runner a config selects, the overrides a mode stands for,
async PPO's default placement, and what ``dexrl validate --mode`` composes."""

from __future__ import annotations

import pytest
import yaml
from helpers.cli import run
from omegaconf import DictConfig, OmegaConf
from typer.testing import CliRunner

from dexrl.config.modes import (
    COLLOCATED,
    MODES,
    mode_overrides,
    place_async,
    run_mode,
    split_placement,
)
from dexrl.config.validate import compose_and_check
from dexrl.errors import DexrlError

runner = CliRunner()
SPATIAL_PI0 = ["validate", "--suite", "libero_spatial", "--model", "pi0"]


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


# --- async runs through `dexrl validate`: what RLinf 0.3.0's async PPO asserts, crashes on or
# ignores is found before a launch ---

REACH = "reach_cued_ppo_dexbotic_pi0"
SPATIAL = "libero_spatial_ppo_dexbotic_pi0"
ASYNC = "+mode=async"
# Two actor ranks, four env processes: a round makes lcm(2, 4) / 2 = 2 trajectories per rank.
TWO_FOUR = ["~cluster.component_placement",
            "+cluster.component_placement={actor:0-1,env\\,rollout:2-5}"]
# Two actor ranks, three env processes: lcm(2, 3) / 2 = 3 trajectories per rank and round.
TWO_THREE = ["~cluster.component_placement",
             "+cluster.component_placement={actor:0-1,env\\,rollout:2-4}",
             "env.train.total_num_envs=48"]


def _found(*overrides: str, name: str = REACH, gpus: int = 8,
           cpu_only: bool = False) -> dict[str, tuple[str, str]]:
    """code -> (level, where) of the async findings (and the value-head one)."""
    result = compose_and_check(None, None, name, list(overrides), gpus, cpu_only=cpu_only)
    return {f.code: (f.level, f.where) for f in result.findings
            if f.code.startswith("mode-") or f.code == "algorithm-value-head-missing"}


def _messages(*overrides: str, code: str) -> list[str]:
    result = compose_and_check(None, None, REACH, list(overrides), 8)
    return [f.message + " | " + f.hint for f in result.findings if f.code == code]


@pytest.mark.parametrize("name", [REACH, SPATIAL])
@pytest.mark.parametrize(("extra", "gpus", "cpu_only"), [
    ([], 8, False), ([], 1, False), (["+smoke=cpu"], 1, True)])
def test_shipped_configs_in_async_mode_have_no_async_errors(
        name: str, extra: list[str], gpus: int, cpu_only: bool) -> None:
    found = _found(ASYNC, *extra, name=name, gpus=gpus, cpu_only=cpu_only)
    # One GPU cannot be split between training and rollout: only that is said.
    assert found == ({"mode-async-collocated": ("warning", "cluster.component_placement")}
                     if gpus == 1 and not cpu_only else {})


def test_sync_runs_are_not_checked_for_async() -> None:
    assert _found("rollout.recompute_logprobs=true", "rollout.enable_offload=true",
                  "runner.val_check_interval=10", "+runner.use_training_pipeline=true",
                  gpus=1) == {}


def test_async_needs_the_decoupled_loss() -> None:
    assert _found(ASYNC, "algorithm.loss_type=actor_critic")["mode-async-loss"] == (
        "error", "algorithm.loss_type")
    assert "mode-async-loss" not in _found(ASYNC)


def test_async_needs_a_staleness_threshold() -> None:
    want = ("error", "algorithm.staleness_threshold")
    assert _found(ASYNC, "algorithm.staleness_threshold=null")[
        "mode-async-staleness-missing"] == want
    assert _found(ASYNC, "~algorithm.staleness_threshold")["mode-async-staleness-missing"] == want
    assert "mode-async-staleness-missing" not in _found(ASYNC, "algorithm.staleness_threshold=0")


@pytest.mark.parametrize("key", ["rollout.enable_offload", "+env.train.enable_offload",
                                 "+env.eval.enable_offload"])
def test_async_refuses_offload(key: str) -> None:
    assert _found(ASYNC, f"{key}=true")["mode-async-offload"] == ("error", key.lstrip("+"))
    assert "mode-async-offload" not in _found(ASYNC, f"{key}=false")


def test_env_enable_offload_is_not_read_by_rlinf_so_not_refused() -> None:
    assert "mode-async-offload" not in _found(ASYNC, "env.enable_offload=true")


def test_async_refuses_recomputed_logprobs() -> None:
    assert _found(ASYNC, "rollout.recompute_logprobs=true")[
        "mode-async-recompute-logprobs"] == ("error", "rollout.recompute_logprobs")
    assert "mode-async-recompute-logprobs" not in _found(ASYNC, "rollout.recompute_logprobs=false")


def test_async_refuses_the_training_pipeline() -> None:
    assert _found(ASYNC, "+runner.use_training_pipeline=true")["mode-async-pipeline"] == (
        "error", "runner.use_training_pipeline")
    assert "mode-async-pipeline" not in _found(ASYNC, "+runner.use_training_pipeline=false")


def test_async_warns_that_it_never_validates() -> None:
    assert _found(ASYNC, "runner.val_check_interval=10")["mode-async-no-validation"] == (
        "warning", "runner.val_check_interval")
    assert "mode-async-no-validation" not in _found(ASYNC, "runner.val_check_interval=-1")
    assert "mode-async-no-validation" not in _found(ASYNC, "runner.val_check_interval=0")


def test_the_decoupled_loss_needs_a_value_head() -> None:
    want = ("error", "actor.model.add_value_head")
    assert _found(ASYNC, "actor.model.add_value_head=false")[
        "algorithm-value-head-missing"] == want
    assert _found("algorithm.loss_type=decoupled_actor_critic",
                  "actor.model.add_value_head=false")["algorithm-value-head-missing"] == want
    assert "algorithm-value-head-missing" not in _found(ASYNC)


def test_async_batch_must_divide_the_samples_a_rank_trains_on() -> None:
    # 8 GPUs: actor 0-3, env and rollout 4-7. A trajectory: 2 policy calls × 32 envs / lcm(4, 4)
    # = 16 samples; a rank's batch is global_batch_size / 4.
    assert _found(ASYNC, "actor.global_batch_size=24")["mode-async-batch-uneven"] == (
        "error", "actor.global_batch_size")
    [line] = _messages(ASYNC, "actor.global_batch_size=24", code="mode-async-batch-uneven")
    assert "1 trajectories × 16 samples = 16 samples" in line and "24 / 4 actor ranks = 6" in line
    assert "multiple of 3" in line  # 3 × 16 = 48 = 8 × 6
    assert "mode-async-batch-uneven" not in _found(
        ASYNC, "actor.global_batch_size=24", "algorithm.rollout_store_size_per_rank=3")
    assert "mode-async-batch-uneven" not in _found(ASYNC, "actor.global_batch_size=64")


def test_async_batch_replaces_the_sync_step_arithmetic() -> None:
    """The synchronous runner's rule (the batch divides a step's 64 samples) does not hold for
    the async actor, which trains on its store: 2 × 16 samples per rank, batches of 128 / 4."""
    sync = compose_and_check(None, None, REACH, ["actor.global_batch_size=128"], 8).findings
    assert "batch-samples-uneven" in {f.code for f in sync}
    found = _found(ASYNC, "actor.global_batch_size=128", "algorithm.rollout_store_size_per_rank=2")
    result = compose_and_check(None, None, REACH, [ASYNC, "actor.global_batch_size=128",
                                                   "algorithm.rollout_store_size_per_rank=2"], 8)
    assert found == {} and "batch-samples-uneven" not in {f.code for f in result.findings}


def test_async_store_smaller_than_a_round_warns() -> None:
    assert _found(ASYNC, *TWO_FOUR)["mode-async-store-small"] == (
        "warning", "algorithm.rollout_store_size_per_rank")
    assert _found(ASYNC, *TWO_FOUR, "algorithm.rollout_store_size_per_rank=2") == {}
    # RLinf splits each env process's round into lcm(actor, env × stages) / (env × stages)
    # parts: with 2 actor ranks and 3 env processes each rank receives 3 trajectories a round.
    for store in (1, 2):
        found = _found(ASYNC, *TWO_THREE, f"algorithm.rollout_store_size_per_rank={store}")
        assert found["mode-async-store-small"][0] == "warning", store
    assert _found(ASYNC, *TWO_THREE, "algorithm.rollout_store_size_per_rank=3") == {}
    # One actor rank per env process, or more: one trajectory a round, store 1 is enough.
    assert "mode-async-store-small" not in _found(ASYNC)


def test_async_actor_sharing_gpus_warns_on_gpus_only() -> None:
    shared = ["~cluster.component_placement",
              "+cluster.component_placement={actor\\,rollout:0-3,env:4-7}"]
    found = _found(ASYNC, *shared)
    assert found["mode-async-collocated"] == ("warning", "cluster.component_placement")
    [line] = _messages(ASYNC, *shared, code="mode-async-collocated")
    assert "4 of its 4 GPU(s) with the rollout:" in line
    assert "{actor: 0-3, env,rollout: 4-7}" in line
    assert "mode-async-collocated" not in _found(ASYNC, *shared, cpu_only=True)
    assert "mode-async-collocated" not in _found(ASYNC)  # the default split placement
    assert "mode-async-collocated" not in _found(*shared)  # a synchronous run
