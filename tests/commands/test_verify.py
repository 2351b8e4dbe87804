"""`dexrl verify RUN_DIR`: every checkpoint of a run checked against its marker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers.cli import run

from dexrl.runs.layout import MARKER, WEIGHTS_IN_STEP, step_dir


def _two_steps(tiny_run: Path, tmp_path: Path) -> Path:
    """The tiny run with a second complete step (4) copied from its step 2."""
    from dexrl.checkpoints.files.steps import mark_complete

    copy = Path(shutil.copytree(tiny_run, tmp_path / "run"))
    shutil.copytree(step_dir(copy, 2), step_dir(copy, 4))
    mark_complete(step_dir(copy, 4), 4)
    return copy


def test_a_sound_run_is_ok_and_says_how_to_go_on(tiny_run: Path, tmp_path: Path) -> None:
    copy = _two_steps(tiny_run, tmp_path)
    result = run("verify", copy)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"{copy}: 2 checkpoint folder(s)"
    assert lines[1].split()[:2] == ["global_step_2", "ok"]
    assert "sizes and xxh3_64 checksums match" in lines[2]
    assert lines[-1] == f"Last good checkpoint: global_step_4; `dexrl resume {copy}` continues " \
                        "from it."


def test_a_damaged_step_exits_1_naming_the_file_and_the_command(tiny_run: Path,
                                                               tmp_path: Path) -> None:
    copy = _two_steps(tiny_run, tmp_path)
    with open(step_dir(copy, 4) / WEIGHTS_IN_STEP, "r+b") as f:
        f.seek(1000)
        f.write(b"\xff\xfe")
    (step_dir(copy, 2) / MARKER).unlink()
    result = run("verify", copy, "--sizes-only")
    assert result.exit_code == 1  # step 2's marker is gone; sizes cannot see step 4's damage
    assert "global_step_4  ok" in result.stdout
    result = run("verify", copy, "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["schema"] == "dexrl.verify/1" and doc["last_good"] is None
    assert [(c["step"], c["status"]) for c in doc["checkpoints"]] == [(2, "incomplete"),
                                                                      (4, "damaged")]
    assert doc["checkpoints"][1]["detail"].startswith(f"{WEIGHTS_IN_STEP.as_posix()} has xxh3_64")


def test_not_a_folder_is_one_coded_error(tmp_path: Path) -> None:
    result = run("verify", tmp_path / "nothing")
    assert result.exit_code == 2 and "[verify-not-a-run-folder]" in result.stderr
