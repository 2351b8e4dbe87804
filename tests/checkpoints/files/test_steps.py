"""Completion markers: what mark_complete writes, and which markers vouch for their step."""

from __future__ import annotations

import json
from pathlib import Path

from dexrl.checkpoints.files.proof import HASH
from dexrl.checkpoints.files.steps import (
    checkpoint_at,
    last_complete,
    list_checkpoints,
    mark_complete,
)
from dexrl.runs.layout import MARKER, step_dir


def _saved(run: Path, step: int) -> Path:
    folder = step_dir(run, step)
    (folder / "actor").mkdir(parents=True)
    (folder / "actor" / "full_weights.pt").write_bytes(bytes(range(256)) * 4)
    return folder


def test_the_marker_lists_every_file_of_the_step(tmp_path: Path) -> None:
    folder = _saved(tmp_path, 2)
    mark_complete(folder, 2)
    data = json.loads((folder / MARKER).read_text())
    assert data["step"] == 2 and data["hash"] == HASH
    assert set(data["files"]) == {"actor/full_weights.pt"}
    assert data["files"]["actor/full_weights.pt"]["size"] == 1024
    [c] = list_checkpoints(tmp_path)
    assert c.complete and c.files == data["files"]


def test_a_marker_written_before_file_lists_still_vouches_without_one(tmp_path: Path) -> None:
    folder = _saved(tmp_path, 2)
    (folder / MARKER).write_text('{"step": 2, "written": "2026-11-20T10:00:00"}')
    c = checkpoint_at(folder)
    assert c.complete and c.files is None
    assert last_complete(tmp_path) == c
    # the control: the same marker with a broken file list does not vouch
    (folder / MARKER).write_text('{"step": 2, "written": "x", "hash": "xxh3_64", "files": 3}')
    assert not checkpoint_at(folder).complete
