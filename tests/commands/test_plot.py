"""`dexrl plot` and the curves `train` redraws, on TensorBoard events written by a real run.

tests/fixtures/smoke_run/tensorboard holds the event file of a real two-step
`dexrl train --suite libero_spatial --model pi0 --smoke runner.max_steps=2` (RLinf's own writer).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from dexrl.cli import app
from dexrl.curves import PANELS, TIME_SPLIT, read_run
from dexrl.training.progress import ProgressPrinter

FIXTURE = Path(__file__).parent.parent / "fixtures" / "smoke_run"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
runner = CliRunner()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "smoke_run"))


def test_read_run_gives_rlinf_metrics_per_global_step() -> None:
    curves = read_run(FIXTURE)
    assert curves.label == "smoke_run"
    for _, tag in (*PANELS, *TIME_SPLIT):
        steps, values = curves.series[tag]
        assert steps == [1, 2] and len(values) == 2  # TensorBoard steps 0, 1 shown 1-based
    step_times = curves.series["time/step"][1]
    assert step_times[0] > step_times[1] > 0  # the first step pays the env start-up


def test_plot_writes_the_png_into_the_run_folder(run_dir: Path) -> None:
    result = runner.invoke(app, ["plot", str(run_dir)])
    assert result.exit_code == 0, result.output
    out = run_dir / "curves.png"
    assert result.stdout.strip() == f"curves: {out}"
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert sorted(p.name for p in run_dir.iterdir()) == ["curves.png", "tensorboard"]


def test_plot_overlays_several_runs(run_dir: Path, tmp_path: Path) -> None:
    other = Path(shutil.copytree(run_dir, tmp_path / "other"))
    out = tmp_path / "both.png"
    result = runner.invoke(app, ["plot", str(run_dir), str(other), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda t: t / "missing", "run-not-found"),
        (lambda t: _touch(t / "notes.txt"), "run-not-a-folder"),
        (lambda t: _mkdir(t / "empty"), "plot-not-a-run-folder"),
        (lambda t: _touch(t / "run" / "config.yaml").parent, "plot-no-event-files"),
        (lambda t: _touch(t / "runs" / "a" / "config.yaml").parent.parent, "plot-no-event-files"),
        (lambda t: _touch(t / "run" / "tensorboard" / "events.out.tfevents.1.x").parent.parent,
         "plot-no-scalars"),
    ],
)
def test_bad_input_is_one_error_and_writes_nothing(tmp_path: Path, make, code: str) -> None:  # noqa: ANN001
    target = make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    result = runner.invoke(app, ["plot", str(target)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and f"[{code}]" in result.stderr
    assert "hint: " in result.stderr and "Traceback" not in result.output
    assert sorted(tmp_path.rglob("*")) == before


def test_a_folder_of_run_folders_draws_each(run_dir: Path, tmp_path: Path) -> None:
    runs = _mkdir(tmp_path / "runs")
    for name in ("seed0", "seed1"):
        shutil.copytree(run_dir, runs / name)
    _touch(runs / "started" / "config.yaml")  # a run with nothing logged yet: skipped
    _mkdir(runs / "notes")  # not a run folder: not counted
    result = runner.invoke(app, ["plot", str(runs)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"found 3 run folders under {runs}/",
        f"skipped {runs / 'started'}: no TensorBoard event files in "
        f"{runs / 'started' / 'tensorboard'}",
        f"curves: {runs / 'curves.png'}"]
    assert (runs / "curves.png").read_bytes().startswith(PNG_MAGIC)
    assert not (runs / "seed0" / "curves.png").exists()


def test_a_folder_of_runs_draws_one_curve_per_run(run_dir: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import dexrl.curves as curves

    runs = _mkdir(tmp_path / "runs")
    for name in ("b", "a"):
        shutil.copytree(run_dir, runs / name)
    drawn = []
    monkeypatch.setattr(curves, "draw", lambda got, out: drawn.append(got) or out)
    assert curves.plot_runs([runs]) == runs / "curves.png"
    assert [run.label for run in drawn[0]] == ["a", "b"]  # not one curve labelled "runs"


def test_bad_output_is_refused(run_dir: Path, tmp_path: Path) -> None:
    for out, message in ((tmp_path / "curves.jpg", "must be a .png file"),
                         (tmp_path / "no" / "curves.png", "folder does not exist")):
        result = runner.invoke(app, ["plot", str(run_dir), "--out", str(out)])
        assert result.exit_code == 2 and message in result.stderr
        assert not out.exists()


def test_train_progress_redraws_curves_at_checkpoints(run_dir: Path, tmp_path: Path) -> None:
    buf = io.StringIO()
    printer = ProgressPrinter(Console(file=buf, width=300), run_dir=run_dir)
    printer(SimpleNamespace(kind="checkpoint", step=2, total=2, elapsed_s=1.0, metrics={},
                            checkpoint=run_dir / "checkpoints" / "global_step_2"))
    assert buf.getvalue().splitlines()[-1] == f"  curves {run_dir / 'curves.png'}"
    assert (run_dir / "curves.png").read_bytes().startswith(PNG_MAGIC)

    buf = io.StringIO()
    printer = ProgressPrinter(Console(file=buf, width=300), run_dir=_mkdir(tmp_path / "no_tb"))
    printer.curves()
    printer.curves()  # warned once, then quiet: training goes on
    lines = buf.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("  warning: no learning curves:")


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path
