"""Shared fixtures: tiny Dexbotic checkpoints written once per test session."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Point LIBERO at dexrl's config folder before collection imports it, as dexrl itself does.

    Otherwise a module that imports ``libero.libero`` at collection reads ``~/.libero``, which
    may name a deleted environment.
    """
    from dexrl.libero_assets import use_libero_config_dir

    use_libero_config_dir()


@pytest.fixture(scope="session")
def tiny_pi0_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random π0 checkpoint (single file, mlp2x_gelu, fp32). Treat it as read-only."""
    from dexrl.testing.tiny_pi0 import write_tiny_pi0

    return write_tiny_pi0(tmp_path_factory.mktemp("tiny_pi0") / "ckpt", seed=0)


@pytest.fixture
def tiny_pi0_copy(tiny_pi0_dir: Path, tmp_path: Path) -> Callable[[], Path]:
    """Return a function giving a fresh writable copy of the tiny π0 checkpoint."""
    counter = iter(range(1_000_000))

    def copy() -> Path:
        return Path(shutil.copytree(tiny_pi0_dir, tmp_path / f"ckpt{next(counter)}"))

    return copy
