"""`dexrl export` through the real CLI."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from helpers import cli


@pytest.fixture(scope="module")
def tiny_run_step3(tiny_run_at: Callable[[int], Path]) -> Path:
    """The tiny run at step 3, not the shared step 2: export must name the step it read."""
    return tiny_run_at(3)


run = partial(cli.run, "export")


def test_export_run_folder(tiny_run_step3: Path, tmp_path: Path) -> None:
    result = run(tiny_run_step3, "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert f"Exporting step 3 of {tiny_run_step3}" in result.output
    assert f"Exported 90 tensors (float32) to {tmp_path / 'out'}; value head dropped." in (
        result.output)
    assert "no results.json found" in result.output
    assert json.loads((tmp_path / "out" / "dexrl-export.json").read_text())["source"]["step"] == 3


def test_push_to_hub(tiny_run_step3: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    uploads = []

    class LocalHub:
        def create_repo(self, repo_id: str, **kwargs: object) -> None:
            uploads.append(("create", repo_id, kwargs["private"]))

        def upload_folder(self, *, folder_path: str, repo_id: str, **kwargs: object) -> None:
            uploads.append(("upload", repo_id, sorted(p.name for p in Path(folder_path).iterdir())))
            shutil.copytree(folder_path, tmp_path / "hub")

    monkeypatch.setattr(huggingface_hub, "HfApi", LocalHub)
    result = run(tiny_run_step3 / "checkpoints" / "global_step_3", "--out", tmp_path / "out",
                 "--keep-value-head", "--push-to-hub", "me/pi0-ppo", "--private")
    assert result.exit_code == 0, result.output
    assert "value head kept in value_head.safetensors" in result.output
    assert "Uploaded to " in result.output and result.output.rstrip().endswith("/me/pi0-ppo")
    assert uploads[0] == ("create", "me/pi0-ppo", True)
    assert "value_head.safetensors" in uploads[1][2] and "README.md" in uploads[1][2]


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--push-to-hub", "not a repo id"], "hub-repo-id-invalid"),
     (["--base", "/no/such/base"], "base-no-config")],
)
def test_bad_input_writes_nothing(tiny_run_step3: Path, tmp_path: Path, args: list[str],
                                  code: str) -> None:
    result = run(tiny_run_step3, "--out", tmp_path / "out", *args)
    assert result.exit_code == 2, result.output
    assert f"[{code}]" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_refuses_dexbotic_checkpoints_and_full_folders(tiny_pi0_dir: Path, tiny_run_step3: Path,
                                                       tmp_path: Path) -> None:
    result = run(tiny_pi0_dir, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "[export-already-dexbotic]" in result.output
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    result = run(tiny_run_step3, "--out", tmp_path / "full")
    assert result.exit_code == 2 and "[export-out-not-empty]" in result.output
