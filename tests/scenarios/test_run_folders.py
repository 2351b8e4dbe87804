"""Run folders work from any directory and after a move; resume --dry-run; owned fields.

The run folders are built as ``dexrl train`` leaves them (``rlinf_run``), with the
base checkpoint inside the folder as ``--smoke`` puts it, so no RLinf launch is needed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.cli import run
from omegaconf import OmegaConf
from typer.testing import CliRunner

from dexrl.config.run_paths import open_run
from dexrl.runs.layout import CONFIG_FILE, MANIFEST_FILE
from dexrl.runs.record import read_manifest

runner = CliRunner()


@pytest.fixture(scope="module")
def smoke_like_run(tiny_pi0_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose base checkpoint lies inside it (runs/<name>/smoke-checkpoint)."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    root = tmp_path_factory.mktemp("made") / "runs" / "r1"
    base = Path(shutil.copytree(tiny_pi0_dir, root / "smoke-checkpoint"))
    return write_tiny_rlinf_run(root, base, step=1)


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory unrelated to the run."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def moved(run_dir: Path, tmp_path: Path) -> Path:
    """``mv`` a copy of the run folder somewhere else."""
    copy = Path(shutil.copytree(run_dir, tmp_path / "copy"))
    target = tmp_path / "mounted" / "elsewhere" / "r1"
    target.parent.mkdir(parents=True)
    shutil.move(copy, target)
    return target


def test_config_stores_absolute_paths_and_the_run_folder(smoke_like_run: Path) -> None:
    cfg = OmegaConf.load(smoke_like_run / CONFIG_FILE)
    assert cfg.actor.model.model_path == str(smoke_like_run / "smoke-checkpoint")
    assert cfg.runner.logger.log_path == str(smoke_like_run)
    assert cfg.runner.logger.experiment_name == "" and cfg.runner.resume_dir is None
    assert cfg.env.eval.video_cfg.video_base_dir == str(smoke_like_run / "video" / "eval")
    assert read_manifest(smoke_like_run)["run_dir"] == str(smoke_like_run)


def test_a_moved_run_exports_and_resolves_from_another_directory(
        smoke_like_run: Path, tmp_path: Path, elsewhere: Path) -> None:
    from dexrl.checkpoints.sources import resolve_checkpoint

    target = moved(smoke_like_run, tmp_path)
    opened = open_run(target)
    assert opened.moved_from == smoke_like_run
    assert opened.config.actor.model.model_path == str(target / "smoke-checkpoint")
    assert opened.config.env.train.video_cfg.video_base_dir == str(target / "video" / "train")
    source = resolve_checkpoint(target)  # what `dexrl eval --ckpt RUN` resolves
    assert (source.model_dir, source.run_dir, source.step) == (target / "smoke-checkpoint",
                                                               target, 1)
    result = run("export", target, "--out", "exported")
    assert result.exit_code == 0, result.output
    assert f"config, tokenizer and norm stats from {target / 'smoke-checkpoint'}" in result.output
    assert f"the run folder was at {smoke_like_run}" in result.output
    assert (elsewhere / "exported" / "model.safetensors").is_file()


def test_resume_dry_run_of_a_moved_run_writes_nothing(smoke_like_run: Path, tmp_path: Path,
                                                      elsewhere: Path) -> None:
    target = moved(smoke_like_run, tmp_path)
    (target / "checkpoints" / "global_step_2" / "actor").mkdir(parents=True)  # interrupted save
    before = {p: p.stat().st_mtime_ns for p in target.rglob("*")}
    result = run("resume", target, "runner.max_steps=3", "--dry-run", "--move-aside")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Would resume {target} from global_step_1: steps 2 to 3 of 3" in out
    assert "--move-aside would move global_step_2 (interrupted save" in out
    assert f"the run folder was at {smoke_like_run}" in out
    assert "runner.max_steps: 1 -> 3" in out
    assert (f"runner.resume_dir: None -> '{target / 'checkpoints' / 'global_step_1'}'  "
            "(set by dexrl)") in out
    assert "actor.model.model_path" not in out  # re-anchored, not a change
    assert {p: p.stat().st_mtime_ns for p in target.rglob("*")} == before
    assert list(elsewhere.iterdir()) == []


def test_resume_dry_run_refuses_what_resume_refuses(smoke_like_run: Path) -> None:
    result = run("resume", smoke_like_run, "--dry-run")
    assert result.exit_code == 2
    assert "the run already reached step 1 of 1" in result.stderr


def main_style_run(tiny_pi0_dir: Path, root: Path) -> Path:
    """A run folder as dexrl 0.1 (main) left it: model path relative to train's cwd."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    run_dir = root / "runs" / "old"
    write_tiny_rlinf_run(run_dir, Path(shutil.copytree(tiny_pi0_dir, run_dir / "smoke-checkpoint")))
    cfg = OmegaConf.load(run_dir / CONFIG_FILE)
    cfg.actor.model.model_path = cfg.rollout.model.model_path = "runs/old/smoke-checkpoint"
    OmegaConf.save(cfg, run_dir / CONFIG_FILE)
    manifest = read_manifest(run_dir)
    del manifest["run_dir"]
    manifest["cwd"] = str(root)
    (run_dir / MANIFEST_FILE).write_text(json.dumps(manifest))
    return run_dir


def test_old_run_folders_with_relative_paths_still_resolve(tiny_pi0_dir: Path, tmp_path: Path,
                                                           elsewhere: Path) -> None:
    from dexrl.checkpoints.sources import resolve_checkpoint

    old = main_style_run(tiny_pi0_dir, tmp_path / "project")
    assert resolve_checkpoint(old).model_dir == old / "smoke-checkpoint"
    target = tmp_path / "moved"
    shutil.move(old, target)
    assert resolve_checkpoint(target).model_dir == target / "smoke-checkpoint"
    manifest = read_manifest(target)
    del manifest["cwd"]  # nothing left to anchor the relative path: fail with the fix
    (target / MANIFEST_FILE).write_text(json.dumps(manifest))
    result = run("export", target, "--out", "x")
    assert result.exit_code == 2
    assert "[base-not-on-machine]" in result.stderr and "--base" in result.stderr
    assert not (elsewhere / "x").exists()


def test_a_missing_base_checkpoint_names_its_repo(tiny_pi0_dir: Path, tmp_path: Path) -> None:
    from helpers.rlinf_run import write_tiny_rlinf_run

    base = Path(shutil.copytree(tiny_pi0_dir, tmp_path / "base"))
    (base / "dexrl-checkpoint.json").write_text(json.dumps({"repo_id": "Dexmal/libero-db-pi0"}))
    run_dir = write_tiny_rlinf_run(tmp_path / "run", base)
    shutil.rmtree(base)
    result = run("export", run_dir, "--out", tmp_path / "x")
    assert result.exit_code == 2
    assert "hint: run `dexrl download Dexmal/libero-db-pi0`, or pass its folder with --base" in (
        result.stderr)


@pytest.mark.parametrize(
    ("verb", "override", "reason"),
    [("train", "runner.logger.log_path=/data/x", "it is the run folder; choose it with --run-dir"),
     ("train", "runner.logger.experiment_name=exp", "it would move the checkpoints out of"),
     ("resume", "runner.resume_dir=/x/global_step_1", "`dexrl resume RUN_DIR` sets it"),
     ("resume", "+runner.logger.log_path=/y", "it is the run folder")],
)
def test_owned_fields_are_refused_with_the_reason(smoke_like_run: Path, elsewhere: Path,
                                                  verb: str, override: str, reason: str) -> None:
    args = (["train", "--suite", "libero_spatial", "--model", "pi0", "--smoke", "--run-dir", "r"]
            if verb == "train" else ["resume", smoke_like_run, "runner.max_steps=2"])
    result = run(*args, override)
    assert result.exit_code == 2, result.output
    key = override.partition("=")[0].lstrip("+")
    assert f"overrides: {key} is set by dexrl: {reason}" in result.stderr
    assert f"drop the override '{override}'" in result.stderr
    assert list(elsewhere.iterdir()) == []


def test_train_dry_run_shows_the_run_folder_settings(elsewhere: Path) -> None:
    result = run("train", "--suite", "libero_spatial", "--model", "pi0", "--dry-run",
                 "--name", "exp1")
    assert result.exit_code == 0, result.output
    run_dir = elsewhere / "runs" / "exp1"
    assert f"Run directory: {run_dir}" in result.stdout
    assert f"runner.logger.log_path={run_dir}" in result.stdout
    assert "runner.logger.experiment_name=''" in result.stdout
    assert "runner.resume_dir=null" in result.stdout
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize(
    ("where", "code"),
    [("missing", "run-not-found"), ("file", "run-not-a-folder"),
     ("step", "run-is-a-checkpoint-folder"),
     ("foreign", "run-no-config")],
)
def test_resume_of_something_that_is_not_a_run(smoke_like_run: Path, tmp_path: Path,
                                               where: str, code: str) -> None:
    path = {"missing": tmp_path / "nope", "file": smoke_like_run / CONFIG_FILE,
            "step": smoke_like_run / "checkpoints" / "global_step_1", "foreign": tmp_path}[where]
    result = run("resume", path)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr and "hint:" in result.stderr
    assert "Traceback" not in result.output
    if where == "step":
        assert f"pass the run folder {smoke_like_run} (with --step 1" in result.stderr


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--name", "a/b"], "run-name-invalid"),
     (["--name", ".."], "run-name-invalid"),
     (["--name", "x", "--run-dir", "y"], "flags-name-run-dir")],
)
def test_run_folder_names_that_are_not_names(elsewhere: Path, args: list[str],
                                             code: str) -> None:
    result = run("train", "--suite", "libero_spatial", "--model", "pi0", "--smoke", *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr and "hint:" in result.stderr
    assert list(elsewhere.iterdir()) == []
