"""The marker's file list: sizes and xxh3_64 checksums recorded, then checked."""

from __future__ import annotations

from pathlib import Path

import xxhash

from dexrl.checkpoints.files.proof import (
    HASH,
    checksum,
    files_problem,
    find_damage,
    inventory,
    step_files,
)
from dexrl.runs.layout import MARKER


def _step(tmp_path: Path) -> Path:
    step = tmp_path / "global_step_2"
    (step / "actor" / "model_state_dict").mkdir(parents=True)
    (step / "actor" / "model_state_dict" / "full_weights.pt").write_bytes(b"w" * 5000)
    (step / "actor" / "optim.pt").write_bytes(b"o" * 300)
    (step / MARKER).write_text("{}")
    return step


def test_every_file_but_the_marker_is_listed_with_its_size_and_checksum(tmp_path: Path) -> None:
    step = _step(tmp_path)
    assert step_files(step) == ["actor/model_state_dict/full_weights.pt", "actor/optim.pt"]
    files = inventory(step)
    assert files["actor/optim.pt"] == {"size": 300, HASH: xxhash.xxh3_64(b"o" * 300).hexdigest()}
    assert checksum(step / "actor/optim.pt") == xxhash.xxh3_64_hexdigest(b"o" * 300)
    assert files_problem(files) is None
    assert find_damage(step, files, checksums=True) is None


def test_a_missing_file_a_short_file_and_a_flipped_byte_are_each_named(tmp_path: Path) -> None:
    step = _step(tmp_path)
    files = inventory(step)
    weights = step / "actor/model_state_dict/full_weights.pt"
    weights.write_bytes(b"w" * 4999 + b"x")  # same size, one byte changed
    assert find_damage(step, files, checksums=False) is None  # sizes cannot see it
    flipped = find_damage(step, files, checksums=True)
    assert flipped is not None and flipped.file == "actor/model_state_dict/full_weights.pt"
    assert flipped.problem.startswith(f"has {HASH} ")
    weights.write_bytes(b"w" * 10)
    short = find_damage(step, files, checksums=False)
    assert short is not None and short.problem == "is 10 bytes; the marker recorded 5000"
    weights.unlink()
    assert find_damage(step, files, checksums=False).problem == "is missing"


def test_a_malformed_file_list_is_named() -> None:
    assert files_problem([]) == "its file list is not an object"
    assert "lacks a size" in files_problem({"a.pt": {"size": -1, HASH: "0"}})
    assert "lacks a size" in files_problem({"a.pt": {"size": 1}})
    assert "lacks a size" in files_problem({"../a.pt": {"size": 1, HASH: "0"}})
    assert files_problem({}) is None  # a step whose actor saved nothing
