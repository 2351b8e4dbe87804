"""The durable writer: whole or absent, no temporary file left by a failure, and the fsyncs in
the order that makes a rename (and a completion marker) survive a power loss."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.modes import UMASKS, expected, modes, new_file_mode, umask

from dexrl.runs import durable
from dexrl.checkpoints.files.steps import is_complete, mark_complete
from dexrl.runs.layout import CONFIG_FILE, MANIFEST_FILE, WANDB_ID_FILE
from dexrl.runs.record import use_wandb_run_id, write_run_files


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_write_replaces_the_whole_file_and_leaves_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text("old")
    assert durable.write_json(path, {"a": 1, "b": Path("/x")}) == path
    assert json.loads(path.read_text()) == {"a": 1, "b": "/x"}
    assert path.read_text().endswith("}\n")
    assert names(tmp_path) == ["results.json"]


@pytest.mark.parametrize("step", ["os.replace", "sync_file"])
def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("old")

    def fail(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(*(("dexrl.runs.durable.os.replace", fail) if step == "os.replace"
                          else ("dexrl.runs.durable.sync_file", fail)))
    with pytest.raises(OSError, match="No space"):
        durable.write_text(path, "new")
    assert path.read_text() == "old" and names(tmp_path) == ["config.yaml"]


def test_a_writer_that_raises_leaves_no_temp(tmp_path: Path) -> None:
    with pytest.raises(ValueError), durable.replacing(tmp_path / "curves.png") as tmp:
        tmp.write_bytes(b"half a png")
        raise ValueError("matplotlib failed")
    assert names(tmp_path) == []


def test_the_temp_file_keeps_the_suffix_and_is_hidden(tmp_path: Path) -> None:
    with durable.replacing(tmp_path / "task00_trial01_failure.mp4") as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".") and tmp.suffix == ".mp4"
        tmp.write_bytes(b"mp4")
    assert names(tmp_path) == ["task00_trial01_failure.mp4"]


def test_a_staged_folder_appears_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "export"
    with pytest.raises(RuntimeError), durable.staged_folder(out) as staging:
        (staging / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("weights do not match")
    assert names(tmp_path) == []

    out.mkdir()
    (out / "old.txt").write_text("earlier export")
    with durable.staged_folder(out) as staging:
        (staging / "sub").mkdir()
        (staging / "sub" / "config.json").write_text("{}")
    assert names(tmp_path) == ["export"] and names(out) == ["sub"]


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """Records ``("fsync", path)`` and ``("rename", target)`` in the order they happen."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        real_replace(src, dst)
        events.append(("rename", str(dst)))

    monkeypatch.setattr("dexrl.runs.durable.os.fsync", fsync)
    monkeypatch.setattr("dexrl.runs.durable.os.replace", replace)
    yield events


def test_a_marker_is_renamed_only_after_its_checkpoint_is_on_disk(
        tmp_path: Path, synced: list[tuple[str, str]]) -> None:
    step = tmp_path / "checkpoints" / "global_step_3"
    weights = step / "actor" / "model_state_dict" / "full_weights.pt"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"weights")
    (step / "actor" / "optim.pt").write_bytes(b"optimizer")
    marker = mark_complete(step, 3)

    renamed = synced.index(("rename", str(marker)))
    before = {path for kind, path in synced[:renamed] if kind == "fsync"}
    assert {str(weights), str(step / "actor" / "optim.pt"), str(weights.parent),
            str(step / "actor"), str(step), str(step.parent)} <= before
    assert any(path.startswith(str(step / ".dexrl_complete.")) for path in before)  # the temp
    assert synced[renamed + 1:] == [("fsync", str(step))]  # the rename itself reaches the disk
    assert is_complete(step)


def test_every_trusted_file_goes_through_the_durable_writer(
        tmp_path: Path, synced: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """config.yaml, manifest.json, the W&B id and run-state.json: fsynced, renamed, folder
    fsynced."""
    from omegaconf import OmegaConf

    from dexrl.runs.state import STATE_FILE, begin

    monkeypatch.delenv("WANDB_RUN_ID", raising=False)  # use_wandb_run_id sets them
    monkeypatch.delenv("WANDB_RESUME", raising=False)

    write_run_files(tmp_path, OmegaConf.create({"a": 1}), ["dexrl", "train"])
    use_wandb_run_id(tmp_path)
    begin(tmp_path, 0)
    for name in (CONFIG_FILE, MANIFEST_FILE, WANDB_ID_FILE, STATE_FILE):
        i = synced.index(("rename", str(tmp_path / name)))
        assert synced[i - 1][0] == "fsync" and synced[i - 1][1].startswith(str(tmp_path / "."))
        assert synced[i + 1] == ("fsync", str(tmp_path))


@pytest.mark.parametrize("mask", UMASKS)
def test_published_files_and_folders_get_the_umask_modes(tmp_path: Path, mask: int) -> None:
    with umask(mask):
        durable.write_json(tmp_path / "results.json", {"a": 1})
        durable.write_text(tmp_path / "config.yaml", "a: 1\n")
        with durable.replacing(tmp_path / "model.safetensors") as tmp:
            os.close(os.open(tmp, os.O_CREAT | os.O_WRONLY, 0o600))  # as safetensors creates it
        with durable.staged_folder(tmp_path / "export") as staging:
            (staging / "sub").mkdir(mode=0o700)
            os.close(os.open(staging / "sub" / "weights.bin", os.O_CREAT | os.O_WRONLY, 0o600))
            (staging / "README.md").write_text("card")
            (staging / "run.sh").write_text("#!/bin/sh\n")
            (staging / "run.sh").chmod(0o700)
        assert durable.umask() == mask  # read without changing it
    got = modes(tmp_path)  # tmp_path itself is pytest's (0700)
    assert got.pop("export/run.sh") == 0o777 & ~mask  # an executable stays executable
    assert got == {k: v for k, v in expected(tmp_path, mask).items()
                   if k not in (".", "export/run.sh")} | {".": got["."]}
    assert got["results.json"] == (0o644 if mask == 0o022 else 0o664)
    assert got["export/sub"] == (0o755 if mask == 0o022 else 0o775)


def test_the_umask_is_read_without_proc_too(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_proc(*_args: object, **_kwargs: object) -> None:
        raise FileNotFoundError("/proc/self/status")

    monkeypatch.setattr(durable, "open", no_proc, raising=False)
    with umask(0o027):
        assert durable.umask() == 0o027
        assert os.umask(0o027) == 0o027  # restored
        assert new_file_mode() == 0o640
