"""Run directories: layout, what is written before a launch, and what resume may change.

Layout of ``RUN_DIR``::

    config.yaml            the resolved config handed to RLinf
    manifest.json          versions, git state, checkpoint provenance, command line, hosts
    logs/                  RLinf's and the workers' logs (``runner.logger.log_path``)
    checkpoints/global_step_N/   RLinf checkpoints; complete once the marker file is present
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from dexrl.config import flatten
from dexrl.errors import DexrlError

CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "manifest.json"
WANDB_ID_FILE = "wandb_run_id"
CHECKPOINTS = "checkpoints"
MARKER = "dexrl_complete.json"  # written last, after RLinf's save returned
VERSIONED = ("dexrl", "rlinf", "torch", "transformers", "mujoco", "ray", "hydra-core", "numpy")

# Keys a resume may change without --allow-changes: they do not change the experiment.
SAFE_RESUME_KEYS = (
    "runner.max_steps",
    "runner.max_epochs",
    "runner.save_interval",
    "runner.val_check_interval",
    "runner.resume_dir",
    "runner.logger.*",
    "env.*.video_cfg.*",
    "cluster.*",
    "actor.enable_offload",
    "rollout.enable_offload",
    "env.enable_offload",
)


def default_run_dir(suite: str, model: str, name: str | None = None, root: str = "runs") -> Path:
    """``runs/<name>`` or ``runs/<suite>_<model>_<timestamp>``."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / (name or f"{suite}_{model}_{stamp}")


def check_new_run_dir(path: Path) -> None:
    """Refuse a run directory that already holds something (resume is the way to continue)."""
    if path.exists() and not path.is_dir():
        raise DexrlError("the run directory path is a file", "choose another --run-dir",
                         where=str(path))
    if path.is_dir() and any(path.iterdir()):
        what = "another run" if (path / CONFIG_FILE).exists() else "files"
        raise DexrlError(f"the run directory already holds {what}",
                         f"continue it with `dexrl resume {path}`, or choose another --run-dir",
                         where=str(path))


def versions() -> dict[str, str | None]:
    """Installed versions of the packages a run depends on."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def git_state(cwd: Path | None = None) -> dict[str, Any] | None:
    """Commit and dirtiness of the git work tree dexrl runs from, if any."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=5, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.SubprocessError):
        return None


def checkpoint_provenance(model_path: str | None) -> dict[str, Any] | None:
    """The ``dexrl download`` manifest of the checkpoint, when there is one."""
    if not model_path:
        return None
    path = Path(model_path) / "dexrl-checkpoint.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"path": str(model_path), "manifest": None}


def resolved(cfg: DictConfig) -> DictConfig:
    """A copy with every interpolation resolved: a run must not change with the environment."""
    try:
        return OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    except Exception as exc:
        raise DexrlError(f"config does not resolve: {' '.join(str(exc).split())}",
                         "fix the interpolation or the override that feeds it") from None


def write_run_files(run_dir: Path, cfg: DictConfig, argv: list[str],
                    extra: dict[str, Any] | None = None) -> None:
    """Write ``config.yaml`` (resolved) and ``manifest.json`` into a new run directory."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(OmegaConf.to_yaml(cfg, resolve=True))
    manifest = {
        "schema": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": argv,
        "cwd": os.getcwd(),
        "host": socket.gethostname(),
        "python": sys.executable,
        "versions": versions(),
        "git": git_state(),
        "checkpoint": checkpoint_provenance(OmegaConf.select(cfg, "actor.model.model_path")),
        **(extra or {}),
    }
    (run_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, default=str) + "\n")


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
        path.write_text(run_id + "\n")
    os.environ["WANDB_RUN_ID"] = run_id
    os.environ.setdefault("WANDB_RESUME", "allow")
    return run_id


def load_run_config(run_dir: Path) -> DictConfig:
    """The saved config of a run; DexrlError when the folder is not a dexrl run."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise DexrlError("not a dexrl run directory (no config.yaml)",
                         "pass the folder `dexrl train` created (e.g. runs/<name>)",
                         where=str(run_dir))
    try:
        cfg = OmegaConf.load(path)
    except Exception as exc:
        raise DexrlError(f"unreadable config.yaml ({' '.join(str(exc).split())})",
                         "restore the file from a backup", where=str(path)) from None
    if not isinstance(cfg, DictConfig):
        raise DexrlError("config.yaml is not a mapping", "restore the file", where=str(path))
    return cfg


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint folder of a run."""

    step: int
    path: Path
    complete: bool


def checkpoints_dir(run_dir: Path) -> Path:
    """Where a run's checkpoints live: ``<run_dir>/checkpoints``."""
    return Path(run_dir) / CHECKPOINTS


def is_complete(checkpoint: Path) -> bool:
    """Whether ``checkpoint`` (``.../global_step_N``) was fully written."""
    return (Path(checkpoint) / MARKER).is_file()


def checkpoint_step(checkpoint: Path) -> int | None:
    """N of a ``global_step_N`` folder, else None."""
    suffix = Path(checkpoint).name.removeprefix("global_step_")
    return int(suffix) if Path(checkpoint).name.startswith("global_step_") and suffix.isdigit() \
        else None


def checkpoints(run_dir: Path) -> list[Checkpoint]:
    """Every ``global_step_N`` folder of a run, by step."""
    root = checkpoints_dir(run_dir)
    found = []
    for p in root.glob("global_step_*") if root.is_dir() else []:
        step = checkpoint_step(p)
        if p.is_dir() and step is not None:
            found.append(Checkpoint(step, p, is_complete(p)))
    return sorted(found, key=lambda c: c.step)


def pick_checkpoint(run_dir: Path, step: int | None = None) -> Checkpoint:
    """The latest complete checkpoint, or the one at ``step``; DexrlError otherwise."""
    all_ckpts = checkpoints(run_dir)
    complete = [c for c in all_ckpts if c.complete]
    if step is not None:
        match = [c for c in all_ckpts if c.step == step]
        if not match:
            have = ", ".join(str(c.step) for c in complete) or "none"
            raise DexrlError(f"no checkpoint at step {step}",
                             f"complete checkpoints: {have}", where=str(run_dir))
        if not match[0].complete:
            raise DexrlError(f"the checkpoint at step {step} is incomplete (interrupted save)",
                             "resume from an earlier step or omit --step", where=str(match[0].path))
        return match[0]
    if not complete:
        partial = f" ({len(all_ckpts)} incomplete)" if all_ckpts else ""
        raise DexrlError(f"no complete checkpoint to resume from{partial}",
                         "train first; a checkpoint is written every runner.save_interval steps "
                         "and counts only once it finished writing",
                         where=str(checkpoints_dir(run_dir)))
    return complete[-1]


def latest_checkpoint(run_dir: Path) -> Path:
    """The complete checkpoint with the highest step (incomplete ones are skipped)."""
    return pick_checkpoint(run_dir).path


def planned_steps(cfg: DictConfig) -> int:
    """The step a run stops at: RLinf caps runner.max_steps by runner.max_epochs (1 step each)."""
    epochs = int(OmegaConf.select(cfg, "runner.max_epochs", default=1))
    max_steps = int(OmegaConf.select(cfg, "runner.max_steps", default=-1))
    return min(epochs, max_steps) if max_steps >= 0 else epochs


def config_diff(old: DictConfig, new: DictConfig) -> list[tuple[str, Any, Any]]:
    """(key, old, new) for every leaf that differs between two resolved configs."""
    a = flatten(OmegaConf.to_container(old, resolve=True))
    b = flatten(OmegaConf.to_container(new, resolve=True))
    missing = object()
    return [(k, a.get(k, missing), b.get(k, missing)) for k in sorted(a.keys() | b.keys())
            if a.get(k, missing) != b.get(k, missing)]


def unsafe_changes(diff: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The changes that alter the experiment (anything outside SAFE_RESUME_KEYS)."""
    return [d for d in diff if not any(fnmatch.fnmatchcase(d[0], pat) for pat in SAFE_RESUME_KEYS)]
