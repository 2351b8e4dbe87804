"""The config fields that place RLinf's outputs in the run folder: dexrl sets them and refuses a
user's override of them, with the reason."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from dexrl.errors import DexrlError, Finding

# Fields that place what RLinf writes: dexrl sets them so that everything lands in RUN_DIR, and
# refuses a user's override with the reason (RLinf writes checkpoints to
# <log_path>/<experiment_name>/checkpoints; tensorboard and videos follow log_path).
OWNED_KEYS = {
    "runner.logger.log_path": "it is the run folder; choose it with --run-dir (or --name)",
    "runner.logger.experiment_name": "it would move the checkpoints out of RUN_DIR/checkpoints "
                                     "(RLinf writes them to <log_path>/<experiment_name>); name "
                                     "the run with --name",
    "runner.resume_dir": "`dexrl resume RUN_DIR` sets it (--step N picks the checkpoint)",
}


def _override_key(override: str) -> str:
    """The key of ``key=value``, ``+key=value`` or ``~key``."""
    return override.partition("=")[0].lstrip("+~")


def owned_override_findings(overrides: list[str], fix: str = "") -> list[Finding]:
    """An error per user override of a field dexrl owns (:data:`OWNED_KEYS`), with the reason.

    The one check behind ``train`` and ``validate``
    (:func:`dexrl.config.validate.compose_and_check`) and
    ``resume``.
    """
    found = []
    for item in overrides:
        key = _override_key(item)
        if key in OWNED_KEYS:
            found.append(Finding("error", "overrides", f"{key} is set by dexrl: {OWNED_KEYS[key]}",
                                 f"drop the override {item!r}" + (f"; {fix}" if fix else ""),
                                 code="override-owned-key"))
    return found


def without_owned(overrides: list[str]) -> list[str]:
    """``overrides`` less those of owned fields (dexrl sets those fields itself)."""
    return [o for o in overrides if _override_key(o) not in OWNED_KEYS]


def refuse_owned_overrides(overrides: list[str], fix: str) -> None:
    """Raise the first of :func:`owned_override_findings` as a DexrlError."""
    found = owned_override_findings(overrides, fix)
    if found:
        raise DexrlError(found[0].message, found[0].hint, where=found[0].where,
                         code="override-owned-key")


def run_folder_settings(run_dir: Path, resume_from: Path | None = None) -> dict[str, Any]:
    """The owned fields for a run in ``run_dir`` (absolute), continuing from ``resume_from``."""
    return {"runner.logger.log_path": os.path.abspath(run_dir),
            "runner.logger.experiment_name": "",
            "runner.resume_dir": os.path.abspath(resume_from) if resume_from else None}


def set_run_folder(cfg: DictConfig, run_dir: Path,
                   resume_from: Path | None = None) -> dict[str, Any]:
    """Point RLinf's outputs at ``run_dir``, in ``cfg`` itself, before it is resolved.

    Interpolations that follow ``runner.logger.log_path`` (the env video folders) land in the
    run folder too. Returns the fields set, for ``--dry-run`` and ``resume``'s diff.
    """
    settings = run_folder_settings(run_dir, resume_from)
    with open_dict(cfg):
        for key, value in settings.items():
            OmegaConf.update(cfg, key, value, force_add=True)
    return settings


def render_settings(settings: dict[str, Any]) -> list[str]:
    """``key=value`` lines, values as YAML writes them (``null``, ``''``)."""
    return [f"{k}={OmegaConf.to_yaml({'v': v}).strip().removeprefix('v: ')}"
            for k, v in settings.items()]


def check_run_folder(cfg: DictConfig, run_dir: Path, resume_from: Path | None) -> None:
    """Raise RuntimeError when ``cfg`` was not prepared by :func:`set_run_folder` for this run."""
    for key, value in run_folder_settings(run_dir, resume_from).items():
        if OmegaConf.select(cfg, key) != value:
            raise RuntimeError(f"{key} is not {value!r}: call "
                               "dexrl.config.owned_keys.set_run_folder() before launch()")
