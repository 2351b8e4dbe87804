"""End to end on the CPU: a run interrupted before its first checkpoint starts again from step 0.

Through the real CLI, as tests/scenarios/test_smoke.py: ``dexrl train --smoke`` for two
steps, a checkpoint only at the end, interrupted (Ctrl-C) during step 2; then ``dexrl resume``
of the folder, which has no complete checkpoint, trains it again from step 1 in the same folder.
The checks without RLinf are in tests/commands/test_resume.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.smoke import DEXRL, run_process
from omegaconf import OmegaConf

from dexrl.checkpoints.files.steps import is_complete, list_checkpoints
from dexrl.runs.state import read
from tests.helpers.checkpoints import latest_checkpoint


@pytest.mark.slow
def test_an_interrupted_run_without_a_checkpoint_starts_again(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train = run_process([DEXRL, "train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                         "--run-dir", str(run_dir), "runner.max_steps=2",
                         "runner.save_interval=2"], run_dir, interrupt_after="step 1/2 ")
    assert train.returncode == 130, train.stderr[-3000:]
    assert [c for c in list_checkpoints(run_dir) if c.complete] == []
    assert read(run_dir)["status"] == "interrupted"

    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=1"], run_dir)
    assert resume.returncode == 0, resume.stderr[-3000:]
    lines = resume.stdout.splitlines()
    assert lines[0] == f"Starting {run_dir} again from step 0: it has no complete checkpoint yet"
    assert "starting at step 1 of 1" in resume.stdout and "step 1/1 " in resume.stdout
    first = latest_checkpoint(run_dir)
    assert first.name == "global_step_1" and is_complete(first)
    saved = OmegaConf.load(run_dir / "config.yaml")
    assert saved.runner.max_steps == 1 and saved.runner.resume_dir is None
    assert read(run_dir)["status"] == "finished"
    print(f"\ntrain {train.seconds:.0f} s, restart {resume.seconds:.0f} s")
