"""`dexrl resume` of a run folder stopped before its first complete checkpoint: it starts again
from step 0 in the same folder, with its saved config; eval and export keep refusing it.

The run folders are built as ``dexrl train`` leaves them (``rlinf_run``), their checkpoints
removed or left without their marker; no RLinf launch is needed (the launch itself is replaced
where a test goes past ``start_resume``). The real restart through RLinf is
tests/scenarios/test_restart.py (``slow``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.cli import run
from helpers.files import tree
from omegaconf import OmegaConf
from typer.testing import CliRunner

from dexrl.checkpoints.files.steps import resume_point, skipped
from dexrl.config.owned_keys import check_run_folder
from dexrl.errors import DexrlError
from dexrl.runs.layout import CONFIG_FILE, MARKER, checkpoints_dir
from dexrl.training.session import ResumeRequest, prepare_resume, start_resume

runner = CliRunner()


@pytest.fixture(scope="module")
def stopped_source(tiny_pi0_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3-step smoke-like run (base checkpoint inside it) with an incomplete global_step_1:
    RLinf's save of step 1 was interrupted, so the marker never came."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    root = tmp_path_factory.mktemp("made") / "runs" / "stopped"
    base = Path(shutil.copytree(tiny_pi0_dir, root / "smoke-checkpoint"))
    write_tiny_rlinf_run(root, base, step=1,
                         overrides=("runner.max_steps=3", "runner.max_epochs=3"))
    (checkpoints_dir(root) / "global_step_1" / MARKER).unlink()
    return root


@pytest.fixture
def stopped(stopped_source: Path, tmp_path: Path) -> Path:
    """A writable copy of :func:`stopped_source`."""
    return Path(shutil.copytree(stopped_source, tmp_path / "runs" / "stopped"))


@pytest.fixture
def bare(stopped: Path) -> Path:
    """A run stopped before RLinf saved anything: no checkpoints folder at all."""
    shutil.rmtree(checkpoints_dir(stopped))
    return stopped


def test_no_complete_checkpoint_and_no_step_gives_nothing_to_continue_from(
        stopped: Path) -> None:
    assert resume_point(stopped) is None
    assert skipped(stopped, restart=True) == [
        "note: global_step_1 is incomplete (interrupted save, no dexrl_complete.json); passed "
        "over, starting again from step 0"]
    with pytest.raises(DexrlError) as err:
        resume_point(stopped, 1)
    assert err.value.code == "checkpoint-incomplete"
    with pytest.raises(DexrlError) as err:
        resume_point(stopped, 2)
    assert err.value.code == "checkpoint-step-not-found"


def test_prepare_resume_starts_again_from_step_0_with_the_saved_config(
        bare: Path, stopped_source: Path) -> None:
    resumption = prepare_resume(ResumeRequest(bare, overrides=("runner.max_steps=2",)))
    assert resumption.checkpoint is None and resumption.from_step == 0
    assert resumption.total == 2 and resumption.dir == bare
    assert resumption.owned["runner.resume_dir"] is None
    assert resumption.new.runner.resume_dir is None
    assert resumption.new.actor.model.model_path == str(bare / "smoke-checkpoint")
    # the copy is a moved folder; no checkpoint, so no note on one
    assert resumption.notes == [f"note: the run folder was at {stopped_source}; its paths now "
                                f"point into {bare}"]


def test_start_resume_saves_the_config_and_the_launch_starts_at_step_0(bare: Path) -> None:
    ready = start_resume(prepare_resume(ResumeRequest(bare, overrides=("runner.max_steps=2",))))
    assert ready.resume_from is None and ready.total == 2 and ready.run_dir == bare
    check_run_folder(ready.cfg, bare, None)  # what the bridge's launch checks first
    saved = OmegaConf.load(bare / CONFIG_FILE)
    assert saved.runner.max_steps == 2 and saved.runner.resume_dir is None


def test_start_resume_refuses_while_a_live_dexrl_process_runs_the_folder(bare: Path) -> None:
    from dexrl.runs.state import Tracker

    Tracker(bare, 0)  # this process, recorded as running the folder
    with pytest.raises(DexrlError) as err:
        start_resume(prepare_resume(ResumeRequest(bare)))
    assert err.value.code == "run-in-use"


def test_dry_run_says_it_would_start_again_and_writes_nothing(stopped: Path) -> None:
    before = tree(stopped.parent)
    result = run("resume", stopped, "--dry-run")  # a killed driver's cut-short save: refused
    assert result.exit_code == 2, result.output
    assert ("1 checkpoint folder(s) would be written over or passed over: global_step_1 "
            "(interrupted save, no dexrl_complete.json) [resume-checkpoints-in-the-way]"
            ) in result.stderr
    result = run("resume", stopped, "--dry-run", "--move-aside")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (f"Would start {stopped} again from step 0: steps 1 to 3 of 3; it has no "
                        "complete checkpoint yet. Nothing was started or written.")
    assert ("note: --move-aside would move global_step_1 (interrupted save, no "
            f"dexrl_complete.json) into {stopped / 'set-aside'}/") in lines
    assert "runner.resume_dir" not in result.stdout  # None before and after: no change
    assert tree(stopped.parent) == before


def test_dry_run_applies_the_resume_rules_to_overrides(bare: Path) -> None:
    result = run("resume", bare, "--dry-run", "runner.max_steps=2")
    assert result.exit_code == 0, result.output
    assert f"Would start {bare} again from step 0: steps 1 to 2 of 2" in result.stdout
    assert "  runner.max_steps: 3 -> 2" in result.stdout
    result = run("resume", bare, "--dry-run", "actor.optim.lr=1e-3")
    assert result.exit_code == 2
    assert "[resume-unsafe-changes]" in result.stderr


def test_dry_run_names_the_killed_run_it_starts_again(bare: Path) -> None:
    from helpers.killed_run import write_killed_run

    write_killed_run(bare, 0)
    result = run("resume", bare, "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "Config changes: none"
    assert ("The last run of this folder was interrupted during step 1" in result.stdout
            and "it left no complete checkpoint." in result.stdout)


@pytest.mark.parametrize(("keep", "step", "code"), [
    (False, 1, "checkpoint-step-not-found"),
    (True, 1, "checkpoint-incomplete"),
    (True, 0, "checkpoint-step-not-found"),
])
def test_a_step_asked_for_keeps_its_errors(stopped: Path, keep: bool, step: int,
                                           code: str) -> None:
    if not keep:
        shutil.rmtree(checkpoints_dir(stopped))
    before = tree(stopped.parent)
    result = run("resume", stopped, "--step", step)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.stderr
    assert tree(stopped.parent) == before


def test_resume_starts_the_run_again_and_says_so(stopped: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    launched = []

    def fake_run(ready: object) -> int:
        launched.append(ready)
        return 0

    monkeypatch.setattr("dexrl.commands.resume.run", fake_run)
    result = run("resume", stopped)
    assert result.exit_code == 2 and not launched, result.output
    assert (stopped / "checkpoints" / "global_step_1").is_dir()
    result = run("resume", stopped, "--move-aside")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"Starting {stopped} again from step 0: it has no complete checkpoint yet"
    [aside] = (stopped / "set-aside").iterdir()
    assert ("note: moved global_step_1 (interrupted save, no dexrl_complete.json) "
            f"to {aside / 'global_step_1'}") in lines
    assert (aside / "global_step_1" / "actor").is_dir()  # moved whole, nothing deleted
    assert not (stopped / "checkpoints" / "global_step_1").exists()
    [ready] = launched
    assert ready.resume_from is None and ready.total == 3
    check_run_folder(ready.cfg, stopped, None)


@pytest.mark.parametrize("verb", ["export", "eval"])
def test_eval_and_export_keep_refusing_a_run_without_a_complete_checkpoint(
        stopped: Path, tmp_path: Path, verb: str) -> None:
    args = (["export", stopped, "--out", tmp_path / "out"] if verb == "export"
            else ["eval", "--ckpt", stopped, "--suite", "libero_spatial",
                  "--out", tmp_path / "out"])
    before = tree(stopped.parent)
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "[checkpoint-none-complete]" in result.stderr
    assert "no complete checkpoint to use (1 incomplete)" in result.stderr
    assert "global_step_1 is incomplete (interrupted save" in result.stderr
    assert tree(stopped.parent) == before and not (tmp_path / "out").exists()


def test_a_folder_that_is_not_a_run_keeps_its_error(bare: Path) -> None:
    (bare / CONFIG_FILE).unlink()
    result = run("resume", bare, "--dry-run")
    assert result.exit_code == 2
    assert "[run-no-config]" in result.stderr
