"""``dexrl validate`` on async runs (``runner.mode: async``): what RLinf 0.3.0's async PPO
asserts, crashes on or ignores is found before a launch."""

from __future__ import annotations

import pytest

from dexrl.config.validate import compose_and_check

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
