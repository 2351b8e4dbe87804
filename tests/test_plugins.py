"""Policy plugins: a tiny distribution built in the test is discovered, validated, listed,
registered with RLinf (here and in a real Ray worker) and, in the slow test, trained one step.
A plugin with a checkpoint folder of its own passes ``validate`` and ``doctor --ckpt`` through
its ModelSpec alone. Broken and conflicting plugins are reported by name and never break the
built-in policies.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
from helpers.smoke import EXT_DIR
from helpers.tiny_plugin import write_plugin
from omegaconf import OmegaConf
from typer.testing import CliRunner

from dexrl import plugins
from dexrl.bridge.launch.worker_probe import RoundTrip
from dexrl.catalog import get_policy, policies
from dexrl.cli import app
from dexrl.config.validate import compose_and_check
from dexrl.doctor import schedule as doctor_runner
from dexrl.doctor.extension import check_roundtrip
from dexrl.errors import DexrlError

runner = CliRunner()


@pytest.fixture
def install(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """Install plugins by putting their folder on sys.path; uninstall them afterwards. The
    plugins' builders import ``dexrl_tiny_ext`` by name, from :data:`helpers.smoke.EXT_DIR`."""
    roots: list[str] = [str(EXT_DIR)]
    sys.path.insert(0, str(EXT_DIR))
    packages: list[str] = []

    def add(package: str, **kwargs: object) -> Path:
        root = tmp_path / f"site_{package}"
        root.mkdir()
        write_plugin(root, package, **kwargs)
        sys.path.insert(0, str(root))
        roots.append(str(root))
        packages.append(package)
        importlib.invalidate_caches()
        plugins.refresh()
        return root

    yield add
    for root in roots:
        sys.path.remove(root)
    for module in [m for m in sys.modules if m.split(".")[0] in packages]:
        del sys.modules[module]
    plugins.refresh()


def test_a_plugin_is_discovered_validated_and_composed(install: Callable[..., Path]) -> None:
    install("dexrl_plug_ok", name="plug_ok", policy_args="settings=('actor.model.hidden=16',)")
    policy = policies()["plug_ok"]
    assert (policy.model_type, policy.distribution) == ("plug_ok_state", "dexrl-plug-ok")
    assert get_policy("plug_ok_state") is policy
    result = compose_and_check("libero_spatial", "plug_ok", None, [])
    assert result.name == "libero_spatial_ppo_plug_ok_state"
    model = result.cfg.actor.model
    assert (model.model_type, model.num_action_chunks, model.hidden) == ("plug_ok_state", 5, 16)
    assert result.cfg.runner.logger.experiment_name == result.name
    assert result.cfg.env.train.task_suite_name == "libero_spatial"
    assert [f for f in result.findings if f.level == "error"] == []
    # User overrides still win over the plugin's model config and settings.
    again = compose_and_check(None, None, result.name, ["actor.model.hidden=3"])
    assert again.cfg.actor.model.hidden == 3


def test_cli_lists_and_validates_a_plugin(install: Callable[..., Path]) -> None:
    install("dexrl_plug_cli", name="plug_cli")
    listed = runner.invoke(app, ["configs"], env={"COLUMNS": "250"})
    assert listed.exit_code == 0
    assert "libero_goal_ppo_plug_cli_state" in listed.output
    assert "dexrl-plug-cli" in listed.output
    checked = runner.invoke(app, ["validate", "--suite", "libero_goal", "--model", "plug_cli"])
    assert checked.exit_code == 0, checked.output
    assert "Config libero_goal_ppo_plug_cli_state is well-formed" in checked.output


def test_register_builds_the_plugin_policy_with_its_builder(install: Callable[..., Path]) -> None:
    import rlinf.models

    from dexrl.bridge import registry

    install("dexrl_plug_reg", name="plug_reg")
    types = registry.register()
    assert types[:1] == ["dexbotic_pi0"] and "plug_reg_state" in types
    assert registry.registered_model_types(["dexbotic_pi0", "plug_reg_state"]) == [
        "dexbotic_pi0", "plug_reg_state"]
    cfg = OmegaConf.create({"action_dim": 7, "num_action_chunks": 5})
    model = rlinf.models._MODEL_REGISTRY["plug_reg_state"](cfg, None)
    assert type(model).__name__ == "TinyPolicy"


def test_a_plugin_that_fails_to_import_is_named_and_pi0_still_works(
    install: Callable[..., Path],
) -> None:
    from dexrl.bridge import registry

    install("dexrl_plug_bad", name="plug_bad", import_error=True)
    result = runner.invoke(app, ["validate", "--suite", "libero_spatial", "--model", "plug_bad"])
    assert result.exit_code == 2
    assert "policy plugin 'plug_bad' from dexrl-plug-bad failed to load" in result.output
    assert "dexrl_module_that_does_not_exist" in result.output
    assert "Traceback" not in result.output
    train = runner.invoke(app, ["train", "--suite", "libero_spatial", "--model", "plug_bad",
                                "--smoke"])
    assert train.exit_code == 2 and "[plugin-unusable]" in train.output
    ok = runner.invoke(app, ["validate", "--suite", "libero_spatial", "--model", "pi0"])
    assert ok.exit_code == 0, ok.output
    assert "dexbotic_pi0" in registry.register()
    listed = runner.invoke(app, ["configs"], env={"COLUMNS": "250"})
    assert listed.exit_code == 0 and "libero_spatial_ppo_dexbotic_pi0" in listed.output
    assert "warning: policy plugin 'plug_bad' from dexrl-plug-bad failed" in listed.stderr
    # doctor: the round trip passed for the others, the broken plugin still fails the check.
    row = check_roundtrip([RoundTrip(True, "ok", "m", ("dexbotic_pi0",), "n")], ["dexbotic_pi0"])
    assert row.status == "fail" and "'plug_bad' from dexrl-plug-bad" in row.finding


def test_a_plugin_checkpoint_passes_validate_and_doctor_through_its_spec(
    install: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    install("dexrl_plug_ck", name="plug_ck", with_checkpoint=True)
    write = importlib.import_module("dexrl_plug_ck.checkpoint").write
    ckpt = tmp_path / "ckpt"
    write(ckpt)
    args = ["--suite", "libero_spatial", "--model", "plug_ck"]
    checked = runner.invoke(app, ["validate", *args, f"actor.model.model_path={ckpt}"])
    assert checked.exit_code == 0, checked.output
    assert "well-formed" in checked.output and "unsupported" not in checked.output
    real = doctor_runner.areas
    monkeypatch.setattr(doctor_runner, "areas", lambda findings: [
        a for a in real(findings) if a.name in ("config", "checkpoint")])

    def doctor() -> dict[str, dict]:
        result = runner.invoke(app, ["doctor", *args, "--ckpt", str(ckpt), "--json"])
        return {c["id"]: c for c in json.loads(result.stdout)["checks"]}

    rows = doctor()
    assert rows["config.checks"]["status"] in ("ok", "warn"), rows["config.checks"]
    files = rows["checkpoint.files"]
    assert files["status"] == "ok", files
    assert files["details"]["model_type"] == "plug_ck_state"
    assert "tensor names and shapes" in files["details"]["checked"]
    # Controls: the spec's own tokenizer file and tensor check are what decide.
    from safetensors.torch import save_file

    save_file({"body.linear.weight": torch.zeros(3, 3)}, str(ckpt / "model.safetensors"))
    files = doctor()["checkpoint.files"]
    assert files["status"] == "fail" and "tiny tensors missing or mis-shaped" in files["finding"]
    (ckpt / "vocab.txt").unlink()
    refused = runner.invoke(app, ["validate", *args, f"actor.model.model_path={ckpt}"])
    assert refused.exit_code == 2
    assert "vocab.txt" in refused.output and "tokenizer file missing" in refused.output


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"with_config": False}, "has no model config: model/plug_x_state.yaml not found"),
    ({"builder": "dexrl_no_such_module:build"}, "has no builder"),
    ({"builder": "no colon"}, "has no builder"),
    ({"policy_args": "suites=('libero_nowhere',)"}, "unknown suites"),
    ({"policy_args": "model=ModelSpec(check_tensors='no colon')"},
     "malformed ModelSpec.check_tensors 'no colon'"),
    ({"policy_args": "model='big'"}, "declares model='big', not a dexrl.catalog.ModelSpec"),
])
def test_an_invalid_declaration_is_named(install: Callable[..., Path], kwargs: dict,
                                         message: str) -> None:
    install("dexrl_plug_x", name="plug_x", **kwargs)
    with pytest.raises(DexrlError, match=message) as err:
        get_policy("plug_x")
    assert err.value.code == "plugin-unusable"
    assert "dexrl-plug-x" in err.value.where
    assert "plug_x" not in policies() and "pi0" in policies()


def test_two_plugins_claiming_one_name_are_both_named(install: Callable[..., Path]) -> None:
    install("dexrl_plug_a", name="plug_same")
    install("dexrl_plug_b", name="plug_same", model_type="plug_other")
    result = runner.invoke(app, ["validate", "--suite", "libero_spatial", "--model", "plug_same"])
    assert result.exit_code == 2
    assert "claimed by more than one plugin: dexrl-plug-a, dexrl-plug-b" in result.output
    assert "plug_same" not in policies()


def test_shadowing_a_builtin_needs_an_explicit_override(install: Callable[..., Path]) -> None:
    install("dexrl_plug_pi", name="pi0")
    with pytest.raises(DexrlError, match="shadows dexrl's built-in 'pi0'") as err:
        get_policy("pi0")
    assert err.value.code == "plugin-unusable"
    assert "dexrl-plug-pi" in err.value.where and "replaces_builtin=True" in err.value.hint


def test_an_explicit_override_replaces_the_builtin(install: Callable[..., Path]) -> None:
    install("dexrl_plug_pi0", name="pi0", model_type="dexbotic_pi0",
            policy_args="replaces_builtin=True")
    policy = get_policy("pi0")
    assert policy.distribution == "dexrl-plug-pi0"
    assert policy.builder == "dexrl_plug_pi0.policy:build"
    assert get_policy("dm0").distribution == "dexrl"


@pytest.mark.slow
def test_a_ray_worker_discovers_the_plugin_through_register(
    install: Callable[..., Path],
) -> None:
    from dexrl.bridge.launch.worker_probe import check_registration

    root = install("dexrl_plug_ray", name="plug_ray")
    (result,) = check_registration(["dexbotic_pi0", "plug_ray_state"],
                                   env={"PYTHONPATH": f"{root}:{EXT_DIR}"})
    assert result.ok, result.message
    assert result.model_types == ("dexbotic_pi0", "plug_ray_state")


@pytest.mark.slow
def test_cli_smoke_trains_a_plugin_policy_one_step_from_its_checkpoint(install: Callable[..., Path],
                                                    tmp_path: Path) -> None:
    from helpers.smoke import DEXRL, run_process

    from dexrl.checkpoints.files.steps import is_complete
    from tests.helpers.checkpoints import latest_checkpoint

    root = install("dexrl_plug_e2e", name="plug_e2e", with_checkpoint=True)
    run_dir = tmp_path / "run"
    run = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "plug_e2e",
                       "--smoke", "--run-dir", str(run_dir)], run_dir,
                      env={"PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stderr[-3000:]
    assert any(line.startswith("step 1/1 ") for line in run.stdout.splitlines())
    assert is_complete(latest_checkpoint(run_dir))
    # Its own smoke hook wrote its checkpoint, which its builder loaded for training.
    model = OmegaConf.load(run_dir / "config.yaml").actor.model
    assert model.model_type == "plug_e2e_state"
    assert model.model_path == str(run_dir / "smoke-checkpoint")
    assert (run_dir / "smoke-checkpoint" / "vocab.txt").is_file()
