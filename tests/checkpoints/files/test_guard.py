"""Before a run folder's checkpoint is used or written past: damage refused (naming the file,
the last good step and the command), the folders in a resume's way refused or moved aside."""

from __future__ import annotations

from pathlib import Path

import pytest

from dexrl.checkpoints.files.guard import (
    check_intact,
    check_resume,
    move_aside,
    set_aside_unfinished,
    verify_run,
)
from dexrl.checkpoints.files.steps import checkpoint_at, list_checkpoints, mark_complete
from dexrl.errors import DexrlError
from dexrl.runs.layout import MARKER, SET_ASIDE, step_dir

WEIGHTS = "actor/full_weights.pt"


def _run(tmp_path: Path, marked: tuple[int, ...], unmarked: tuple[int, ...] = ()) -> Path:
    run = tmp_path / "run"
    for step in (*marked, *unmarked):
        folder = step_dir(run, step)
        (folder / "actor").mkdir(parents=True)
        (folder / WEIGHTS).write_bytes(bytes([step]) * 4096)
        if step in marked:
            mark_complete(folder, step)
    return run


def _use(good: object) -> str:
    return f"dexrl resume RUN --step {good.step}"  # type: ignore[attr-defined]


def test_truncated_weights_are_refused_naming_the_file_the_last_good_step_and_the_command(
        tmp_path: Path) -> None:
    run = _run(tmp_path, (2, 4))
    assert check_intact(run, checkpoint_at(step_dir(run, 4)), _use) == []  # the control
    with open(step_dir(run, 4) / WEIGHTS, "r+b") as f:
        f.truncate(100)
    with pytest.raises(DexrlError) as err:
        check_intact(run, checkpoint_at(step_dir(run, 4)), _use)
    assert err.value.code == "checkpoint-damaged"
    assert err.value.message == (f"checkpoint global_step_4 is damaged: {WEIGHTS} is 100 bytes; "
                                 "the marker recorded 4096")
    assert err.value.where == str(step_dir(run, 4) / WEIGHTS)
    assert err.value.hint == ("the last good checkpoint is global_step_2: "
                              "`dexrl resume RUN --step 2`")


def test_an_earlier_damaged_step_is_not_offered_as_the_last_good_one(tmp_path: Path) -> None:
    run = _run(tmp_path, (2, 4))
    for step in (2, 4):
        (step_dir(run, step) / WEIGHTS).unlink()
    with pytest.raises(DexrlError) as err:
        check_intact(run, checkpoint_at(step_dir(run, 4)), _use)
    assert f"{WEIGHTS} is missing" in err.value.message
    assert err.value.hint.startswith("no earlier checkpoint of this run is good")


def test_an_old_marker_is_accepted_with_a_note_that_nothing_was_checked(tmp_path: Path) -> None:
    run = _run(tmp_path, (2,))
    (step_dir(run, 2) / MARKER).write_text('{"step": 2, "written": "2026-11-20T10:00:00"}')
    (step_dir(run, 2) / WEIGHTS).write_bytes(b"short")
    assert check_intact(run, checkpoint_at(step_dir(run, 2)), _use) == [
        "note: global_step_2's completion marker predates file lists: its files were not "
        "checked"]


def test_checkpoint_folders_a_resume_would_pass_over_or_write_over_are_refused(
        tmp_path: Path) -> None:
    run = _run(tmp_path, (2, 4), unmarked=(6,))
    with pytest.raises(DexrlError) as err:  # the latest complete: only the cut-short save
        check_resume(run, checkpoint_at(step_dir(run, 4)), move=False)
    assert err.value.code == "resume-checkpoints-in-the-way"
    assert err.value.message == ("1 checkpoint folder(s) would be written over or passed over: "
                                 "global_step_6 (interrupted save, no dexrl_complete.json)")
    assert "--move-aside" in err.value.hint and "resumes from global_step_4" in err.value.hint
    with pytest.raises(DexrlError) as err:  # --step 2: a complete later step is in the way too
        check_resume(run, checkpoint_at(step_dir(run, 2)), move=False)
    assert "global_step_4 (complete, after the chosen step), global_step_6" in err.value.message
    notes, found = check_resume(run, checkpoint_at(step_dir(run, 2)), move=True)
    assert notes == [] and [c.step for c in found] == [4, 6]
    assert [c.step for c in list_checkpoints(run)] == [2, 4, 6]  # checking moves nothing


def test_moving_aside_renames_whole_folders_and_deletes_nothing(tmp_path: Path) -> None:
    run = _run(tmp_path, (2,), unmarked=(4,))
    [(c, moved)] = move_aside(run, [checkpoint_at(step_dir(run, 4))])
    assert c.step == 4 and moved.parent.parent == run / SET_ASIDE
    assert (moved / WEIGHTS).read_bytes() == bytes([4]) * 4096
    assert [c.step for c in list_checkpoints(run)] == [2]
    again = move_aside(run, [checkpoint_at(step_dir(run, 2))])  # a second move, its own folder
    assert again[0][1].parent != moved.parent


def test_a_launch_that_ends_alive_moves_its_own_unmarked_saves_aside(tmp_path: Path) -> None:
    run = _run(tmp_path, (2, 4), unmarked=(6,))
    notes = set_aside_unfinished(run, 2)
    assert len(notes) == 1 and notes[0].startswith(
        "note: global_step_6 was left without a completion marker (interrupted save")
    assert [c.step for c in list_checkpoints(run)] == [2, 4]  # complete ones stay
    assert check_resume(run, checkpoint_at(step_dir(run, 4)), move=False) == ([], [])


def test_verify_names_each_step_s_state(tmp_path: Path) -> None:
    run = _run(tmp_path, (2, 4, 6), unmarked=(8,))
    (step_dir(run, 4) / MARKER).write_text('{"step": 4, "written": "2026-11-20T10:00:00"}')
    weights = step_dir(run, 6) / WEIGHTS
    weights.write_bytes(b"\x00" + weights.read_bytes()[1:])
    verdicts = verify_run(run)
    assert [(v.checkpoint.step, v.status) for v in verdicts] == [
        (2, "ok"), (4, "unlisted"), (6, "damaged"), (8, "incomplete")]
    assert verdicts[2].detail.startswith(f"{WEIGHTS} has xxh3_64")
    assert verify_run(run, checksums=False)[2].status == "ok"  # sizes alone cannot see it


def test_a_move_that_fails_at_the_end_of_a_launch_is_a_note_not_a_new_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path, (2,), unmarked=(4,))

    def refuse(src: object, dst: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("dexrl.checkpoints.files.guard.os.rename", refuse)
    assert set_aside_unfinished(run, 0) == [
        f"note: could not move global_step_4 aside (Permission denied); `dexrl resume {run} "
        "--move-aside` will"]
    assert [c.step for c in list_checkpoints(run)] == [2, 4]
