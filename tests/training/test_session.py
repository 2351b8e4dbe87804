"""The training session: its one rule for GPUs per node, and what ``train``/``resume`` add to a
run's failure (the plan's figures for a full disk and an out-of-memory worker, the way forward
after an interruption)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from dexrl.bridge.launch.spec import LaunchOptions, LaunchSpec
from dexrl.checkpoints.files.steps import mark_complete
from dexrl.config.compose import compose
from dexrl.errors import DexrlError, disk_full_error
from dexrl.runs.state import Tracker
from dexrl.training.session import gpus_per_node, interrupted_note, run, with_plan_facts


def _ready(tiny_pi0_dir: Path, run_dir: Path) -> LaunchSpec:
    cfg = compose("reach_ppo_dexbotic_pi0")
    OmegaConf.update(cfg, "actor.model.model_path", str(tiny_pi0_dir))
    return LaunchSpec(cfg, run_dir, True, None, 20, LaunchOptions(), gpus_per_node=1)


def test_a_full_disk_names_the_size_of_a_checkpoint(tiny_pi0_dir: Path, tmp_path: Path) -> None:
    error = with_plan_facts(disk_full_error(tmp_path / "checkpoints"),
                            _ready(tiny_pi0_dir, tmp_path))
    assert error.code == "disk-full"
    assert "each checkpoint needs about" in error.message
    assert str(tmp_path / "checkpoints") in error.message


def test_out_of_memory_names_the_plan_estimate_of_the_group(tiny_pi0_dir: Path,
                                                            tmp_path: Path) -> None:
    oom = DexrlError("the actor worker group ran out of GPU memory during step 3", "lower it",
                     where="worker group actor", code="training-out-of-memory")
    error = with_plan_facts(oom, _ready(tiny_pi0_dir, tmp_path))
    assert error is oom and "; the plan estimated about " in error.message
    assert "on each GPU the actor group uses" in error.message
    assert error.hint == "lower it" and error.where == "worker group actor"
    other = DexrlError("x", "y", code="training-stalled")
    assert with_plan_facts(other, _ready(tiny_pi0_dir, tmp_path)) is other


def test_the_interrupted_note_says_how_to_go_on(tmp_path: Path) -> None:
    Tracker(tmp_path, 0).step_done(2)
    assert "before its first complete checkpoint" in interrupted_note(tmp_path)
    assert "starts it again from step 0" in interrupted_note(tmp_path)
    step = tmp_path / "checkpoints" / "global_step_2"
    (step / "actor").mkdir(parents=True)
    mark_complete(step, 2)
    assert interrupted_note(tmp_path) == (
        f"Interrupted after step 2; the run is resumable: `dexrl resume {tmp_path}` continues "
        "from global_step_2.")


def test_the_flag_wins_then_smoke_then_this_node_then_eight() -> None:
    assert gpus_per_node(smoke=False, visible=8, asked=4) == 4
    assert gpus_per_node(smoke=True, visible=0) == 1
    assert gpus_per_node(smoke=False, visible=2) == 2
    assert gpus_per_node(smoke=False, visible=0) == 8


@pytest.mark.parametrize("ending", ["interrupted", "failed"])
def test_a_launch_that_ends_alive_moves_its_cut_short_save_aside(
        tiny_pi0_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], ending: str) -> None:
    """Ctrl-C during a save: dexrl's own stop knows the save was cut short, so the next resume
    needs no flag; the complete step stays."""
    from dexrl.checkpoints.files.steps import list_checkpoints

    def launch(spec: LaunchSpec, on_progress: object = None) -> int:
        for step in (2, 4):
            (spec.run_dir / "checkpoints" / f"global_step_{step}" / "actor").mkdir(parents=True)
        mark_complete(spec.run_dir / "checkpoints" / "global_step_2", 2)
        if ending == "failed":
            raise DexrlError("a worker died", "resume", code="training-worker-failed")
        return 130

    monkeypatch.setattr("dexrl.bridge.launch.driver.launch", launch)
    monkeypatch.setattr("dexrl.training.progress.ProgressPrinter.curves", lambda self: None)
    if ending == "failed":
        with pytest.raises(DexrlError) as err:
            run(_ready(tiny_pi0_dir, tmp_path))
        notes = err.value.details
    else:
        assert run(_ready(tiny_pi0_dir, tmp_path)) == 130
        notes = capsys.readouterr().out.splitlines()
    assert [c.step for c in list_checkpoints(tmp_path)] == [2]
    [aside] = (tmp_path / "set-aside").iterdir()
    assert (aside / "global_step_4" / "actor").is_dir()
    assert any(line.startswith("note: global_step_4 was left without a completion marker "
                               "(interrupted save") for line in notes)


def test_out_of_memory_names_the_phase_and_the_plan_to_try(tiny_pi0_dir: Path,
                                                           tmp_path: Path) -> None:
    spec = _ready(tiny_pi0_dir, tmp_path)
    OmegaConf.update(spec.cfg, "runner.memory_plan", "48gb", force_add=True)
    spec = LaunchSpec(spec.cfg, tmp_path, True, None, 20, LaunchOptions(), gpus_per_node=1)
    oom = DexrlError("the rollout worker group ran out of GPU memory during step 2", "lower it",
                     where="worker group rollout", code="training-out-of-memory")
    error = with_plan_facts(oom, spec)
    assert ("it failed in the rollout (the policy's calls) under the 48gb memory plan: try the "
            "24gb plan") in error.message
    assert "24gb plan" in error.message and "--memory-plan 24gb --dry-run" in error.message
    # the control: a run without a plan is pointed at the smallest plan's settings
    bare = with_plan_facts(DexrlError("the actor worker group ran out of GPU memory", "lower it",
                                      where="worker group actor",
                                      code="training-out-of-memory"),
                           _ready(tiny_pi0_dir, tmp_path))
    assert "it failed in training" in bare.message and "had no memory plan" in bare.message
