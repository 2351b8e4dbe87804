"""What a run folder records before a launch: ``config.yaml`` (resolved), ``manifest.json``
(versions, git state, command line, host) and the W&B run id."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dexrl.errors import DexrlError, one_line
from dexrl.runs import durable
from dexrl.runs.layout import CONFIG_FILE, MANIFEST_FILE, WANDB_ID_FILE
from dexrl.versions import installed_versions


def git_state(cwd: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirtiness of the git work tree dexrl runs from, if any."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return None


def resolved(cfg: DictConfig) -> DictConfig:
    """A copy with every interpolation resolved: a run must not change with the environment."""
    try:
        return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:
        raise DexrlError(f"config does not resolve: {one_line(exc, typed=False)}",
                         "fix the interpolation or the override that feeds it",
                         code="config-does-not-resolve") from None


def save_config(run_dir: Path, cfg: DictConfig) -> None:
    """Write ``config.yaml`` (resolved) durably: what RLinf runs with, what resume reads."""
    durable.write_text(Path(run_dir) / CONFIG_FILE, OmegaConf.to_yaml(cfg, resolve=True))


def write_run_files(run_dir: Path, cfg: DictConfig, argv: list[str],
                    extra: dict[str, Any] | None = None) -> None:
    """Write ``config.yaml`` (resolved) and ``manifest.json`` into a new run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    save_config(run_dir, cfg)
    manifest = {
        "schema": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "run_dir": os.path.abspath(run_dir),
        "command": argv,
        "cwd": os.getcwd(),
        "host": socket.gethostname(),
        "python": sys.executable,
        "versions": installed_versions(),
        "git": git_state(),
        **(extra or {}),
    }
    durable.write_json(run_dir / MANIFEST_FILE, manifest)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The run's ``manifest.json`` ({} when missing or unreadable)."""
    try:
        data = json.loads((Path(run_dir) / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def use_wandb_run_id(run_dir: Path) -> str:
    """Give the run one W&B run id, kept in the run folder, so a resume continues that run."""
    path = Path(run_dir) / WANDB_ID_FILE
    if path.is_file():
        run_id = path.read_text().strip()
    else:
        run_id = uuid.uuid4().hex[:12]
        durable.write_text(path, run_id + "\n")
    os.environ["WANDB_RUN_ID"] = run_id
    os.environ.setdefault("WANDB_RESUME", "allow")
    return run_id
