"""Which memory plan a launch gets: by the GPU's memory with a margin, refused before launch
when the one asked for cannot fit, none for --smoke, and the user's key=value kept."""

from __future__ import annotations

import pytest

from dexrl.config.memory_plans import MemoryPlan
from dexrl.config.request import ConfigRequest
from dexrl.errors import DexrlError
from dexrl.training.memory_choice import (
    MARGIN,
    choice_record,
    choose,
    compose_with_plan,
    render_choice,
)

ESTIMATES = {"80gb": 59.3, "48gb": 41.8, "24gb": 19.1}  # π0 at one GPU's share (GB)
ONE_GPU = ("env.train.total_num_envs=8", "actor.global_batch_size=128")


def _estimate(plan: MemoryPlan) -> float:
    return ESTIMATES[plan.name]


@pytest.mark.parametrize(("gpu_gb", "name"), [(85.0, "80gb"), (51.0, "48gb"), (25.4, "24gb"),
                                              (None, "80gb")])
def test_auto_takes_the_largest_plan_that_fits_with_the_margin(gpu_gb: float | None,
                                                               name: str) -> None:
    choice = choose("auto", gpu_gb, False, _estimate)
    assert choice.name == name and choice.estimates == ESTIMATES
    if gpu_gb is None:
        assert "assumed 80 GB H100" in choice.reason and choice.budget_gb is None
    else:
        assert choice.budget_gb == pytest.approx(gpu_gb * (1 - MARGIN))


def test_a_plan_within_the_card_but_not_the_margin_is_not_taken() -> None:
    gpu_gb = ESTIMATES["48gb"] / (1 - MARGIN) - 0.1  # holds 41.8 GB, but not with 10 % spare
    assert choose("auto", gpu_gb, False, _estimate).name == "24gb"


def test_a_named_plan_that_cannot_fit_is_refused_with_the_plan_that_does() -> None:
    with pytest.raises(DexrlError) as err:
        choose("80gb", 25.4, False, _estimate)
    assert err.value.code == "memory-plan-does-not-fit"
    assert err.value.message.startswith("memory plan 80gb does not fit this GPU")
    assert "≈59.3 GB per GPU" in err.value.message and "nothing was started" in err.value.message
    assert err.value.hint.startswith("use --memory-plan 24gb")
    # the control: on a card it fits, the same request goes through
    assert choose("80gb", 85.0, False, _estimate).name == "80gb"


def test_auto_with_no_plan_that_fits_is_refused() -> None:
    with pytest.raises(DexrlError) as err:
        choose("auto", 12.0, False, _estimate)
    assert err.value.code == "memory-plan-does-not-fit"
    assert err.value.message.startswith("no memory plan fits this GPU")
    assert "total_num_envs" in err.value.hint


def test_a_launch_estimates_only_the_plans_its_choice_needs() -> None:
    asked: list[str] = []

    def counted(plan: MemoryPlan) -> float:
        asked.append(plan.name)
        return ESTIMATES[plan.name]

    assert choose("auto", 51.0, False, counted, every=False).estimates == {
        "80gb": 59.3, "48gb": 41.8}
    assert asked == ["80gb", "48gb"]  # stopped at the first that fits
    asked.clear()
    assert choose("24gb", 25.4, False, counted, every=False).name == "24gb"
    assert asked == ["24gb"]


def test_without_gpu_facts_a_named_plan_is_applied_unchecked() -> None:
    choice = choose("24gb", None, False, _estimate)
    assert choice.name == "24gb" and "not checked" in choice.reason


def test_smoke_takes_no_plan_and_the_dry_run_says_what_a_gpu_would_get() -> None:
    quiet = choose("auto", None, True, _estimate, every=False)
    assert quiet.name is None and quiet.estimates == {}
    shown = choose("auto", None, True, _estimate)
    assert shown.name is None and shown.reason.endswith("would get 80gb")
    assert choose("24gb", None, True, _estimate).name == "24gb"  # asked for: applied


def test_a_24gb_card_gets_the_24gb_plan_and_the_users_value_is_kept() -> None:
    asked = ConfigRequest(suite="libero_spatial", model="pi0",
                          overrides=(*ONE_GPU, "actor.micro_batch_size=32"))
    composed, choice = compose_with_plan(asked, "auto", 25.4, 1, dry_run=False)
    assert choice.name == "24gb"
    assert composed.cfg.actor.enable_offload is True
    assert composed.cfg.runner.memory_plan == "24gb"
    assert composed.cfg.actor.micro_batch_size == 32
    assert choice.kept == {"actor.micro_batch_size": "32"}
    lines = render_choice(choice)
    assert "  kept your actor.micro_batch_size=32 over the plan's 16" in lines
    record = choice_record(choice)
    assert record is not None and record["name"] == "24gb"
    assert record["kept_user_values"] == {"actor.micro_batch_size": "32"}


def test_an_80gb_card_keeps_the_shipped_config() -> None:
    from omegaconf import OmegaConf

    from dexrl.config.compose import compose

    asked = ConfigRequest(suite="libero_spatial", model="pi0", overrides=ONE_GPU)
    composed, choice = compose_with_plan(asked, "auto", 85.0, 1, dry_run=False)
    assert choice.name == "80gb" and choice.settings == {}
    planned = OmegaConf.to_container(composed.cfg)
    assert planned["runner"].pop("memory_plan") == "80gb"
    assert planned == OmegaConf.to_container(compose("libero_spatial_ppo_dexbotic_pi0",
                                                     list(ONE_GPU)))


@pytest.mark.parametrize("smoke", [False, True])
def test_a_named_plan_without_gpu_facts_reaches_the_launch_config(smoke: bool) -> None:
    """A launch (not a dry run) on a machine with no GPU facts, --smoke included, runs the plan
    it named: the plan is estimated, so applied, though it cannot be checked."""
    asked = ConfigRequest(suite="reach" if smoke else "libero_spatial", model="pi0",
                          smoke=smoke, overrides=() if smoke else ONE_GPU)
    composed, choice = compose_with_plan(asked, "24gb", None, 1, dry_run=False)
    assert choice.name == "24gb" and "not checked" in choice.reason
    assert composed.cfg.runner.memory_plan == "24gb"
    assert composed.cfg.actor.enable_offload is True
