"""Shared fixtures: tiny Dexbotic checkpoints written once per test session."""

from __future__ import annotations

import json
import multiprocessing.process
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# DEXRL_RECORD_SPAWNS=FILE records the offending tests (one JSON line each) instead of failing.
_RECORD = os.environ.get("DEXRL_RECORD_SPAWNS")
_PYTHON_NAMES = ("python", "dexrl", "ray", "raylet", "gcs_server")


def pytest_configure(config: pytest.Config) -> None:
    """Point LIBERO at dexrl's config folder before collection imports it, as dexrl itself does.

    Otherwise a module that imports ``libero.libero`` at collection reads ``~/.libero``, which
    may name a deleted environment.
    """
    from dexrl.hub.libero_assets import use_libero_config_dir

    use_libero_config_dir()


@pytest.fixture(scope="session")
def tiny_pi0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random π0 checkpoint (single file, mlp2x_gelu, fp32). Treat it as read-only."""
    from dexrl.models.pi0.tiny import write_tiny_pi0

    return write_tiny_pi0(tmp_path_factory.mktemp("tiny_pi0") / "ckpt", seed=0)


@pytest.fixture(scope="session")
def tiny_dm0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random DM0 checkpoint. Treat it as read-only."""
    from dexrl.models.dm0.tiny import write_tiny_dm0

    return write_tiny_dm0(tmp_path_factory.mktemp("tiny_dm0") / "ckpt")


@pytest.fixture(scope="module", params=["pi0", "dm0"])
def model(request: pytest.FixtureRequest) -> str:
    """The tiny model a test runs on: a test that asks for it (or for :func:`model_dir`) runs for
    π0 and for DM0. Pin cases with ``@pytest.mark.parametrize("model", [...], indirect=True)``."""
    return request.param


@pytest.fixture(scope="module")
def model_dir(model: str, request: pytest.FixtureRequest) -> Path:
    """The tiny checkpoint of :func:`model`: ``tiny_pi0_dir`` or ``tiny_dm0_dir``."""
    return request.getfixturevalue(f"tiny_{model}_dir")


def _copier(source: Path, tmp_path: Path) -> Callable[[], Path]:
    counter = iter(range(1_000_000))

    def copy() -> Path:
        return Path(shutil.copytree(source, tmp_path / f"ckpt{next(counter)}"))

    return copy


@pytest.fixture
def tiny_pi0_copy(tiny_pi0_dir: Path, tmp_path: Path) -> Callable[[], Path]:
    """Return a function giving a fresh writable copy of the tiny π0 checkpoint."""
    return _copier(tiny_pi0_dir, tmp_path)


@pytest.fixture
def tiny_dm0_copy(tiny_dm0_dir: Path, tmp_path: Path) -> Callable[[], Path]:
    """Return a function giving a fresh writable copy of the tiny DM0 checkpoint."""
    return _copier(tiny_dm0_dir, tmp_path)


@pytest.fixture(scope="session")
def tiny_run_at(tiny_pi0_dir: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Callable[[int], Path]:
    """Return a function giving a tiny RLinf run trained (in appearance) from the tiny π0 up to
    ``step``: RUN_DIR with config.yaml and checkpoints/global_step_<step>. One run per step for
    the whole session: treat it as read-only."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    runs: dict[int, Path] = {}

    def at(step: int) -> Path:
        if step not in runs:
            runs[step] = write_tiny_rlinf_run(tmp_path_factory.mktemp("run") / "run",
                                              tiny_pi0_dir, step=step)
        return runs[step]

    return at


@pytest.fixture(scope="session")
def tiny_run(tiny_run_at: Callable[[int], Path]) -> Path:
    """The tiny RLinf run at step 2 (read-only for tests)."""
    return tiny_run_at(2)


@pytest.fixture(scope="module")
def cued_run(tiny_pi0_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny RLinf run of the cued reach task at step 2, one per test module (eval on
    ``reach_cued`` reads it)."""
    from helpers.rlinf_run import write_tiny_rlinf_run

    return write_tiny_rlinf_run(tmp_path_factory.mktemp("run") / "run", tiny_pi0_dir, step=2,
                                suite="reach_cued")


def _starts_python_or_ray(args: object) -> bool:
    """Whether a Popen command line starts a Python interpreter, dexrl or Ray."""
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args or [])
    first = os.path.basename(os.fsdecode(argv[0])).split()[0] if argv else ""
    return first == os.path.basename(sys.executable) or first.startswith(_PYTHON_NAMES)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A default-suite test that starts a Python process or Ray (its fixtures included) must be
    marked ``slow``, or ``spawns`` when it is one of the documented quick cases
    (docs/development.md)."""
    if item.get_closest_marker("slow") or item.get_closest_marker("spawns"):
        yield
        return

    def refuse(what: str) -> None:
        if _RECORD:
            with open(_RECORD, "a") as out:
                out.write(json.dumps({"test": item.nodeid, "starts": what}) + "\n")
            return
        pytest.fail(f"{item.nodeid} starts {what}: mark it slow, or spawns if it is a quick "
                    "case listed in docs/development.md", pytrace=False)

    popen_init = subprocess.Popen.__init__
    process_start = multiprocessing.process.BaseProcess.start

    def guarded_popen(self: subprocess.Popen, args: object, *rest: object, **kw: object) -> None:
        if _starts_python_or_ray(args):
            shown = args if isinstance(args, str) else " ".join(map(str, args))
            refuse(f"a process ({shown[:80]})")
        popen_init(self, args, *rest, **kw)

    def guarded_start(self: multiprocessing.process.BaseProcess) -> None:
        refuse("a multiprocessing process")
        process_start(self)

    subprocess.Popen.__init__ = guarded_popen  # type: ignore[method-assign]
    multiprocessing.process.BaseProcess.start = guarded_start  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = popen_init  # type: ignore[method-assign]
        multiprocessing.process.BaseProcess.start = process_start  # type: ignore[method-assign]


# LIBERO-like observations and a policy's actions on them (evaluation and checkpoint tests).
@pytest.fixture
def env_obs() -> dict:
    """Two LIBERO-like observations (a batch, as one env step gives them)."""
    import numpy as np

    rng = np.random.default_rng(0)
    return {"main_images": rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8),
            "wrist_images": rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8),
            "states": rng.normal(size=(2, 8)).astype(np.float32),
            "task_descriptions": ["pick up the black bowl", "open the top drawer"]}


@pytest.fixture
def actions(env_obs: dict) -> Callable[[object], Any]:
    """Deterministic actions of a policy on :func:`env_obs` (fixed noise, 3 denoising steps)."""

    import torch

    def act(policy) -> torch.Tensor:  # noqa: ANN001 - a FlowPolicy
        config = policy.network.config
        noise = torch.randn((2, config.chunk_size, config.action_dim),
                            generator=torch.Generator().manual_seed(0))
        return policy.predict(env_obs, noise=noise, num_steps=3)["actions"]

    return act


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working folder and dexrl home: what a command writes by default lands here."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DEXRL_HOME", str(tmp_path / "home"))
    return tmp_path
