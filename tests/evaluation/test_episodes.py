"""Task selection, episode order and per-episode seeds."""

from __future__ import annotations

import pytest

from dexrl.errors import DexrlError
from dexrl.evaluation.episodes import noise_seed, parse_tasks, plan_episodes, scene_seed


@pytest.mark.parametrize(
    ("spec", "ids"),
    [(None, list(range(10))), ("all", list(range(10))), ("0,3-5", [0, 3, 4, 5]),
     (" 7 , 2 ", [2, 7]), ("4-4,4", [4]), ("9", [9])],
)
def test_parse_tasks(spec: str | None, ids: list[int]) -> None:
    assert parse_tasks(spec, 10) == ids


@pytest.mark.parametrize(
    ("spec", "message"),
    [("10", "do not exist"), ("3-12", "10, 11, 12 do not exist"), ("x", "not a task id"),
     ("5-2", "runs backwards"), ("1,,2", "not a task id"), ("-1", "not a task id")],
)
def test_parse_tasks_rejects(spec: str, message: str) -> None:
    with pytest.raises(DexrlError, match=message) as err:
        parse_tasks(spec, 10)
    assert err.value.where == "--tasks"


def test_plan_is_task_major_with_fixed_trials() -> None:
    plan = plan_episodes([2, 5], 3, {2: 50, 5: 50}, seed=0)
    assert [e.key for e in plan] == [(2, 0), (2, 1), (2, 2), (5, 0), (5, 1), (5, 2)]


def test_seeds_depend_only_on_seed_task_and_trial() -> None:
    def seeds(plan: list) -> dict:
        return {e.key: (e.noise_seed, e.scene_seed) for e in plan}

    a = seeds(plan_episodes([0, 1], 4, {0: 50, 1: 50}, seed=7))
    b = seeds(plan_episodes([1], 2, {1: 50}, seed=7))
    assert all(a[key] == pair for key, pair in b.items())
    for which in (0, 1):  # every episode draws its own noise and scene
        assert len({pair[which] for pair in a.values()}) == len(a)
    assert noise_seed(8, 0, 0) != noise_seed(7, 0, 0)
    assert 0 <= noise_seed(2**31, 89, 49) < 2**63
    assert 0 <= scene_seed(2**31, 89, 49) < 2**32  # np.random.seed's range


def test_a_task_scene_seed_seeds_each_task_once() -> None:
    plan = plan_episodes([2, 5], 3, {2: 50, 5: 50}, seed=0, task_scene_seed=7)
    assert [(e.key, e.scene_seed, e.reseed) for e in plan] == [
        ((2, 0), 7, True), ((2, 1), 7, False), ((2, 2), 7, False),
        ((5, 0), 7, True), ((5, 1), 7, False), ((5, 2), 7, False)]
    noise = [e.noise_seed for e in plan_episodes([2, 5], 3, {2: 50, 5: 50}, seed=0)]
    assert [e.noise_seed for e in plan] == noise  # the policy's noise does not change
    assert all(e.reseed for e in plan_episodes([2, 5], 3, {2: 50, 5: 50}, seed=0))


def test_plan_refuses_more_episodes_than_initial_states() -> None:
    with pytest.raises(DexrlError, match="only 50 initial states") as err:
        plan_episodes([0], 51, {0: 50}, seed=0)
    assert err.value.code == "eval-too-many-episodes"
    assert "--episodes-per-task 50" in err.value.hint
    with pytest.raises(DexrlError, match="is 0") as err:
        plan_episodes([0], 0, {0: 50}, seed=0)
    assert err.value.code == "eval-episodes-per-task-invalid"
    assert err.value.hint == "use at least 1"
