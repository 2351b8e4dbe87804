"""Check 7: download's verification on a tiny real-layout checkpoint, and disk for the saves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dexrl.checkpoints.verify import verify_checkpoint
from dexrl.doctor.checkpoint_area import (
    GB,
    Provenance,
    check_disk,
    check_files,
    free_bytes,
    read_provenance,
)
from dexrl.hub.manifest import MANIFEST_NAME, Manifest, write_manifest


def manifest(files: dict[str, int]) -> Manifest:
    return Manifest("Dexmal/libero-db-pi0", "model", "main", "a" * 40,
                        "https://huggingface.co", "2026-01-01T00:00:00+00:00", "dexbotic_pi0",
                        True, ["files"], files)


def test_tiny_checkpoint_verifies(tiny_pi0_dir: Path) -> None:
    row = check_files(verify_checkpoint(tiny_pi0_dir, "dexbotic_pi0"), Provenance(None))
    assert row.status == "ok", row.finding
    assert "dexbotic_pi0" in row.finding and "no download manifest" in row.finding
    assert "tensor names and shapes" in row.finding


def test_broken_checkpoint_fails_with_downloads_hint(tiny_pi0_copy: Callable[[], Path]) -> None:
    path = tiny_pi0_copy()
    (path / "norm_stats.json").unlink()
    verification = verify_checkpoint(path, "dexbotic_pi0")
    row = check_files(verification, Provenance(None))
    assert row.status == "fail"
    assert [f.code for f in verification.findings] == ["norm-stats-missing"]
    assert str(path / "norm_stats.json") in row.finding  # the row shows that finding
    assert "norm_stats.json" in row.fix


def test_wrong_model_type_fails(tiny_pi0_dir: Path) -> None:
    verification = verify_checkpoint(tiny_pi0_dir, "dexbotic_dm0")
    row = check_files(verification, Provenance(None))
    assert row.status == "fail"
    assert [f.code for f in verification.findings] == ["model-type-mismatch"]
    assert row.finding.startswith(f"{tiny_pi0_dir / 'config.json'}: ")


def test_files_changed_since_download(tiny_pi0_copy: Callable[[], Path]) -> None:
    path = tiny_pi0_copy()
    sizes = {p.name: p.stat().st_size for p in path.iterdir() if p.is_file()}
    write_manifest(path, manifest(sizes))
    assert read_provenance(path).changed == ()
    ok_row = check_files(verify_checkpoint(path), read_provenance(path))
    assert ok_row.status == "ok" and "Dexmal/libero-db-pi0@main" in ok_row.finding
    with (path / "config.json").open("a") as handle:
        handle.write(" ")
    row = check_files(verify_checkpoint(path), read_provenance(path))
    assert row.status == "fail"
    assert "config.json" in row.finding
    assert row.fix == "`dexrl download Dexmal/libero-db-pi0 --force`"


def test_unreadable_manifest_warns(tiny_pi0_copy: Callable[[], Path]) -> None:
    path = tiny_pi0_copy()
    (path / MANIFEST_NAME).write_text("{")
    row = check_files(verify_checkpoint(path), read_provenance(path))
    assert row.status == "warn"
    assert "unreadable download manifest" in row.finding


def test_disk() -> None:
    assert check_disk(int(7 * GB), None, Path("/"), int(100 * GB)).status == "skip"
    ok = check_disk(int(7 * GB), 6, Path("/data"), int(100 * GB))
    assert ok.status == "ok"
    assert ok.finding == "6 save(s) × ≈7.0 GB ≈ 42.0 GB; 100.0 GB free at /data"
    assert check_disk(int(7 * GB), 6, Path("/data"), int(50 * GB)).status == "warn"
    full = check_disk(int(7 * GB), 6, Path("/data"), int(40 * GB))
    assert full.status == "fail" and "fill the disk" in full.finding
    assert "runner.save_interval" in full.fix


def test_free_bytes_of_a_folder_not_made_yet(tmp_path: Path) -> None:
    where, free = free_bytes(tmp_path / "runs" / "not" / "yet")
    assert where == tmp_path.resolve()
    assert free > 0
