"""End to end on the CPU: real RLinf, real Ray, a real LIBERO env.

Each run is a subprocess, as under ``dexrl train``: one launch per process. The default run keeps
one test, through the real CLI (``dexrl train --smoke``); the same run followed by ``dexrl resume``
of the moved folder to step 2 is ``slow`` (a second Ray launch, 2.5 more minutes); the
supervision tests (worker failure, stall, Ctrl-C) drive ``dexrl.bridge.launch.driver`` through
``tests/helpers/smoke_run.py`` and are ``slow``.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from helpers.smoke import DEXRL, Run, run_process, session_leftovers, smoke
from omegaconf import OmegaConf

from dexrl.bridge.launch.driver import BANNER
from dexrl.checkpoints.files.steps import is_complete
from tests.helpers.checkpoints import latest_checkpoint

# Peak proportional set size (shared pages split between processes) of the run's whole process
# tree; measured ~7 GiB. The machine has 24 GiB, shared with other work.
PEAK_PSS_LIMIT = 10 * 2**30


@pytest.mark.spawns
def test_cli_smoke_trains_one_step(tmp_path: Path) -> None:
    _train_one_step(tmp_path / "run")


def _train_one_step(run_dir: Path) -> tuple[Run, Path]:
    """``dexrl train --smoke`` into ``run_dir``, checked; returns its process result and its
    complete checkpoint."""
    train = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                         "--run-dir", str(run_dir)], run_dir)
    assert train.returncode == 0, train.stderr[-3000:]
    lines = train.stdout.splitlines()
    assert lines[0] == BANNER
    assert any(line.startswith("workers ready after") for line in lines)
    assert any(line.startswith("step 1/1 ") for line in lines)
    # RLinf's, the workers' and third-party output went to the log, not the terminal.
    assert not any("INFO" in line or "pid=" in line for line in lines)
    for noise in ("No private macro file", "Gym has been unmaintained", "Warning"):
        assert noise not in train.stdout + train.stderr, train.stderr[-3000:]
    log = (run_dir / "logs" / "driver.log").read_text()
    assert "RLinf is running on a cluster with 1 node" in log
    first = latest_checkpoint(run_dir)
    assert first.name == "global_step_1" and is_complete(first)
    assert (first / "actor" / "model_state_dict" / "full_weights.pt").is_file()
    for name in ("config.yaml", "manifest.json", "smoke-checkpoint/config.json"):
        assert (run_dir / name).is_file(), name
    assert (run_dir / "tensorboard").is_dir()
    assert f"  curves {run_dir / 'curves.png'}" in lines  # redrawn at the checkpoint
    assert (run_dir / "curves.png").stat().st_size > 0
    assert train.peak_pss < PEAK_PSS_LIMIT, f"peak PSS {train.peak_pss / 2**30:.1f} GiB"
    saved = OmegaConf.load(run_dir / "config.yaml")  # the run-folder fields, set before launch
    assert saved.runner.logger.log_path == str(run_dir) and saved.runner.resume_dir is None
    assert saved.actor.model.model_path == str(run_dir / "smoke-checkpoint")
    return train, first


@pytest.mark.slow
def test_cli_smoke_trains_one_step_then_resumes_at_the_next(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train, first = _train_one_step(run_dir)
    # The folder is moved and resumed from another directory: its paths follow it.
    moved = tmp_path / "mounted" / "run"
    moved.parent.mkdir()
    shutil.move(run_dir, moved)
    (tmp_path / "cwd").mkdir()
    resume = run_process([DEXRL, "resume", f"{moved}/", "runner.max_steps=2"], moved,
                         cwd=tmp_path / "cwd")
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert f"note: the run folder was at {run_dir}" in resume.stdout
    assert "starting at step 2 of 2" in resume.stdout
    assert "step 2/2 " in resume.stdout and "step 1/" not in resume.stdout
    assert (f"Resuming training from checkpoint directory {moved / first.relative_to(run_dir)}"
            in (moved / "logs" / "driver.log").read_text())
    assert latest_checkpoint(moved).name == "global_step_2"
    assert OmegaConf.load(moved / "config.yaml").actor.model.model_path == str(
        moved / "smoke-checkpoint")
    assert list((tmp_path / "cwd").iterdir()) == []
    print(f"\ntrain {train.seconds:.0f} s, resume {resume.seconds:.0f} s, "
          f"peak PSS {max(train.peak_pss, resume.peak_pss) / 2**30:.1f} GiB")


TINY = ("actor.model.model_type=dexrl_tiny",)
TINY_ENV = {"DEXRL_SMOKE_EXT": "dexrl_tiny_ext"}


@pytest.mark.slow
def test_a_worker_exception_surfaces_with_its_cause(tmp_path: Path) -> None:
    run = smoke(tmp_path / "run", "train", *TINY, env={**TINY_ENV, "DEXRL_TINY_FAIL": "train"},
                watch_log="Exception occurred while running DexrlActor's function run_training")
    assert run.returncode == 2
    assert run.seen_in_log_s is not None and run.seconds - run.seen_in_log_s < 60
    assert "RLinf worker DexrlActor.run_training failed during step 1" in run.stderr
    assert "dexrl_tiny was told to fail in training" in run.stderr
    with pytest.raises(Exception, match="no complete checkpoint"):
        latest_checkpoint(tmp_path / "run")


@pytest.mark.slow
def test_an_out_of_memory_worker_is_named_with_the_settings_that_cut_it(tmp_path: Path) -> None:
    run = smoke(tmp_path / "run", "train", *TINY, env={**TINY_ENV, "DEXRL_TINY_FAIL": "oom"},
                watch_log="Exception occurred while running DexrlActor's function run_training")
    assert run.returncode == 2
    assert "[training-out-of-memory]" in run.stderr
    assert "the actor worker group ran out of GPU memory during step 1" in run.stderr
    assert "actor.micro_batch_size" in run.stderr


@pytest.mark.slow
def test_a_stalled_worker_group_is_named_and_the_run_stops(tmp_path: Path) -> None:
    run = smoke(tmp_path / "run", "train", *TINY,
                env={**TINY_ENV, "DEXRL_TINY_FAIL": "hang", "DEXRL_SMOKE_STALL_S": "90"})
    assert run.returncode == 2
    assert "no progress for 90 s during step 1: RLinf is waiting on" in run.stderr
    assert "RolloutGroup.generate" in run.stderr


@pytest.mark.slow
def test_ctrl_c_stops_everything_and_leaves_the_run_resumable(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run = smoke(run_dir, "train", *TINY, "runner.max_steps=3", "runner.max_epochs=3",
                env=TINY_ENV, interrupt_after="checkpoints/global_step_1")
    assert run.returncode == 130, run.stderr[-3000:]
    assert "Interrupted; stopping workers" in run.stdout
    # Ray and every worker are gone. Ray's own processes (gcs_server, the dashboard's) exit some
    # seconds after the driver's ray.shutdown(): about 2 s here, more on a loaded machine.
    deadline = time.monotonic() + 15
    while session_leftovers(run.session) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert session_leftovers(run.session) == []
    assert latest_checkpoint(run_dir).name == "global_step_1"
