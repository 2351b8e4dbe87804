"""Every --ckpt form, the base checkpoint of RLinf weights, and the adapter's key names."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from dexrl.checkpoints.files.steps import mark_complete, pick_checkpoint
from dexrl.checkpoints.policy import load_eval_policy, read_training_weights
from dexrl.checkpoints.sources import locate_checkpoint, resolve_checkpoint
from dexrl.errors import DexrlError
from dexrl.runs.layout import WEIGHTS_IN_STEP


def forms(run: Path) -> list[Path]:
    step = run / "checkpoints" / "global_step_2"
    return [run, step, step / WEIGHTS_IN_STEP]


def test_rlinf_forms_resolve_to_the_same_checkpoint(tiny_run: Path, tiny_pi0_dir: Path) -> None:
    for path in forms(tiny_run):
        source = resolve_checkpoint(path)
        assert source.form == "rlinf"
        assert source.weights == (tiny_run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP)
        assert (source.run_dir, source.step) == (tiny_run, 2)
        assert source.model_dir == tiny_pi0_dir.resolve()
        assert source.base_from == f"{tiny_run}/config.yaml"
        assert source.model_type == "dexbotic_pi0"
        training = source.training
        assert (training.suite, training.num_action_chunks, training.num_steps) == (
            "libero_spatial", 5, 4)
        assert training.init_params == {"camera_heights": 256, "camera_widths": 256}


def test_run_dir_picks_the_latest_complete_step_as_resume_does(tiny_run: Path,
                                                               tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    for step, complete in ((10, True), (12, False)):  # 12: weights written, save interrupted
        step_dir = run / "checkpoints" / f"global_step_{step}"
        (step_dir / WEIGHTS_IN_STEP).parent.mkdir(parents=True)
        shutil.copy(run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP, step_dir / WEIGHTS_IN_STEP)
        if complete:
            mark_complete(step_dir, step)
    source = resolve_checkpoint(run)
    assert source.step == 10 == pick_checkpoint(run).step
    assert any("global_step_12 is incomplete" in n for n in source.notes)
    with pytest.raises(DexrlError, match="checkpoint at step 12 is incomplete") as err:
        resolve_checkpoint(run / "checkpoints" / "global_step_12")
    assert err.value.code == "checkpoint-incomplete"
    assert "2, 10" in err.value.hint
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint(run / "checkpoints" / "global_step_12" / WEIGHTS_IN_STEP)
    assert err.value.code == "checkpoint-incomplete"


def test_dexbotic_dir(tiny_pi0_dir: Path) -> None:
    source = resolve_checkpoint(tiny_pi0_dir)
    assert (source.form, source.weights, source.training) == ("dexbotic", None, None)
    assert source.describe()["model_dir"] == str(tiny_pi0_dir.resolve())


def test_every_form_loads_the_trained_weights(tiny_run: Path, tiny_pi0_dir: Path,
                                              actions: Callable) -> None:
    got = [actions(load_eval_policy(resolve_checkpoint(p), "cpu")) for p in forms(tiny_run)]
    assert torch.equal(got[0], got[1]) and torch.equal(got[0], got[2])
    base = actions(load_eval_policy(resolve_checkpoint(tiny_pi0_dir), "cpu"))
    assert not torch.allclose(got[0], base)  # the training weights, not the base's


def test_trained_values_replace_every_network_weight(tiny_run: Path) -> None:
    source = resolve_checkpoint(tiny_run)
    trained, head = read_training_weights(source.weights)
    assert set(head) == {"value_head.weight", "value_head.bias"}
    state = load_eval_policy(source, "cpu").network.state_dict()
    assert set(state) == set(trained)
    assert all(torch.equal(state[k], trained[k]) for k in trained)


def test_bfloat16_request_casts_the_trained_weights(tiny_run: Path) -> None:
    policy = load_eval_policy(resolve_checkpoint(tiny_run), "cpu", "bf16")
    assert policy.network.model.action_out_proj.weight.dtype == torch.bfloat16


def test_base_override_and_missing_base(tiny_run: Path, tiny_pi0_dir: Path,
                                        tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    cfg = OmegaConf.load(run / "config.yaml")
    cfg.actor.model.model_path = str(tmp_path / "gone")
    OmegaConf.save(cfg, run / "config.yaml")
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint(run)
    assert err.value.code == "base-not-on-machine"
    assert "--base" in err.value.hint
    source = resolve_checkpoint(run, base=tiny_pi0_dir)
    assert (source.model_dir, source.base_from) == (tiny_pi0_dir.resolve(), "--base")
    cfg.actor.model.model_path = "${oc.env:DEXRL_NO_SUCH_VARIABLE}"
    OmegaConf.save(cfg, run / "config.yaml")
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint(run)
    assert err.value.code == "base-path-unresolvable"


def test_loose_weights_file_needs_base(tiny_run: Path, tiny_pi0_dir: Path,
                                       tmp_path: Path) -> None:
    loose = Path(shutil.copy(tiny_run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP,
                             tmp_path / "full_weights.pt"))
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint(loose)
    assert err.value.code == "base-not-found"
    source = resolve_checkpoint(loose, base=tiny_pi0_dir)
    assert (source.form, source.run_dir, source.step, source.training) == ("rlinf", None, None,
                                                                           None)


def test_model_type_mismatch(tiny_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    cfg = OmegaConf.load(run / "config.yaml")
    cfg.actor.model.model_type = "dexbotic_dm0"
    OmegaConf.save(cfg, run / "config.yaml")
    with pytest.raises(DexrlError, match="trained model_type dexbotic_dm0") as err:
        resolve_checkpoint(run)
    assert err.value.code == "base-model-type-mismatch"


@pytest.mark.parametrize(
    ("setup", "code"),
    [("missing", "checkpoint-not-found"), ("empty", "checkpoint-unrecognized"),
     ("no_weights", "checkpoint-no-full-weights"), ("corrupt", "checkpoint-weights-unreadable"),
     ("not_tensors", "checkpoint-weights-invalid"),
     ("foreign_file", "checkpoint-not-weights-file")],
)
def test_bad_checkpoints(tiny_run: Path, tmp_path: Path, setup: str, code: str) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    weights = run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP
    target = run
    if setup == "missing":
        target = tmp_path / "nothing"
    elif setup == "empty":
        target = tmp_path / "empty"
        target.mkdir()
    elif setup == "no_weights":
        weights.unlink()
    elif setup == "corrupt":
        weights.write_bytes(b"not a zip")
    elif setup == "not_tensors":
        torch.save({"model.x": [1, 2]}, weights)
    else:
        target = tmp_path / "model.txt"
        target.write_text("x")
    if setup in ("no_weights", "corrupt", "not_tensors"):  # saved so: the marker lists it
        mark_complete(weights.parents[2], 2)
    with pytest.raises(DexrlError) as err:
        load_eval_policy(resolve_checkpoint(target), "cpu")
    assert err.value.code == code


def test_a_step_changed_after_it_was_marked_is_refused_naming_the_file(
        tiny_run: Path, tmp_path: Path) -> None:
    """The marker's sizes and checksums catch what the weights' loader would find later (or
    never: a flipped byte loads)."""
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    weights = run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint(run)
    assert err.value.code == "checkpoint-damaged"
    assert "actor/model_state_dict/full_weights.pt has xxh3_64" in err.value.message
    assert "no earlier checkpoint of this run is good" in err.value.hint
    with pytest.raises(DexrlError, match="checkpoint-damaged|damaged"):
        resolve_checkpoint(run / "checkpoints/global_step_2")  # the step folder itself too
    first = Path(shutil.copytree(tiny_run / "checkpoints/global_step_2",
                                 run / "checkpoints/global_step_1"))
    mark_complete(first, 1)
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint(run)
    assert err.value.hint == (
        f"the last good checkpoint is global_step_1: `dexrl eval --ckpt {first} --suite "
        f"libero_spatial` or `dexrl export {first} --out DIR`")


def test_training_weights_that_do_not_fit_the_network(tiny_run: Path, tmp_path: Path) -> None:
    run = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    weights = run / "checkpoints/global_step_2" / WEIGHTS_IN_STEP
    state = torch.load(weights, weights_only=True)
    state["model.extra.weight"] = torch.zeros(2)
    del state["model.action_out_proj.bias"]
    torch.save(state, weights)
    mark_complete(weights.parents[2], 2)  # saved so
    with pytest.raises(DexrlError) as err:
        load_eval_policy(resolve_checkpoint(run), "cpu")
    assert err.value.code == "model-weights-mismatch"
    assert any("model.extra.weight" in d for d in err.value.details)
    assert any("model.action_out_proj.bias" in d for d in err.value.details)


def test_fixture_keys_equal_what_the_rlinf_adapter_saves(tiny_run: Path,
                                                         tiny_pi0_dir: Path) -> None:
    """RLinf saves the adapter's own state dict; its names must be what eval/export read."""
    from dexrl.bridge.policies.pi0 import build
    from dexrl.config.compose import compose

    cfg = compose("libero_spatial_ppo_dexbotic_pi0",
                  ["+smoke=cpu", f"actor.model.model_path={tiny_pi0_dir}"])
    adapter = build(cfg.actor.model)
    saved, head = read_training_weights(resolve_checkpoint(tiny_run).weights)
    assert set(adapter.state_dict()) == set(saved) | set(head)
    assert {k: v.shape for k, v in adapter.state_dict().items() if k in head} == {
        k: v.shape for k, v in head.items()}


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with runs/reach_pi0_20261126-094207 and its own DEXRL_HOME."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEXRL_HOME", str(tmp_path / "home"))
    (tmp_path / "runs" / "reach_pi0_20261126-094207").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize(
    ("ckpt", "hint"),
    [("runs/nope", "check the spelling (`ls runs/` lists what is there)"),
     ("runs/reach_pi0_2026112", "the closest there: runs/reach_pi0_20261126-094207"),
     ("runs/reach_pi0_20261126-094270", "the closest there: runs/reach_pi0_20261126-094207"),
     ("rusn/reach_pi0_20261126-094207/checkpoints/global_step_2",
      "rusn does not exist either; check the spelling (`ls .` lists what is there); the closest "
      "there: runs/reach_pi0_20261126-094207/checkpoints/global_step_2"),
     ("./nope/model", "nope does not exist either"), ("nope/", "`ls .`"), ("model", "`ls .`"),
     ("~/dexrl-no-such-checkpoint", "check the spelling")],
)
def test_a_path_that_does_not_exist_is_not_read_as_a_repo_id(here: Path, ckpt: str,
                                                               hint: str) -> None:
    with pytest.raises(DexrlError) as err:
        locate_checkpoint(ckpt)
    assert (err.value.code, err.value.where) == ("checkpoint-not-found", "--ckpt")
    assert err.value.message == f"checkpoint path does not exist: {ckpt}"
    assert hint in err.value.hint and "dexrl download" not in err.value.hint


def test_a_repo_id_is_read_as_one(here: Path) -> None:
    with pytest.raises(DexrlError) as err:
        locate_checkpoint("Dexmal/libero-db-pi0")  # no folder Dexmal/ here: a repo id
    assert err.value.code == "hub-not-downloaded"
    assert "run `dexrl download Dexmal/libero-db-pi0` first" in err.value.hint
    with pytest.raises(DexrlError) as err:
        locate_checkpoint("rnus/reach_pi0_20261126-094207")  # could be either: the hint says
    assert err.value.code == "hub-not-downloaded"
    assert "(the closest here: runs/reach_pi0_20261126-094207)" in err.value.hint


def test_a_downloaded_repo_id_is_never_misread_as_a_path(here: Path) -> None:
    from dexrl.hub.home import checkpoint_dir
    from dexrl.hub.manifest import Manifest, write_manifest

    local = checkpoint_dir("runs/model")  # an owner named like a folder here
    local.mkdir(parents=True)
    write_manifest(local, Manifest("runs/model", "model", "main", "0" * 40, "https://hf.co",
                                   "2026-01-01T00:00:00Z", "dexbotic_pi0", True, [], {}))
    assert locate_checkpoint("runs/model") == local
    (here / "runs" / "model").mkdir()  # what is here wins
    assert locate_checkpoint("runs/model") == here / "runs" / "model"


def test_export_of_a_missing_path_names_the_closest(here: Path) -> None:
    with pytest.raises(DexrlError) as err:
        resolve_checkpoint("runs/reach_pi0")
    assert (err.value.code, err.value.message) == ("checkpoint-not-found",
                                                   "checkpoint path does not exist")
    assert f"the closest there: {here / 'runs' / 'reach_pi0_20261126-094207'}" in err.value.hint
