"""A full disk is one clear line in every verb but training: ``error: the disk is full: cannot
write to FOLDER ... [disk-full]`` + ``hint:``, exit 2, no traceback, nothing half-written left.

Each test makes one verb's own write fail as a full disk does (ENOSPC, with the error type and
file name the real writer gives), through the real CLI in-process; Ctrl-C is here too (exit 130).
"""

from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import typer
from typer.testing import CliRunner

import dexrl.commands.configs
from dexrl.cli import app

runner = CliRunner()
NO_SPACE = "No space left on device"
PLOT_FIXTURE = Path(__file__).parent.parent / "fixtures" / "smoke_run"


def enospc(filename: object = None) -> OSError:
    """What a write on a full disk raises (a write or flush names no file; an open does)."""
    if filename is None:
        return OSError(errno.ENOSPC, NO_SPACE)
    return OSError(errno.ENOSPC, NO_SPACE, str(filename))


def assert_disk_full(result, folder: Path | str, *fragments: str) -> str:  # noqa: ANN001
    """Exit 2, exactly one ``error:`` line (``[disk-full]``, naming ``folder``), one ``hint:``
    line, no traceback; returns the error line."""
    assert result.exit_code == 2, (result.output, result.exception)
    lines = result.stderr.splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith(f"error: the disk is full: cannot write to {folder}")
    assert errors[0].endswith("[disk-full]"), errors[0]
    assert sum(line.startswith("hint:") for line in lines) == 1, result.stderr
    assert "Traceback" not in result.output and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    return errors[0]


def leftovers(folder: Path) -> list[str]:
    """Hidden temporary files and folders below ``folder`` (durable's ``.NAME.xxxx.tmp``/
    ``.partial``/``.old``, a video's ``.part.mp4``, the hub's ``*.incomplete``)."""
    marks = (".tmp", ".partial", ".old", ".part.mp4", ".incomplete")
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if any(mark in p.name for mark in marks))


# --- any verb: the CLI group ------------------------------------------------------------------

def fail_configs(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    """Make `dexrl configs` raise ``exc`` where it reads its rows."""
    def rows() -> list:
        raise exc

    monkeypatch.setattr(dexrl.commands.configs, "rows", rows)


def test_any_verb_disk_full_is_one_error_line(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fail_configs(monkeypatch, enospc(tmp_path / "cache" / "configs.json"))
    result = runner.invoke(app, ["configs"])
    assert_disk_full(result, tmp_path / "cache")
    assert result.stdout == ""


def test_any_verb_disk_full_under_json_is_an_error_document(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fail_configs(monkeypatch, enospc(tmp_path / "configs.json"))
    result = runner.invoke(app, ["configs", "--json"])
    line = assert_disk_full(result, tmp_path)
    doc = json.loads(result.stdout)
    assert (doc["schema"], doc["code"]) == ("dexrl.error/1", "disk-full")
    assert doc["message"] == f"the disk is full: cannot write to {tmp_path}"
    assert doc["hint"] and f"{doc['message']} [disk-full]" in line


def test_disk_full_without_a_file_name_names_the_working_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed write (not an open) names no file: the folder is the current one. A quota
    (EDQUOT) counts, and so does an error raised while handling a full disk."""
    monkeypatch.chdir(tmp_path)
    try:
        raise OSError(errno.EDQUOT, "Disk quota exceeded")
    except OSError as full:
        wrapped = RuntimeError("could not finish")
        wrapped.__context__ = full
    fail_configs(monkeypatch, wrapped)
    assert_disk_full(runner.invoke(app, ["configs"]), tmp_path)


def test_other_os_errors_and_a_verbs_own_exit_are_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control: only a full disk is turned into `disk-full`."""
    fail_configs(monkeypatch, PermissionError(errno.EACCES, "Permission denied", str(tmp_path)))
    result = runner.invoke(app, ["configs"])
    assert isinstance(result.exception, PermissionError) and "[disk-full]" not in result.output
    try:
        raise enospc(tmp_path / "x")
    except OSError:
        try:
            raise typer.Exit(3)  # a verb that said why itself, while handling a full disk
        except typer.Exit as stop:
            own_exit = stop
    fail_configs(monkeypatch, own_exit)
    result = runner.invoke(app, ["configs"])
    assert result.exit_code == 3 and "error:" not in result.output


def test_ctrl_c_in_a_verb_is_one_line_and_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    fail_configs(monkeypatch, KeyboardInterrupt())
    result = runner.invoke(app, ["configs", "--json"])
    assert result.exit_code == 130, (result.output, result.exception)
    assert result.stderr == "interrupted\n" and result.stdout == ""
    assert "Aborted" not in result.output and "Traceback" not in result.output


# --- dexrl plot ---------------------------------------------------------------------------------

@pytest.fixture
def full_savefig(monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib writes part of the PNG, then the disk is full."""
    import matplotlib.figure

    def savefig(self, fname, **kwargs) -> None:  # noqa: ANN001, ANN003
        Path(fname).write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
        raise enospc()

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)


def test_plot_disk_full_leaves_no_png(tmp_path: Path, full_savefig: None) -> None:
    run_dir = Path(shutil.copytree(PLOT_FIXTURE, tmp_path / "run"))
    result = runner.invoke(app, ["plot", str(run_dir)])
    assert_disk_full(result, run_dir, "--out")
    assert sorted(p.name for p in run_dir.iterdir()) == ["tensorboard"]  # no PNG, no .tmp


def test_plot_disk_full_keeps_an_earlier_png(tmp_path: Path, full_savefig: None) -> None:
    out = tmp_path / "plots" / "curves.png"
    out.parent.mkdir()
    out.write_bytes(b"earlier")
    result = runner.invoke(app, ["plot", str(PLOT_FIXTURE), "--out", str(out)])
    assert_disk_full(result, out.parent)
    assert out.read_bytes() == b"earlier" and leftovers(tmp_path) == []


# --- dexrl export -------------------------------------------------------------------------------

def full_safetensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """safetensors writes part of the file, then reports the full disk as it does: a
    SafetensorError carrying Rust's "(os error 28)", not an OSError."""
    from safetensors import SafetensorError

    import dexrl.checkpoints.export as export

    def save_file(tensors: dict, filename: str, metadata: dict | None = None) -> None:
        Path(filename).write_bytes(b"\0" * 64)
        raise SafetensorError("Error while serializing: I/O error: No space left on device "
                              "(os error 28)")

    monkeypatch.setattr(export, "save_file", save_file)


def full_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Copying the base checkpoint's tokenizer files hits the full disk (shutil.copytree
    collects each file's error as text in a shutil.Error)."""
    copyfile = shutil.copyfile

    def failing(src, dst, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if Path(dst).name.endswith(".json") and ".partial" in str(dst):
            Path(dst).write_bytes(b"{")
            raise enospc(dst)
        return copyfile(src, dst, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", failing)


@pytest.mark.parametrize("inject", [full_safetensors, full_copy])
def test_export_disk_full_leaves_nothing(tiny_run: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch,
                                         inject: Callable[[pytest.MonkeyPatch], None]) -> None:
    out = tmp_path / "exports" / "step2"
    inject(monkeypatch)
    result = runner.invoke(app, ["export", str(tiny_run), "--out", str(out)])
    assert_disk_full(result, out.resolve(), "nothing of this export was kept", "--out")
    assert not out.exists() and leftovers(tmp_path) == []
    assert list((tmp_path / "exports").iterdir()) == []


def test_export_disk_full_keeps_the_earlier_export(tiny_run: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "step2"
    first = runner.invoke(app, ["export", str(tiny_run), "--out", str(out)])  # control
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    full_safetensors(monkeypatch)
    result = runner.invoke(app, ["export", str(tiny_run), "--out", str(out), "--overwrite"])
    assert_disk_full(result, out.resolve())
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step2"]


# --- dexrl eval ---------------------------------------------------------------------------------


def evaluate(run_dir: Path, out: Path):  # noqa: ANN201
    return runner.invoke(app, ["eval", "--ckpt", str(run_dir), "--suite", "reach_cued",
                               "--tasks", "0", "--episodes-per-task", "1", "--num-envs", "1",
                               "--out", str(out)], env={"COLUMNS": "200"})


def test_eval_disk_full_at_results_keeps_no_part_of_them(cued_run: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """results.json is written last, durably: its fsync reports the full disk (as delayed
    allocation does), its temporary file goes, the finished episodes stay in progress.jsonl."""
    from dexrl.runs import durable

    def sync_file(path: Path) -> None:
        raise enospc()

    monkeypatch.setattr(durable, "sync_file", sync_file)
    out = tmp_path / "out"
    result = evaluate(cued_run, out)
    assert_disk_full(result, out, f"the episodes finished so far are in {out}/progress.jsonl",
                     "--overwrite", "--out")
    assert not (out / "results.json").exists() and leftovers(out) == []
    lines = (out / "progress.jsonl").read_text().splitlines()
    assert len(lines) == 2 and "header" in json.loads(lines[0])  # whole lines only


def test_eval_disk_full_before_any_episode(cued_run: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The progress file cannot be created: the error names its folder; no --overwrite."""
    from dexrl.evaluation import results

    def progress_log(path: Path, header: dict) -> None:
        raise enospc(path)

    monkeypatch.setattr(results, "ProgressLog", progress_log)
    out = tmp_path / "out"
    result = evaluate(cued_run, out)
    assert_disk_full(result, out, "--out")
    assert "--overwrite" not in result.stderr and "progress.jsonl" not in result.stderr
    assert leftovers(tmp_path) == []


def test_a_video_that_fills_the_disk_is_removed(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """ffmpeg writes the video: a full disk reaches dexrl as a broken pipe (no errno). With no
    space left in the folder it is the full disk, and no part of the video stays; the videos of
    episodes still running go when the evaluation is aborted."""
    import imageio.v2 as imageio
    import numpy as np

    from dexrl.evaluation import videos
    from dexrl.vec_env import Episode

    class Writer:  # stands in for imageio's ffmpeg writer
        def __init__(self, path: str, **kwargs: object) -> None:
            self.path = Path(path)
            self.path.write_bytes(b"\0" * 32)

        def append_data(self, frame: np.ndarray) -> None:
            raise OSError("[Errno 32] Broken pipe\n\nFFMPEG COMMAND: ...")

        def close(self) -> None:
            pass

    monkeypatch.setattr(imageio, "get_writer", Writer)
    recorder = videos.VideoRecorder(tmp_path, "all")
    episode, other = Episode(0, 0, 1, 2), Episode(0, 1, 3, 4)
    video, running = recorder.start(episode), recorder.start(other)
    frame = np.zeros((8, 8, 3), dtype=np.uint8)
    free = {"bytes": 10 << 20}
    monkeypatch.setattr(videos.shutil, "disk_usage",
                        lambda path: SimpleNamespace(total=1 << 30, used=0, free=free["bytes"]))
    with pytest.raises(OSError) as caught:  # control: space left, so not a full disk
        video.add(frame, frame)
    assert caught.value.errno is None
    video = recorder.start(episode)
    free["bytes"] = 4096
    with pytest.raises(OSError) as caught:
        video.add(frame, frame)
    assert caught.value.errno == errno.ENOSPC
    assert Path(caught.value.filename).parent == tmp_path / "videos"
    assert [p.name for p in (tmp_path / "videos").iterdir()] == [
        ".task00_trial01.part.mp4"]  # the other episode's video, still recording
    recorder.discard_unfinished()
    assert list((tmp_path / "videos").iterdir()) == [] and running is not None


# --- dexrl download -----------------------------------------------------------------------------

PI0 = "Dexmal/libero-db-pi0"


@pytest.fixture
def hub(tiny_pi0_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The stand-in hub (tests/helpers/hub_server.py) serving the tiny π0 at two commits."""
    from helpers.hub_server import FakeRepo, HubServer, commit_sha, use_hub

    files = {p.relative_to(tiny_pi0_dir).as_posix(): p.read_bytes()
             for p in tiny_pi0_dir.rglob("*") if p.is_file()}
    main, v1 = commit_sha("main"), commit_sha("v1.0")
    older = {**files, "norm_stats.json": files["norm_stats.json"] + b" "}
    with HubServer(lifetime=60) as server:
        server.add(FakeRepo(PI0, {main: files, v1: older}, {"main": main, "v1.0": v1}))
        use_hub(server, monkeypatch, tmp_path / "dexrl-home")
        yield server


def full_weights(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """The weights' download writes some bytes, then hits the full disk (``error``: what the
    standard downloader raises, or what hf_xet raises for a Xet-stored file)."""
    import huggingface_hub.file_download as file_download

    http_get = file_download.http_get

    def failing(url: str, temp_file, **kwargs) -> None:  # noqa: ANN001, ANN003
        if url.endswith("/model.safetensors"):
            temp_file.write(b"\0" * 1000)
            temp_file.flush()
            raise error
        http_get(url, temp_file, **kwargs)

    monkeypatch.setattr(file_download, "http_get", failing)


XET_FULL = RuntimeError("Data processing error: I/O error: No space left on device "
                        "(os error 28)")


@pytest.mark.parametrize("error", [enospc(), XET_FULL], ids=["oserror", "hf_xet"])
def test_download_disk_full_keeps_nothing_of_a_first_download(
        hub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    dest = tmp_path / "ckpts" / "pi0"
    full_weights(monkeypatch, error)
    result = runner.invoke(app, ["download", PI0, "--local-dir", str(dest)])
    assert_disk_full(result, dest, "nothing of the download was kept", "HF_HOME",
                     "--local-dir")
    assert not dest.exists()


def test_download_disk_full_under_json(hub, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.hub.home import checkpoint_dir

    full_weights(monkeypatch, enospc())
    result = runner.invoke(app, ["download", PI0, "--json"])
    dest = checkpoint_dir(PI0).absolute()
    assert_disk_full(result, dest)
    doc = json.loads(result.stdout)
    assert (doc["schema"], doc["code"]) == ("dexrl.error/1", "disk-full")
    assert "HF_HOME" in doc["hint"] and not dest.exists()


def test_download_disk_full_over_an_earlier_download(hub, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Switching an earlier download to another revision: its unfinished file goes, the
    finished ones stay (unverified) for the next try, which then completes."""
    dest = tmp_path / "pi0"
    first = runner.invoke(app, ["download", PI0, "--local-dir", str(dest)])  # control
    assert first.exit_code == 0, first.output
    with monkeypatch.context() as patch:
        full_weights(patch, enospc())
        result = runner.invoke(app, ["download", PI0, "--revision", "v1.0", "--local-dir",
                                     str(dest), "--force"])
    assert_disk_full(result, dest, "its unfinished files were removed")
    assert leftovers(dest) == [] and not (dest / "dexrl-checkpoint.json").exists()
    assert (dest / "config.json").is_file()
    again = runner.invoke(app, ["download", PI0, "--revision", "v1.0", "--local-dir", str(dest)])
    assert again.exit_code == 0, again.output
    assert (dest / "dexrl-checkpoint.json").is_file()
