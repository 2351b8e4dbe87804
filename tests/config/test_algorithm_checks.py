"""``--algo`` and ``--noise``: their overlays on every shipped config, and what ``dexrl validate``
knows of GRPO (groups, critic, episodes, async) and of flow_noise."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dexrl.catalog import SUITES
from dexrl.cli import app
from dexrl.config.algorithms import algo_overrides, algorithm_of, algorithm_text
from dexrl.config.compose import shipped_matrix
from dexrl.config.validate import compose_and_check
from dexrl.errors import DexrlError

REACH = "reach_cued_ppo_dexbotic_pi0"
SPATIAL = "libero_spatial_ppo_dexbotic_pi0"
ALGO_CODES = ("algorithm-", "mode-async-grpo", "policy-flow-noise", "policy-setting",
              "env-groups")


def _found(*overrides: str, name: str = REACH, gpus: int = 8) -> dict[str, tuple[str, str]]:
    """code -> (level, where) of the algorithm and noise findings."""
    result = compose_and_check(None, None, name, list(overrides), gpus)
    return {f.code: (f.level, f.where) for f in result.findings if f.code.startswith(ALGO_CODES)}


def _grpo(name: str) -> list[str]:
    return algo_overrides("grpo", None, None, name)


@pytest.mark.parametrize(("suite", "name"), [(s, n) for s, _, n in shipped_matrix()])
@pytest.mark.parametrize("gpus", [8, 1])
def test_grpo_and_flow_noise_validate_on_every_shipped_config(suite: str, name: str,
                                                              gpus: int) -> None:
    overrides = [*_grpo(name), *algo_overrides(None, "flow_noise", None, name)]
    result = compose_and_check(None, None, name, overrides, gpus)
    assert not [f.render() for f in result.findings if f.level == "error"]
    cfg = result.cfg
    assert algorithm_of(cfg) == "grpo" and cfg.algorithm.loss_type == "actor"
    assert cfg.actor.model.add_value_head is False
    assert cfg.env.train.group_size == cfg.algorithm.group_size == (
        8 if SUITES[suite].libero else 4)
    assert cfg.actor.model.dexbotic.noise_method == "flow_noise"
    assert cfg.actor.model.joint_logprob is True


def test_the_selectors_overlays_and_refusals() -> None:
    assert algo_overrides(None, None, "libero_spatial", None) == []
    assert algo_overrides("ppo", "flow_sde", "reach", None) == []
    assert algo_overrides("grpo", None, "libero_goal", None) == ["+algo=grpo"]
    assert algo_overrides("grpo", None, "goal", None) == ["+algo=grpo"]
    assert algo_overrides("grpo", None, None, "reach_ppo_dexbotic_dm0") == ["+algo=grpo_tasks"]
    assert algo_overrides(None, "flow_noise", None, SPATIAL) == ["+noise=flow_noise"]
    for algo, noise, code in (("sac", None, "flags-algo-unknown"),
                              (None, "flow_ode", "flags-noise-unknown")):
        with pytest.raises(DexrlError) as info:
            algo_overrides(algo, noise, "reach", None)
        assert info.value.code == code


def test_shipped_ppo_configs_raise_no_algorithm_finding() -> None:
    assert _found() == {} and _found(name=SPATIAL) == {}


@pytest.mark.parametrize(("overrides", "code", "level", "where"), [
    (["algorithm.group_size=1", "env.train.group_size=1"], "algorithm-group-size", "error",
     "algorithm.group_size"),
    (["env.train.group_size=2"], "algorithm-env-group-mismatch", "error", "env.train.group_size"),
    (["algorithm.loss_type=actor_critic", "actor.model.add_value_head=true"],
     "algorithm-grpo-loss", "error", "algorithm.loss_type"),
    (["actor.model.add_value_head=true"], "algorithm-value-head-unused", "warning",
     "actor.model.add_value_head"),
    (["env.train.auto_reset=true"], "algorithm-grpo-episodes", "error", "env.train.auto_reset"),
    (["env.train.ignore_terminations=true"], "algorithm-grpo-episodes", "error",
     "env.train.ignore_terminations"),
    (["algorithm.filter_rewards=true", "algorithm.rewards_lower_bound=0.8",
      "algorithm.rewards_upper_bound=0.2"], "algorithm-filter-bounds", "error",
     "algorithm.rewards_lower_bound"),
])
def test_grpo_rules(overrides: list[str], code: str, level: str, where: str) -> None:
    found = _found(*_grpo(REACH), *overrides)
    assert found[code] == (level, where), found
    assert len([c for c, (lv, _) in found.items() if lv == "error"]) <= 1, found


def test_grpo_groups_must_not_straddle_actor_ranks() -> None:
    # 32 envs on 4 env ranks hold whole groups of 4 (8 each), but over 16 actor ranks 2 each.
    placement = ["~cluster.component_placement",
                 "+cluster.component_placement={actor:0-15,env\\,rollout:0-3}"]
    found = _found(*_grpo(REACH), *placement, gpus=16)
    assert found == {"algorithm-groups-split": ("error", "env.train.total_num_envs")}
    # where the env ranks themselves cannot hold whole groups, that one finding is said
    found = _found(*_grpo(REACH), "algorithm.group_size=8", gpus=8)
    assert set(found) == {"env-groups-uneven"}


def test_grpo_in_async_mode_is_refused_in_one_line() -> None:
    found = _found(*_grpo(REACH), "+mode=async")
    errors = {c: v for c, v in found.items() if v[0] == "error"}
    result = compose_and_check(None, None, REACH, [*_grpo(REACH), "+mode=async"], 8)
    assert [f.code for f in result.findings if f.level == "error"] == ["mode-async-grpo"]
    assert errors == {"mode-async-grpo": ("error", "algorithm.adv_type")}


def test_reward_filtering_without_groups_is_a_warning() -> None:
    assert _found("algorithm.filter_rewards=true") == {
        "algorithm-filter-ungrouped": ("warning", "algorithm.filter_rewards")}


@pytest.mark.parametrize(("overrides", "code", "level", "where"), [
    (["actor.model.dexbotic.noise_logvar_range=[0.5,0.1]"], "policy-setting-out-of-range",
     "error", "actor.model.dexbotic.noise_logvar_range"),
    (["actor.model.dexbotic.noise_logvar_range=[0,0.1]"], "policy-setting-out-of-range",
     "error", "actor.model.dexbotic.noise_logvar_range"),
    (["actor.model.dexbotic.noise_logvar_range=[0.1]"], "policy-setting-out-of-range",
     "error", "actor.model.dexbotic.noise_logvar_range"),
    (["actor.model.joint_logprob=false"], "policy-flow-noise-one-step", "warning",
     "actor.model.joint_logprob"),
])
def test_flow_noise_rules(overrides: list[str], code: str, level: str, where: str) -> None:
    assert _found("+noise=flow_noise", *overrides) == {code: (level, where)}


def test_an_entropy_bonus_on_a_fixed_noise_is_a_warning_and_on_flow_noise_is_not() -> None:
    assert _found("algorithm.entropy_bonus=0.01") == {
        "algorithm-entropy-constant": ("warning", "algorithm.entropy_bonus")}
    assert _found("+noise=flow_noise", "algorithm.entropy_bonus=0.01") == {}


def test_the_dry_run_names_the_algorithm_and_the_noise() -> None:
    result = compose_and_check(None, None, SPATIAL, [*_grpo(SPATIAL), "+noise=flow_noise"], 8)
    text = algorithm_text(result.cfg)
    assert text.startswith("grpo (adv_type grpo, loss_type actor, no value head, groups of 8")
    assert "flow_noise (learned std in [0.08, 0.16]" in text
    ppo = algorithm_text(compose_and_check(None, None, SPATIAL, [], 8).cfg)
    assert ppo.startswith("ppo (adv_type gae, loss_type actor_critic, a value head (critic))")


def test_validate_and_train_take_the_flags() -> None:
    runner = CliRunner()
    done = runner.invoke(app, ["validate", "--suite", "reach_cued", "--model", "dm0", "--algo",
                               "grpo", "--noise", "flow_noise", "--print"])
    assert done.exit_code == 0, done.output
    assert "adv_type: grpo" in done.output and "noise_method: flow_noise" in done.output
    done = runner.invoke(app, ["train", "--suite", "reach_cued", "--model", "pi0", "--smoke",
                               "--algo", "grpo", "--dry-run", "--json"])
    assert done.exit_code == 0, done.output
    assert '"algorithm": "grpo"' in done.output
    done = runner.invoke(app, ["validate", "--suite", "reach", "--model", "pi0", "--algo", "dqn"])
    assert done.exit_code != 0 and "flags-algo-unknown" in done.output


def test_the_dry_run_memory_counts_flow_noises_scored_passes() -> None:
    from dexrl.config.checks import Facts
    from dexrl.training.plan import make_plan, scored_passes

    def plan(*overrides: str):  # noqa: ANN202
        result = compose_and_check(None, None, SPATIAL, list(overrides), 8)
        return result.cfg, make_plan(result.cfg, Facts(gpus_per_node=8))

    cfg, ppo = plan()
    assert scored_passes(cfg) == 1
    cfg, noise = plan("+noise=flow_noise")
    steps = cfg.actor.model.num_steps
    assert scored_passes(cfg) == steps
    assert scored_passes(plan("+noise=flow_noise", "actor.model.ignore_last=true")[0]) == steps - 1
    node, gpu = ppo.placement["actor"][0]
    gpu += node * 8  # the plan's key of that GPU
    assert noise.memory_gb_per_gpu[gpu] > ppo.memory_gb_per_gpu[gpu]
    _, grpo = plan(*_grpo(SPATIAL))
    assert grpo.memory_gb_per_gpu == ppo.memory_gb_per_gpu  # a 1,025-parameter head


def test_the_algorithm_words_survive_wrong_values() -> None:
    """What the schema reports must not crash the words first (``${nope}``, a string range)."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({
        "algorithm": {"adv_type": "${nope}", "group_size": "x"},
        "actor": {"model": {"dexbotic": {"noise_method": "flow_noise",
                                         "noise_logvar_range": "abc"}}},
    })
    assert algorithm_of(cfg) == "ppo"
    # a range that is no list of numbers reads as unset: the words show RLinf's default
    assert "learned std in [0.08, 0.16]" in algorithm_text(cfg)
    cfg.actor.model.dexbotic.noise_logvar_range = [0.2, 1.0]
    assert "learned std in [0.2, 1.0]" in algorithm_text(cfg)
