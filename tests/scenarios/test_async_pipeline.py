"""RLinf's async PPO through dexrl, end to end on the CPU: ``dexrl train --mode async`` on the
cued reach task, then ``dexrl resume`` one step further.

What it shows: the async runner and workers (dexrl's subclasses) train, the step lines carry the
data's staleness, checkpoints are marked complete, and a resumed run trains only on trajectories
of its own process (all at the resumed policy version). The learning itself is shown by the slow
test in tests/reach/test_async_learning.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.smoke import DEXRL, run_process
from omegaconf import OmegaConf

from dexrl.bridge.launch.driver import BANNER
from dexrl.checkpoints.files.steps import is_complete
from dexrl.curves import read_run
from tests.helpers.checkpoints import latest_checkpoint


@pytest.mark.slow
def test_async_run_trains_marks_and_resumes_on_fresh_trajectories(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    train = run_process([DEXRL, "train", "--suite", "reach_cued", "--model", "pi0", "--smoke",
                         "--mode", "async", "--run-dir", str(run_dir), "runner.max_steps=2",
                         "runner.save_interval=1"], run_dir)
    assert train.returncode == 0, train.stderr[-3000:]
    lines = train.stdout.splitlines()
    assert lines[0] == BANNER
    steps = [line for line in lines if line.startswith("step ")]
    assert [s.split()[1] for s in steps] == ["1/2", "2/2"], train.stdout
    assert all(" behind " in s and " dropped " in s for s in steps), steps
    assert "waiting=" in steps[-1] and "training=" in steps[-1]
    saved = OmegaConf.load(run_dir / "config.yaml")
    assert saved.runner.mode == "async"
    assert saved.algorithm.loss_type == "decoupled_actor_critic"
    assert "DexrlAsyncActor" in (run_dir / "logs" / "driver.log").read_text()
    for step in (1, 2):
        assert is_complete(run_dir / "checkpoints" / f"global_step_{step}")

    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=3"], run_dir)
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert "starting at step 3 of 3" in resume.stdout
    last = latest_checkpoint(run_dir)
    assert last.name == "global_step_3" and is_complete(last)
    # Step 3 trains at policy version 2, which only the resumed process's rollouts carry: a
    # trajectory left over from the first process would be a version behind (or older).
    series = read_run(run_dir).series
    steps_logged, ratios = series["rollout/data_staleness_0/ratio"]
    assert dict(zip(steps_logged, ratios, strict=True))[3] == pytest.approx(1.0)


@pytest.mark.slow
def test_pipeline_run_trains_marks_and_resumes(tmp_path: Path) -> None:
    """``--mode pipeline``: RLinf's training pipeline with dexrl's pipeline actor, its checkpoints
    marked (the actor hooks read the pipeline's nested metrics) and resumed."""
    run_dir = tmp_path / "run"
    train = run_process([DEXRL, "train", "--suite", "reach_cued", "--model", "pi0", "--smoke",
                         "--mode", "pipeline", "--run-dir", str(run_dir), "runner.max_steps=2",
                         "runner.save_interval=1"], run_dir)
    assert train.returncode == 0, train.stderr[-3000:]
    assert [line.split()[1] for line in train.stdout.splitlines()
            if line.startswith("step ")] == ["1/2", "2/2"], train.stdout
    assert OmegaConf.load(run_dir / "config.yaml").runner.use_training_pipeline is True
    assert "DexrlPipelineActor" in (run_dir / "logs" / "driver.log").read_text()
    for step in (1, 2):
        assert is_complete(run_dir / "checkpoints" / f"global_step_{step}")
    updates = read_run(run_dir).series["train/actor/updates"][1]
    assert updates and all(u > 0 for u in updates)
    resume = run_process([DEXRL, "resume", str(run_dir), "runner.max_steps=3"], run_dir)
    assert resume.returncode == 0, resume.stderr[-3000:]
    assert is_complete(latest_checkpoint(run_dir)) and latest_checkpoint(run_dir).name == (
        "global_step_3")
