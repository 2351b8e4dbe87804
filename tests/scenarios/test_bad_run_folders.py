"""Bad run folders through the real CLI: completion markers that do not vouch for their
checkpoint, a garbage ``run-state.json``, a process killed between the steps of a durable write,
and overrides ``train`` refuses that ``validate`` must report.

The run folders are built as ``dexrl train`` leaves them (``rlinf_run``); no RLinf
launch is needed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.cli import run
from helpers.files import tree
from typer.testing import CliRunner

from dexrl.config.owned_keys import OWNED_KEYS
from dexrl.runs.layout import MARKER, checkpoints_dir
from dexrl.runs.state import STATE_FILE, begin, load
from tests.helpers.checkpoints import latest_checkpoint

runner = CliRunner()


@pytest.fixture
def two_steps(tiny_pi0_dir: Path, tmp_path: Path) -> Path:
    """A run with a complete global_step_1 and a global_step_2 whose weights are all there."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    base = Path(shutil.copytree(tiny_pi0_dir, tmp_path / "run" / "smoke-checkpoint"))
    run_dir = write_tiny_rlinf_run(tmp_path / "run", base, step=1,
                                   overrides=("runner.max_steps=5", "runner.max_epochs=5"))
    first = checkpoints_dir(run_dir) / "global_step_1"
    second = Path(shutil.copytree(first, first.with_name("global_step_2")))
    (second / MARKER).unlink()
    return run_dir


STEP_2_MARKERS = [
    ("", "dexrl_complete.json is empty"),
    ('{"step": 2, "wri', "dexrl_complete.json is not valid JSON"),  # torn write
    ("\x00\x00\x00\x00", "dexrl_complete.json is not valid JSON"),  # power loss, no fsync
    ("[2]", "dexrl_complete.json lacks its fields"),
    ('{"step": 2}', "dexrl_complete.json lacks its fields"),
    ('{"step": "2", "written": "2026-11-24T10:00:00"}', "dexrl_complete.json lacks its fields"),
    ('{"step": 1, "written": "2026-11-24T10:00:00"}', "dexrl_complete.json names step 1, not 2"),
    ('{"step": 2, "written": "2026-11-24T10:00:00", "hash": "xxh3_64", "files": []}',
     "dexrl_complete.json is malformed: its file list is not an object"),
    ('{"step": 2, "written": "2026-11-24T10:00:00", "hash": "md5", "files": {}}',
     "dexrl_complete.json is malformed: its checksums are 'md5'"),
]


@pytest.mark.parametrize(("marker", "why"), STEP_2_MARKERS)
def test_a_marker_that_does_not_vouch_leaves_its_step_incomplete(
        two_steps: Path, marker: str, why: str) -> None:
    step_2 = checkpoints_dir(two_steps) / "global_step_2"
    (step_2 / MARKER).write_text(marker)
    assert latest_checkpoint(two_steps).name == "global_step_1"

    before = tree(two_steps.parent)
    result = run("resume", two_steps, "--dry-run")  # never passed over silently
    assert result.exit_code == 2, result.output
    assert "[resume-checkpoints-in-the-way]" in result.stderr
    assert f"would be written over or passed over: global_step_2 ({why}" in result.stderr
    assert "--move-aside" in result.stderr and "nothing is deleted" in result.stderr
    result = run("resume", two_steps, "--dry-run", "--move-aside")
    assert result.exit_code == 0, result.output
    assert f"Would resume {two_steps} from global_step_1:" in result.stdout
    assert f"note: --move-aside would move global_step_2 ({why}" in result.stdout
    assert tree(two_steps.parent) == before


    result = run("eval", "--ckpt", step_2, "--suite", "libero_spatial")
    assert result.exit_code == 2, result.output
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert f"the checkpoint at step 2 is incomplete ({why}" in error
    assert "hint: use a complete step (1)" in result.stderr
    assert "Traceback" not in result.output
    assert tree(two_steps.parent) == before


def test_train_names_the_last_truly_complete_checkpoint_of_a_killed_run(
        two_steps: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.killed_run import write_killed_run

    (checkpoints_dir(two_steps) / "global_step_2" / MARKER).write_text("garbage")
    write_killed_run(two_steps, 2)
    monkeypatch.chdir(tmp_path)
    result = run("train", "--suite", "libero_spatial", "--model", "pi0", "--smoke",
                 "--run-dir", two_steps)
    assert result.exit_code == 2
    assert "the last complete checkpoint is global_step_1" in result.stderr
    assert ("global_step_2 is incomplete (dexrl_complete.json is not valid JSON)"
            in result.stderr)


def test_no_complete_checkpoint_says_why_each_is_incomplete(two_steps: Path,
                                                            tmp_path: Path) -> None:
    (checkpoints_dir(two_steps) / "global_step_1" / MARKER).write_text("{}")
    result = run("export", two_steps, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "no complete checkpoint to use (2 incomplete)" in result.stderr
    assert "global_step_1 is incomplete (dexrl_complete.json lacks its fields" in result.stderr
    assert "global_step_2 is incomplete (interrupted save, no dexrl_complete.json)" in (
        result.stderr)
    # resume does not start such a run again from step 0 over them, unless told to move them
    result = run("resume", two_steps, "--dry-run")
    assert result.exit_code == 2, result.output
    assert ("2 checkpoint folder(s) would be written over or passed over: global_step_1 "
            "(dexrl_complete.json lacks its fields") in result.stderr
    assert "and starts the run again from step 0" in result.stderr
    result = run("resume", two_steps, "--dry-run", "--move-aside")
    assert result.exit_code == 0, result.output
    assert f"Would start {two_steps} again from step 0: steps 1 to 5 of 5" in result.stdout
    assert ("--move-aside would move global_step_1 (dexrl_complete.json lacks its fields (an "
            "integer step and a written time))") in result.stdout


# A process killed between the steps of mark_complete -----------------------------------------

KILLER = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from dexrl.runs import durable
    from dexrl.checkpoints.files.steps import mark_complete
    from tests.helpers.checkpoints import latest_checkpoint
    from dexrl.runs.layout import MARKER, checkpoints_dir
    from dexrl.config.owned_keys import OWNED_KEYS

    point, checkpoint = sys.argv[1], Path(sys.argv[2])
    real_replace, real_sync_dir = os.replace, durable.sync_dir

    def die():
        os.kill(os.getpid(), signal.SIGKILL)

    def replace(src, dst):
        if point == "before rename":
            die()
        real_replace(src, dst)
        if point == "after rename":
            die()

    def sync_file(path):
        if point == "while syncing the checkpoint":
            die()

    durable.os.replace = replace
    if point == "while syncing the checkpoint":
        durable.sync_file = sync_file
    mark_complete(checkpoint, 2)
""")


@pytest.mark.spawns
@pytest.mark.parametrize(("point", "picked"), [("while syncing the checkpoint", 1),
                                               ("before rename", 1), ("after rename", 2),
                                               ("never", 2)])
def test_a_process_killed_while_marking_never_leaves_an_incomplete_step_picked(
        two_steps: Path, point: str, picked: int) -> None:
    step_2 = checkpoints_dir(two_steps) / "global_step_2"
    done = subprocess.run([sys.executable, "-c", KILLER, point, str(step_2)], check=False)
    assert done.returncode == (0 if point == "never" else -9)
    assert latest_checkpoint(two_steps).name == f"global_step_{picked}"
    result = run("resume", two_steps, "--dry-run", "--move-aside")
    assert f"from global_step_{picked}:" in result.stdout, result.output
    assert ("would move global_step_2" in result.stdout) == (picked == 1)
    # What a killed writer can leave is hidden and never read as the marker.
    assert {p.name for p in step_2.iterdir()} - {"actor", MARKER} <= {
        p.name for p in step_2.glob(".dexrl_complete.*.tmp.json")}
    if picked == 1:
        result = run("eval", "--ckpt", step_2, "--suite", "libero_spatial")
        assert result.exit_code == 2 and "the checkpoint at step 2 is incomplete" in (
            result.stderr)


# run-state.json --------------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "why"), [
    ("", "empty"),
    ('{"status": "runn', "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"status": "running", "step": 1, "pid": "x", "host": "h"}',
     "step, pid or host is missing or mistyped"),
    ('{"status": "done", "step": 1, "pid": 5, "host": "h"}', "status 'done' is not one of"),
    ('{"status": "running", "step": 1, "pid": 5, "host": "h", "ray_processes": [["a"]]}',
     "pid_start or ray_processes is malformed"),
])
def test_a_garbage_run_state_is_named_and_what_dexrl_assumes_is_said(
        two_steps: Path, content: str, why: str) -> None:
    state = two_steps / STATE_FILE
    state.write_text(content)
    result = run("resume", two_steps, "--dry-run", "--move-aside")
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if STATE_FILE in line)
    assert line.startswith(f"{state} is unusable ({why}")
    assert "dexrl assumes the last run of this folder ended" in line
    assert f"Would resume {two_steps} from global_step_1:" in result.stdout

    tracker = begin(two_steps, 2)  # the next launch replaces it with its own record
    assert load(two_steps) == (tracker.data, None)


# validate reports what train refuses --------------------------------------------------------

SPATIAL = ["--suite", "libero_spatial", "--model", "pi0"]


@pytest.mark.parametrize("override", [*(f"{key}=/tmp/x" for key in OWNED_KEYS),
                                      "+runner.logger.log_path=/tmp/x"])
def test_validate_reports_an_owned_field_as_an_error(override: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    key = override.partition("=")[0].lstrip("+")
    result = run("validate", *SPATIAL, override)
    assert result.exit_code == 2, result.output
    assert f"error: overrides: {key} is set by dexrl: {OWNED_KEYS[key]}" in result.stderr
    assert f"hint: drop the override {override!r}" in result.stderr
    assert "has problems (1 error(s)" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("overrides", [
    ["runner.logger.log_path=/tmp/x"], ["runner.logger.experiment_name=e"],
    ["runner.resume_dir=/x"], ["runner.max_steps=${nope}"], ["env.train.total_num_envs=63"],
    ["runner.save_interval=3", "runner.val_check_interval=2"], ["runner.max_steps=2"],
])
def test_validate_fails_exactly_when_train_refuses(overrides: list[str], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    checked = run("validate", *SPATIAL, "--gpus-per-node", "1", *overrides)
    planned = run("train", *SPATIAL, "--gpus-per-node", "1", "--dry-run", *overrides)
    assert (checked.exit_code == 2) == (planned.exit_code == 2), (checked.output,
                                                                  planned.output)
    assert checked.exit_code in (0, 2) and planned.exit_code in (0, 2)
    if planned.exit_code == 2:
        assert "[config-invalid]" in planned.stderr
