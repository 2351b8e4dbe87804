"""Running areas: crashes stay inside their check, budgets bound everything, order is fixed."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from dexrl.doctor import CheckResult, fail, guarded, ok, skip, warn
from dexrl.doctor.context import Budget, BudgetExhausted, Context
from dexrl.doctor.schedule import Area, areas, check_config, run_area, run_doctor
from dexrl.errors import Finding


def ctx(budget: float = 60.0) -> Context:
    return Context(Budget(budget))


def test_non_ok_results_need_a_fix() -> None:
    with pytest.raises(ValueError, match="needs a fix"):
        CheckResult("x.y", "fail", "broken")
    with pytest.raises(ValueError, match="unknown status"):
        CheckResult("x.y", "bad", "?", "fix")  # type: ignore[arg-type]
    assert ok("x.y", "fine").fix == ""


def test_a_crashing_check_is_that_checks_fail() -> None:
    def boom(_: object) -> CheckResult:
        raise KeyError("cluster.num_nodes")

    result = guarded("ray.nodes", boom, None)
    assert result.status == "fail"
    assert result.finding == "check crashed: KeyError: 'cluster.num_nodes'"


def test_area_crash_keeps_earlier_rows_fails_the_current_skips_the_rest() -> None:
    def run(_: Context) -> Iterator[CheckResult]:
        yield ok("a.one", "fine")
        raise RuntimeError("probe\nexploded")

    rows = run_area(Area("a", run, ("a.one", "a.two", "a.three")), ctx())
    assert [(r.id, r.status) for r in rows] == [("a.one", "ok"), ("a.two", "fail"),
                                                ("a.three", "skip")]
    assert rows[1].finding == "probe crashed: RuntimeError: probe exploded"


def test_area_stopping_early_skips_the_rest() -> None:
    def run(_: Context) -> Iterator[CheckResult]:
        yield fail("a.one", "Ray did not start", "read its logs")

    rows = run_area(Area("a", run, ("a.one", "a.two")), ctx())
    assert rows[1].status == "skip"
    assert rows[1].fix == "fix a.one first"


def test_budget_exhaustion_skips_with_the_budget_fix() -> None:
    def run(c: Context) -> Iterator[CheckResult]:
        yield ok("a.one", "fine")
        c.budget.timeout(30)
        yield ok("a.two", "never")

    spent = Context(Budget(10.0, start=time.monotonic() - 10.0))
    rows = run_area(Area("a", run, ("a.one", "a.two")), spent)
    assert rows[1].status == "skip"
    assert "budget ran out" in rows[1].finding
    assert rows[1].fix == "rerun with --budget 20"


def test_budget_timeout() -> None:
    budget = Budget(100.0)
    assert budget.timeout(30) == 30
    assert 99 < budget.timeout(500) <= 100
    with pytest.raises(BudgetExhausted):
        Budget(5.0, start=time.monotonic() - 5).timeout(1)


def test_threaded_areas_keep_report_order_and_a_hung_one_is_bounded() -> None:
    def quick(name: str):
        def run(_: Context) -> Iterator[CheckResult]:
            yield ok(f"{name}.x", name)
        return run

    def hang(_: Context) -> Iterator[CheckResult]:
        time.sleep(30)
        yield ok("slow.x", "late")

    order = [Area("first", quick("first"), ("first.x",)), Area("slow", hang, ("slow.x",)),
             Area("t", quick("t"), ("t.x",)), Area("last", quick("last"), ("last.x",))]
    start = time.monotonic()
    rows = run_doctor(Context(Budget(2.0)), order, threaded=(("slow",), ("t",)), grace_s=0.5)
    assert time.monotonic() - start < 10
    assert [r.id for r in rows] == ["first.x", "slow.x", "t.x", "last.x"]
    assert rows[1].status == "fail"
    assert "not finished within the 2 s budget" in rows[1].finding


def test_config_row() -> None:
    err = Finding("error", "actor.global_batch_size", "1000 is not divisible", "use 1024",
                  code="batch-micro-batches-uneven")
    warning = Finding("warning", "runner.save_interval", "exceeds max_steps", "lower it",
                      code="runner-save-after-end")
    assert check_config("cfg", [err, warning]).status == "fail"
    assert check_config("cfg", [err]).fix == "use 1024"
    assert check_config("cfg", [warning]).status == "warn"
    assert check_config("cfg", []).status == "ok"


@pytest.mark.spawns
def test_a_config_that_renders_nothing_skips_the_render_and_libero_areas() -> None:
    from dexrl.config.compose import compose

    by_name = {a.name: a for a in areas(None)}
    reach = Context(Budget(60), cfg=compose("reach_ppo_dexbotic_pi0"),
                    config_name="reach_ppo_dexbotic_pi0")
    for name in ("render", "libero"):
        rows = run_area(by_name[name], reach)
        assert [r.id for r in rows] == list(by_name[name].ids)
        assert {r.status for r in rows} == {"skip"}
        assert "render nothing and need no LIBERO" in rows[0].finding
    spatial = Context(Budget(60), cfg=compose("libero_spatial_ppo_dexbotic_pi0"), quick=True)
    backend = next(iter(by_name["render"].run(spatial)))  # a LIBERO suite is probed as before
    assert backend.id == "render.backend" and backend.status != "skip"


def test_every_area_lists_unique_ids() -> None:
    ids = [i for a in areas(None) for i in a.ids]
    assert len(ids) == len(set(ids))
    assert {i.split(".")[0] for i in ids} == {"config", "stack", "cuda", "render", "libero", "ray",
                                             "extension", "checkpoint"}


def test_statuses() -> None:
    assert warn("a.b", "w", "f").status == "warn"
    assert skip("a.b", "s", "f").status == "skip"
