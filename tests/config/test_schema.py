"""The value schema against the shipped configs, RLinf 0.3.0's own parsers, and wrong values."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf, open_dict

from dexrl.config.checks import Facts, run_config_checks
from dexrl.config.compose import compose, list_configs
from dexrl.config.dotted import flatten
from dexrl.config.schema import (
    SCHEMA,
    Interval,
    check_values,
    spec_for,
)
from dexrl.config.settings import ADV_TYPES, LOSS_TYPES, PRECISIONS

VARIANTS = ([], ["+smoke=cpu"], ["+mode=async"], ["+mode=pipeline"], ["+fast_paths=gpu"],
            ["+fast_paths=off"])  # the smoke overlay also
# selects weight_syncer=bucket_syncer


@pytest.fixture(scope="module")
def shipped() -> dict[str, object]:
    """(config name, overlay) -> composed config, for every shipped config."""
    out = {(name, tuple(ov)): compose(name, ov) for name in list_configs() for ov in VARIANTS}
    # `train --memory-plan` records the plan (dexrl.config.memory_plans); once is enough
    plan = ("libero_spatial_ppo_dexbotic_pi0", ("+runner.memory_plan=24gb",))
    out[plan] = compose(plan[0], list(plan[1]))
    return out


def _keys(cfg: object) -> list[str]:
    return list(flatten(OmegaConf.to_container(cfg, resolve=False)))


def test_every_shipped_config_passes_the_schema(shipped: dict) -> None:
    for where, cfg in shipped.items():
        assert [f for f in check_values(cfg) if f.level == "error"] == [], where


def test_schema_and_shipped_keys_are_the_same_set(shipped: dict) -> None:
    """Every schema entry is set by a shipped config, and every shipped key has an entry."""
    keys = {k for cfg in shipped.values() for k in _keys(cfg)}
    undescribed = sorted(k for k in keys if spec_for(k) is None)
    assert undescribed == []
    for spec in SCHEMA:
        assert any(spec_for(k) is spec for k in keys), f"{spec.pattern} is in no shipped config"
    assert len({s.pattern for s in SCHEMA}) == len(SCHEMA)


def test_schema_entries_are_well_formed() -> None:
    for spec in SCHEMA:
        assert spec.meaning.strip(), spec.pattern
        for text in (spec.range, spec.warn and spec.warn[0]):
            if text:
                Interval.parse(text)
        assert spec.expected()


def test_choices_are_what_rlinf_and_the_adapters_parse() -> None:
    import torch
    from rlinf.algorithms import advantages, losses  # noqa: F401 - registers the names
    from rlinf.algorithms.registry import ADV_REGISTRY, LOSS_REGISTRY
    from rlinf.config import torch_dtype_from_precision
    from rlinf.hybrid_engines.fsdp.utils import (
        get_backward_prefetch_strategy,
        get_sharding_strategy,
    )
    from rlinf.utils.utils import get_loss_agg_func

    from dexrl.bridge.policies.chain import _UNSUPPORTED

    assert set(ADV_TYPES) == set(ADV_REGISTRY)
    assert set(LOSS_TYPES) == set(LOSS_REGISTRY)
    for precision in PRECISIONS:
        assert isinstance(torch_dtype_from_precision(precision), torch.dtype)
    with pytest.raises(ValueError):
        torch_dtype_from_precision("bf32")
    for strategy in spec_for("actor.fsdp_config.sharding_strategy").choices:
        get_sharding_strategy(strategy)
    for prefetch in spec_for("actor.fsdp_config.backward_prefetch").choices:
        assert get_backward_prefetch_strategy(prefetch) is not None
    for agg in spec_for("algorithm.loss_agg_func").choices:
        assert callable(get_loss_agg_func(agg))
    assert spec_for("actor.model.safe_get_logprob").choices == (False,)
    assert "safe_get_logprob" in _UNSUPPORTED


@pytest.mark.parametrize(
    ("text", "inside", "outside", "words"),
    [("[1, inf)", [1, 10**9], [0, -1, 0.5], "≥ 1"), ("(0, 1)", [0.5], [0, 1], "in (0, 1)"),
     ("(-inf, 0]", [0, -3], [0.1], "≤ 0"), ("(0, 1]", [1], [0], "in (0, 1]")],
)
def test_intervals(text: str, inside: list, outside: list, words: str) -> None:
    interval = Interval.parse(text)
    assert all(v in interval for v in inside) and not any(v in interval for v in outside)
    assert interval.describe() == words


def _set_every_key(cfg: object, values: tuple) -> None:
    """Set each key of ``cfg`` in turn to each value and run every check: none may raise."""
    for key in _keys(cfg):
        for bad in values:
            changed = cfg.copy()
            with open_dict(changed):
                OmegaConf.update(changed, key, bad, merge=False)
            run_config_checks(changed, Facts("libero_spatial", 8))


def test_a_wrong_value_of_any_key_does_not_crash_the_checks(shipped: dict) -> None:
    """A string anywhere is reported, never an exception (the full sweep is slow)."""
    _set_every_key(shipped[("libero_spatial_ppo_dexbotic_pi0", ())], ("abc",))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["libero_spatial_ppo_dexbotic_pi0",
                                  "libero_goal_ppo_dexbotic_dm0"])
def test_no_wrong_value_of_any_key_crashes_the_checks(shipped: dict, name: str) -> None:
    """Whatever a key is set to, the checks report it: no exception reaches the user."""
    _set_every_key(shipped[(name, ())], ("abc", None, 0, -1, 1.5, True, [1], {"a": 1}, "${nope}"))
