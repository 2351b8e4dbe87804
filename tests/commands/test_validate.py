"""`dexrl validate` through the real CLI: clean configs, every check's failure, bad input."""

from __future__ import annotations

import json

import pytest
from helpers.cli import run
from typer.testing import CliRunner

from dexrl.commands import validate as validate_command
from dexrl.config.compose import shipped_matrix

runner = CliRunner()
BASE = ["validate", "--suite", "libero_spatial", "--model", "pi0"]
DM0 = ["validate", "--suite", "libero_goal", "--model", "dm0"]
CHUNK_WARNING = "warning: actor.model.num_action_chunks: 5 differs from DM0's documented 10"


def run_finding(monkeypatch: pytest.MonkeyPatch, *args: str):
    """``run``, and the (where, code) of each finding it reported (a code is never printed)."""
    real, found = validate_command.report, set()

    def report(result, console, strict):  # noqa: ANN001, ANN202 - wraps report
        found.update((f.where, f.code) for f in result.findings)
        return real(result, console, strict)

    with monkeypatch.context() as patch:
        patch.setattr(validate_command, "report", report)
        return run(*args), found


@pytest.mark.parametrize(("suite", "model", "name"), shipped_matrix())
def test_every_shipped_config_validates_clean(suite: str, model: str, name: str) -> None:
    result = run("validate", "--suite", suite, "--model", model)
    assert result.exit_code == 0, result.output
    assert f"Config {name} is well-formed" in result.output
    assert "error:" not in result.output
    assert "max_episode_steps" not in result.output  # its own horizon is no warning


def test_config_name_flag_and_print() -> None:
    result = run("validate", "--config-name", "libero_goal_ppo_dexbotic_dm0", "--print")
    assert result.exit_code == 0, result.output
    assert "model_type: dexbotic_dm0" in result.output
    assert "task_suite_name: libero_goal" in result.output


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["validate", "--suite", "libero_spatil", "--model", "pi0"],
         "unknown-suite"),
        (["validate", "--suite", "libero_spatial", "--model", "pi1"],
         "unknown-model"),
        (["validate", "--config-name", "libero_spatial_ppo_dexbotic_pi"],
         "config-not-found"),
        (["validate", "--model", "pi0"], "config-selection-incomplete"),
        ([*BASE, "runner.max_stepz=3"],
         "override-unknown-key"),
        ([*BASE, "foo"], "override-syntax"),
        ([*BASE, "runner.max_steps=[1,"], "override-syntax"),
        ([*BASE, "runner.max_steps=1,2"], "override-sweep"),
    ],
)
def test_bad_names_and_overrides(args: list[str], code: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert f"[{code}]" in result.stderr
    assert "hint:" in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("overrides", "where", "code"),
    [
        (["env.train.total_num_envs=63"], "env.train.total_num_envs", "env-count-uneven"),
        (["rollout.pipeline_stage_num=3"], "env.train.total_num_envs", "env-stages-uneven"),
        (["algorithm.group_size=3", "env.train.group_size=3"], "env.train.total_num_envs",
         "env-groups-uneven"),
        (["env.train.max_steps_per_rollout_epoch=242"], "env.train.max_steps_per_rollout_epoch",
         "env-steps-chunks-uneven"),
        (["actor.global_batch_size=1000"], "actor.global_batch_size",
         "batch-micro-batches-uneven"),
        (["~cluster.component_placement",
          "+cluster.component_placement={actor:0-7,env\\,rollout:0-1}",
          "env.train.total_num_envs=4"], "env.train.total_num_envs", "env-actor-split-uneven"),
        (["actor.global_batch_size=1280"], "actor.global_batch_size", "batch-samples-uneven"),
        (["actor.model.add_value_head=false"], "actor.model.add_value_head",
         "algorithm-value-head-missing"),
        (["cluster.component_placement={actor\\,env\\,rollout:0-9}"],
         "cluster.component_placement.actor,env,rollout", "placement-gpu-count"),
        (["cluster.component_placement={actor\\,env\\,rollout:0-x}"],
         "cluster.component_placement.actor,env,rollout", "placement-syntax"),
        (["~cluster.component_placement", "+cluster.component_placement={actor:all,env:all}"],
         "cluster.component_placement", "placement-component-missing"),
        (["rollout.model.model_path=/elsewhere"], "rollout.model.model_path",
         "config-copy-differs"),
        (["runner.val_check_interval=20"], "runner.save_interval",
         "runner-save-not-on-validation"),
        (["runner.logger.logger_backends=[tb]"], "runner.logger.logger_backends",
         "config-value-not-a-choice"),
        (["actor.model.model_type=dexbotic_pi"], "actor.model.model_type",
         "config-model-type-unknown"),
        (["actor.model.dexbotic.num_steps=10"], "actor.model.dexbotic.num_steps",
         "config-copy-differs"),
        (["actor.model.dexbotic.action_chunk=10"], "actor.model.dexbotic.action_chunk",
         "config-copy-differs"),
        (["actor.model.dexbotic.norm_mode=zscore"], "actor.model.dexbotic.norm_mode",
         "config-value-not-a-choice"),
    ],
)
def test_each_check_fails_with_its_code(monkeypatch: pytest.MonkeyPatch, overrides: list[str],
                                        where: str, code: str) -> None:
    result, found = run_finding(monkeypatch, *BASE, *overrides)
    assert result.exit_code == 2, result.output
    assert f"error: {where}: " in result.stderr
    assert (where, code) in found, found


def test_all_problems_are_collected() -> None:
    result = run(*BASE, "env.train.total_num_envs=63", "runner.logger.logger_backends=[x]",
                 "actor.model.add_value_head=false")
    assert result.exit_code == 2
    assert "(3 error(s)" in result.stderr


def test_gpus_per_node_changes_world_size() -> None:
    assert run(*BASE, "env.train.total_num_envs=60").exit_code == 2  # 60 % 8
    # 60 envs × 384 policy calls = 23040 samples: 1152 divides them and 32 × 4 divides 1152.
    result = run(*BASE, "--gpus-per-node", "4", "env.train.total_num_envs=60",
                 "actor.global_batch_size=1152")
    assert result.exit_code == 0, result.output
    two_nodes = run(*BASE, "--gpus-per-node", "4", "cluster.num_nodes=2",
                    "env.train.total_num_envs=60")
    assert two_nodes.exit_code == 2
    assert "60 envs do not divide over 8 env processes" in two_nodes.stderr


def test_save_interval_beyond_max_steps_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    result, found = run_finding(monkeypatch, *BASE, "runner.save_interval=400")
    assert result.exit_code == 0
    assert "warning: runner.save_interval: " in result.stderr
    assert ("runner.save_interval", "runner-save-after-end") in found


def test_horizon_warning_and_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    result, found = run_finding(monkeypatch, *BASE, "env.train.max_episode_steps=200")
    assert result.exit_code == 0
    assert ("warning: env.train.max_episode_steps: 200 differs from the libero_spatial horizon "
            "220 used by the openpi/RLinf standalone evaluations and from the shipped configs' "
            "240") in result.stderr
    assert ("env.train.max_episode_steps", "env-horizon-differs") in found
    assert ("env.eval.max_episode_steps", "env-horizon-differs") not in found  # 240 as shipped
    strict = run(*BASE, "--strict", "env.train.max_episode_steps=200")
    assert strict.exit_code == 2
    for horizon in (220, 240):  # the standard one, and the shipped config's own (RLinf's)
        clean, found = run_finding(monkeypatch, *BASE, "--strict",
                                   f"env.train.max_episode_steps={horizon}",
                                   f"env.eval.max_episode_steps={horizon}",
                                   "actor.model.model_path=/nonexistent/ckpt")
        assert clean.exit_code == 2  # the missing checkpoint is a warning too
        assert found == {("actor.model.model_path", "checkpoint-not-found")}


def test_a_negative_max_steps_says_max_epochs_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    result, found = run_finding(monkeypatch, "validate", "--suite", "reach", "--model", "pi0",
                                "runner.max_steps=-3")
    assert result.exit_code == 0
    assert ("warning: runner.max_steps: -3 is negative: RLinf runs runner.max_epochs = 1000 "
            "steps") in result.stderr
    assert ("runner.max_steps", "runner-steps-from-epochs") in found


def test_existing_model_path_is_checked(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "dexbotic_dm0"}))
    result, found = run_finding(monkeypatch, *BASE, f"actor.model.model_path={tmp_path}")
    assert result.exit_code == 2
    assert {("model-type-mismatch", str(tmp_path / "config.json")),
            ("model-weights-missing", str(tmp_path)),
            ("norm-stats-missing", str(tmp_path / "norm_stats.json"))} <= {
        (code, where) for where, code in found}, found


def test_validate_writes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run(*BASE, "--print")
    run(*BASE, "foo")
    assert list(tmp_path.iterdir()) == []


def test_norm_mode_is_shown() -> None:
    assert "norm mode: mean_std (actor.model.dexbotic.norm_mode)" in run(*BASE).stderr
    result = run(*DM0, "actor.model.dexbotic.norm_mode=quantile")
    assert result.exit_code == 0, result.output
    assert "norm mode: quantile (actor.model.dexbotic.norm_mode)" in result.stderr
    unset = run(*BASE, "~actor.model.dexbotic.norm_mode")
    assert "norm mode: mean_std (unset, the default)" in unset.stderr


def test_dm0_chunk_size_warning_names_both_sources() -> None:
    result = run(*DM0)
    assert result.exit_code == 0, result.output
    assert CHUNK_WARNING in result.stderr
    assert "RLinf's Dexbotic docs and model/dexbotic_dm0.yaml say DM0 uses 10" in result.stderr
    assert "libero_spatial_ppo_dexbotic_dm0.yaml ships 5" in result.stderr
    assert run(*DM0, "--strict").exit_code == 2
    documented = run(*DM0, "actor.model.num_action_chunks=10")
    assert "actor.model.num_action_chunks" not in documented.stderr, documented.stderr
    assert "DM0's documented" not in run(*BASE).stderr  # π0 has no documented chunk size


@pytest.mark.parametrize(
    ("overrides", "where", "code"),
    [
        (["actor.model.dexbotic.model_max_length=0"], "actor.model.dexbotic.model_max_length",
         "config-value-out-of-range"),
        (["actor.model.dexbotic.train_expert_only=false"],
         "actor.model.dexbotic.train_expert_only", "dm0-bf16-full-fine-tuning"),
    ],
)
def test_dm0_settings_are_checked(monkeypatch: pytest.MonkeyPatch, overrides: list[str],
                                  where: str, code: str) -> None:
    result, found = run_finding(monkeypatch, *DM0, *overrides)
    assert result.exit_code == 2, result.output
    assert f"error: {where}: " in result.stderr
    assert (where, code) in found, found


def test_full_dm0_fine_tuning_in_fp32_is_accepted() -> None:
    result = run(*DM0, "actor.model.dexbotic.train_expert_only=false",
                 "actor.model.precision=fp32")
    assert result.exit_code == 0, result.output


# One bad value each: exactly this error (key, value, what is expected) and, where given, this fix.
BAD_VALUES = [
    (["actor.model.num_steps=0"], "actor.model.num_steps: got 0, expected an integer ≥ 1", None),
    (["actor.model.num_steps=four"], "actor.model.num_steps: got 'four', expected an integer ≥ 1",
     None),
    (["actor.optim.lr=-1e-5"], "actor.optim.lr: got -1e-05, expected a number ≥ 0", None),
    (["algorithm.group_size=0"], "algorithm.group_size: got 0, expected an integer ≥ 1", None),
    (["actor.model.precision=bf32"], "actor.model.precision: got 'bf32', expected one of 'bf16', "
     "'bf16-mixed', 'fp16'", "did you mean actor.model.precision=fp32?"),
    (["runner.max_steps=1.5"], "runner.max_steps: got 1.5, expected an integer", None),
    (["runner.max_steps='10'"], "runner.max_steps: got '10', expected an integer",
     "write runner.max_steps=10 without quotes"),
    (["actor.model.num_action_chunks=5.0"], "actor.model.num_action_chunks: got 5.0, expected an "
     "integer ≥ 1", "write actor.model.num_action_chunks=5 (a whole number"),
    (["env.train.auto_reset='true'"], "env.train.auto_reset: got 'true', expected true or false",
     "write env.train.auto_reset=true without quotes"),
    (["algorithm.clip_ratio_high=1.5"], "algorithm.clip_ratio_high: got 1.5, expected a number in "
     "(0, 1)", None),
    (["algorithm.gamma=-0.1"], "algorithm.gamma: got -0.1, expected a number in [0, 1]", None),
    (["algorithm.clip_ratio_c=1"], "algorithm.clip_ratio_c: got 1, expected a number > 1", None),
    (["algorithm.adv_type=gea"], "algorithm.adv_type: got 'gea', expected one of 'gae', 'grpo'",
     "did you mean algorithm.adv_type=gae?"),
    (["algorithm.loss_type=ppo"], "algorithm.loss_type: got 'ppo', expected one of 'actor', "
     "'actor_critic', 'decoupled_actor_critic'", None),
    (["actor.model.dexbotic.noise_method=sde"], "actor.model.dexbotic.noise_method: got 'sde', "
     "expected one of 'flow_sde', 'flow_cps'", None),
    (["actor.global_batch_size=0"], "actor.global_batch_size: got 0, expected an integer ≥ 1",
     None),
    (["env.train.total_num_envs=-8"], "env.train.total_num_envs: got -8, expected an integer ≥ 1",
     None),
    (["cluster.num_nodes=0"], "cluster.num_nodes: got 0, expected an integer ≥ 1", None),
    (["runner.logger.logger_backends=tensorboard"], "runner.logger.logger_backends: got "
     "'tensorboard', expected a list of items", "runner.logger.logger_backends=[tensorboard]"),
    (["actor.fsdp_config.sharding_strategy=full"], "actor.fsdp_config.sharding_strategy: got "
     "'full', expected one of 'full_shard'", None),
    (["runner.max_steps=${nope}"], "runner.max_steps: ${nope} does not resolve", None),
    (["actor.model.dexbotic.noise_method=flow_cps", "actor.model.dexbotic.noise_level=1.5"],
     "actor.model.dexbotic.noise_level: 1.5 exceeds 1, the largest flow_cps noise level", None),
]


@pytest.mark.parametrize(("overrides", "error", "hint"), BAD_VALUES)
def test_each_bad_value_is_one_error(overrides: list[str], error: str, hint: str | None) -> None:
    result = run(*BASE, *overrides)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: {error}"), result.stderr
    assert "(1 error(s)" in result.stderr
    if hint:
        assert hint in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("override", "message"),
    [("runner.save_interval=0", "runner.save_interval: 0 disables checkpoints"),
     ("actor.optim.lr=0", "actor.optim.lr: 0 freezes these weights"),
     ("runner.save_interval=-1", "runner.save_interval: -1 disables checkpoints: RLinf saves "
      "none, not even the last step, so `dexrl resume` will have nothing to continue from"),
     ("runner.max_steps=0", "runner.max_steps: 0 trains nothing")],
)
def test_surprising_values_warn(override: str, message: str) -> None:
    result = run(*BASE, override)
    assert result.exit_code == 0, result.output
    assert f"warning: {message}" in result.stderr
    assert run(*BASE, override, "--strict").exit_code == 2


@pytest.mark.parametrize(
    ("args", "hint"),
    [(["runner.max_steps", "10"], "`runner.max_steps=10` (no spaces around '=')"),
     (["runner.max_steps", "=", "10"], "`runner.max_steps=10`"),
     (["runner.max_steps==10"], "use a single '=': `runner.max_steps=10`"),
     (["runner.max_steps"], "write `runner.max_steps=VALUE`")],
)
def test_override_slips_get_the_fix(args: list[str], hint: str) -> None:
    result = run(*BASE, *args)
    assert result.exit_code == 2
    assert "error: overrides: malformed override" in result.stderr
    assert "hint: " in result.stderr and hint in result.stderr


def test_explain_prints_type_range_default_and_meaning() -> None:
    result = run("validate", "--explain", "actor.optim.lr")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "actor.optim.lr", "  type:     float", "  range:    ≥ 0",
        "  warning:  = 0 freezes these weights: no update changes them (a control run)",
        "  default:  5e-06 (in libero_spatial_ppo_dexbotic_pi0)",
        "  meaning:  AdamW learning rate of the policy."]
    both = run("validate", "--explain", "env.*.total_num_envs", "-s", "libero_goal", "-m", "dm0",
               "env.eval.total_num_envs=16")
    assert "  train:    64 (in libero_goal_ppo_dexbotic_dm0)" in both.output
    assert "  eval:     16 (in libero_goal_ppo_dexbotic_dm0)" in both.output
    choices = run("validate", "--explain", "actor.model.precision").output
    assert "  choices:  'bf16', 'bf16-mixed'" in choices
    assert "  warning:  ≤ 0 disables checkpoints" in run(
        "validate", "--explain", "runner.save_interval").output


def test_explain_unknown_key_names_the_closest() -> None:
    result = run("validate", "--explain", "actor.optim.lrr")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "error: --explain: 'actor.optim.lrr' is not a key dexrl knows [config-explain-unknown-key]",
        "hint: closest known keys: actor.optim.lr, actor.optim.value_lr, actor.optim.clip_grad"]


def test_a_setting_rlinf_ignores_is_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    result, found = run_finding(monkeypatch, *BASE, "algorithm.normalize_advantages=false")
    assert result.exit_code == 0, result.output
    assert "warning: algorithm.normalize_advantages: " in result.output
    assert ("algorithm.normalize_advantages", "algorithm-setting-ignored") in found
