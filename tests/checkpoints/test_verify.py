"""The checkpoint-folder check names what is wrong with the path itself."""

from __future__ import annotations

from pathlib import Path

from dexrl.checkpoints.verify import check_checkpoint_dir


def test_a_file_is_not_called_missing(tmp_path: Path) -> None:
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    [finding] = check_checkpoint_dir(weights)
    assert (finding.level, finding.code) == ("error", "checkpoint-not-a-folder")
    assert "config.json" in finding.hint


def test_a_missing_folder_is_called_missing(tmp_path: Path) -> None:
    [finding] = check_checkpoint_dir(tmp_path / "nowhere")
    assert (finding.level, finding.code) == ("error", "checkpoint-not-found")
