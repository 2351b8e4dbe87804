"""Check 4: LIBERO import without prompting, its config file, assets, and one env step."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dexrl.doctor.libero import (
    LiberoConfig,
    check_assets,
    check_config,
    check_env_step,
    check_import,
    import_libero,
    read_config,
    step_env,
)
from dexrl.subproc import ProbeError, run_probe


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A fake installed libero/libero folder with every path LIBERO's config names."""
    root = tmp_path / "site-packages" / "libero" / "libero"
    for sub in ("bddl_files", "init_files", "assets/scenes", "assets/textures",
                "assets/stable_scanned_objects", "assets/articulated_objects"):
        (root / sub).mkdir(parents=True)
    return root


def config_for(root: Path, **changes: str) -> dict[str, str]:
    paths = {"benchmark_root": str(root), "bddl_files": f"{root}/./bddl_files",
             "init_states": f"{root}/./init_files", "assets": f"{root}/./assets",
             "datasets": f"{root}/../datasets"}
    paths.update(changes)
    return paths


def test_import_paths() -> None:
    assert check_import({"seconds": 1.2, "config_file": "/x/config.yaml"}, None).status == "ok"
    prompt = check_import(None, "EOFError: EOF when reading a line")
    assert prompt.status == "fail"
    assert "asked for input" in prompt.finding
    broken = check_import(None, "ModuleNotFoundError: No module named 'libero'")
    assert broken.status == "fail"
    assert "rlinf-libero==0.1.3" in broken.fix


@pytest.mark.spawns
def test_a_prompting_import_fails_fast_instead_of_hanging(tmp_path: Path) -> None:
    """stdin is closed for probes: a LIBERO that asks a question gets EOFError at once."""
    (tmp_path / "asks.py").write_text("def ask():\n    input('Where is the dataset? ')\n")
    with pytest.raises(ProbeError) as err:
        run_probe("asks:ask", env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert check_import(None, str(err.value)).status == "fail"
    assert "asked for input" in check_import(None, str(err.value)).finding


def test_config_ok(package: Path) -> None:
    result = check_config(LiberoConfig("/c/config.yaml", config_for(package), None, str(package)))
    assert result.status == "ok"


@pytest.mark.parametrize(("change", "expected"), [
    ({"bddl_files": "/other/venv/site-packages/libero/libero/bddl_files"},
     "outside this environment's LIBERO"),
    ({"init_states": "{root}/./init_files_gone"}, "does not exist"),
])
def test_config_fail(package: Path, change: dict[str, str], expected: str) -> None:
    paths = config_for(package, **{k: v.format(root=package) for k, v in change.items()})
    result = check_config(LiberoConfig("/c/config.yaml", paths, None, str(package)))
    assert result.status == "fail"
    assert expected in result.finding
    assert "LIBERO_CONFIG_PATH" in result.fix


def test_config_missing_key_unreadable_or_no_package(package: Path) -> None:
    paths = config_for(package)
    del paths["assets"]
    assert "no 'assets' entry" in check_config(
        LiberoConfig("/c/config.yaml", paths, None, str(package))).finding
    assert check_config(LiberoConfig("/c/config.yaml", None, "No such file", None)).status == "fail"
    assert check_config(LiberoConfig("/c/config.yaml", config_for(package), None,
                                     None)).status == "fail"


def test_assets_paths(package: Path, tmp_path: Path) -> None:
    ok = check_assets(LiberoConfig("c", config_for(package), None, str(package)))
    assert ok.status == "ok"
    empty = tmp_path / "empty_assets"
    empty.mkdir()
    missing = check_assets(LiberoConfig("c", config_for(package, assets=str(empty)), None,
                                        str(package)))
    assert missing.status == "fail"
    assert "dexrl download --libero-assets" in missing.fix


def test_env_step_paths() -> None:
    assert check_env_step("libero_goal", True, None, None).status == "skip"
    failed = check_env_step("libero_goal", False, None, "RuntimeError: bad bddl")
    assert failed.status == "fail"
    assert "RuntimeError: bad bddl" in failed.finding
    done = check_env_step("libero_goal", False, {
        "task": "open_the_drawer", "create_s": 5.0, "reset_s": 2.0, "steps": 10,
        "steps_per_s": 3.3, "image_shape": [256, 256, 3]}, None)
    assert done.status == "ok"
    assert "10 steps at 3.3/s (camera 256×256×3)" in done.finding


def test_read_config_uses_libero_config_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             ) -> None:
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"assets": "/a", "bddl_files": "/b"}))
    found = read_config()
    assert found.file == str(tmp_path / "config.yaml")
    assert found.paths == {"assets": "/a", "bddl_files": "/b"}
    (tmp_path / "config.yaml").write_text("- a list")
    assert read_config().error == "not a mapping"


@pytest.mark.spawns
def test_real_import_here() -> None:
    result = run_probe(import_libero, timeout=120)
    assert check_import(result, None).status == "ok"
    assert check_config(read_config()).status == "ok"


@pytest.mark.slow
def test_real_env_step_here() -> None:
    """One libero_spatial env created, reset to an init state and stepped (≈25 s on 2 cores)."""
    result = run_probe(step_env, {"suite": "libero_spatial"}, timeout=300)
    row = check_env_step("libero_spatial", False, result, None)
    assert row.status == "ok"
    assert result["image_shape"] == [256, 256, 3]


def test_area_quick_skips_the_env_step(monkeypatch: pytest.MonkeyPatch) -> None:
    from dexrl.doctor import libero
    from dexrl.doctor.context import Budget, Context

    called: list[str] = []

    def fake_call(target: Callable[..., object], timeout: float, **kwargs: object):
        called.append(target.__name__)
        if target.__name__ == "import_libero":
            return {"seconds": 0.5, "config_file": "c"}, None
        return None, "RuntimeError: no GL"

    monkeypatch.setattr(libero, "_call", fake_call)
    quick = {r.id: r.status for r in libero.run(Context(Budget(60), quick=True))}
    assert quick["libero.env"] == "skip" and called == ["import_libero"]
    full = {r.id: r for r in libero.run(Context(Budget(60), suite="libero_goal"))}
    assert called[-1] == "step_env"
    assert full["libero.env"].status == "fail"
    assert "libero_goal" in full["libero.env"].finding
