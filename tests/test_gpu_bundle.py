"""``bench/gpu_bundle.py`` (what a bare GPU machine needs) and ``bench/random_pi0.py`` (the
real-size random π0 it trains), on what runs here: no download, no GPU."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture()
def bench(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    monkeypatch.setattr(sys, "path", list(sys.path))


def test_the_closure_leaves_out_the_stdlib_the_targets_packages_dexrl_and_exclusions(
        bench: None) -> None:
    import gpu_bundle

    assert {"sympy", "filelock", "torch"} <= gpu_bundle._requires("torch")
    found = gpu_bundle.distributions(
        {"json", "torch", "torch.nn", "sympy", "numpy", "dexrl.cli", "rlinf.runners",
         "omegaconf", "scipy.stats"}, ["scipy"])
    assert set(found) == {"rlinf", "omegaconf"}


def test_compiled_distributions_are_fetched_as_wheels_pure_ones_copied(
        bench: None, tmp_path: Path) -> None:
    import gpu_bundle

    assert gpu_bundle.compiled(md.distribution("pydantic-core"))
    assert not gpu_bundle.compiled(md.distribution("omegaconf"))
    gpu_bundle.copy_pure(md.distribution("omegaconf"), tmp_path)
    assert (tmp_path / "omegaconf" / "__init__.py").is_file()
    assert not list(tmp_path.rglob("*.pyc"))
    assert list(tmp_path.glob("omegaconf-*.dist-info/METADATA"))  # version lookups still work


def test_unpacking_a_wheel_keeps_the_executable_bits(bench: None, tmp_path: Path) -> None:
    import gpu_bundle

    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        daemon = zipfile.ZipInfo("pkg/daemon")
        daemon.external_attr = 0o755 << 16
        zf.writestr(daemon, b"\x7fELF")
        zf.writestr("pkg/__init__.py", "")
    gpu_bundle.unpack_wheel(wheel, tmp_path / "site")
    assert os.access(tmp_path / "site" / "pkg" / "daemon", os.X_OK)
    assert not os.access(tmp_path / "site" / "pkg" / "__init__.py", os.X_OK)


def test_prune_removes_only_subpackages_nothing_imported(bench: None, tmp_path: Path) -> None:
    import gpu_bundle

    for sub in ("used", "unused", "kept"):
        (tmp_path / "ray" / sub).mkdir(parents=True)
        (tmp_path / "ray" / sub / "__init__.py").write_text("")
    (tmp_path / "ray" / "core").mkdir()  # not a package: binaries
    gpu_bundle.prune(tmp_path, "ray", {"ray", "ray.used.deep", "rayx.unused"}, {"kept"})
    assert sorted(p.name for p in (tmp_path / "ray").iterdir()) == ["core", "kept", "used"]


@pytest.mark.spawns
def test_the_hook_records_what_a_process_imported(bench: None, tmp_path: Path) -> None:
    import gpu_bundle

    (tmp_path / "sitecustomize.py").write_text(gpu_bundle.HOOK)
    log = tmp_path / "imports.txt"
    subprocess.run([sys.executable, "-c", "import colorsys"], check=True, env={
        **os.environ, "DEXRL_IMPORT_LOG": str(log), "PYTHONPATH": str(tmp_path)})
    assert "colorsys" in log.read_text().split()


def test_the_real_size_pi0_has_pi0s_parameter_count(bench: None) -> None:
    from pi0_policy import real_pi0_raw

    from dexrl.models.pi0.config import Pi0Config
    from dexrl.models.pi0.network import Pi0Network

    raw = real_pi0_raw()
    assert raw["model_type"] == "dexbotic_pi0" and raw["hidden_size"] == 2048
    with torch.device("meta"):
        network = Pi0Network(Pi0Config.from_dict(raw))
    assert sum(p.numel() for p in network.parameters()) == 3_242_244_880
