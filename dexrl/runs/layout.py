"""Where everything in a run folder lives: its file names and RLinf's checkpoint folders.

A run folder::

    config.yaml                   the resolved config handed to RLinf (written by train/resume)
    manifest.json                 versions, git state, checkpoint provenance, command line, host
    run-state.json                the driver's record (``dexrl.runs.state``)
    wandb_run_id                  the W&B run id a resume continues
    logs/driver.log               RLinf's and the workers' output
    tensorboard/, video/          RLinf's logger and env videos
    checkpoints/global_step_N/    RLinf checkpoints, complete once ``dexrl_complete.json`` is in
    set-aside/<time>/global_step_N/  checkpoints moved out of a resume's way (never deleted)
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from dexrl.errors import DexrlError

RUNS_ROOT = Path("runs")  # where `dexrl train` puts run folders by default
CONFIG_FILE = "config.yaml"
MANIFEST_FILE = "manifest.json"
WANDB_ID_FILE = "wandb_run_id"
LOG_FILE = Path("logs") / "driver.log"
WORKER_LOGS = "worker_logs"  # RLinf's per-worker logs (runner.per_worker_log)
TENSORBOARD = "tensorboard"  # RLinf's TensorBoard events (runner.logger.log_path = RUN_DIR)
CURVES = "curves.png"
SMOKE_CHECKPOINT = "smoke-checkpoint"  # --smoke's tiny random checkpoint
EVALS = "eval"  # `dexrl eval` of the run's checkpoints
CHECKPOINTS = "checkpoints"
STEP_PREFIX = "global_step_"
MARKER = "dexrl_complete.json"  # written last, after RLinf's save returned
SET_ASIDE = "set-aside"  # checkpoint folders moved out of a resume's way
# What RLinf 0.3.0 saves inside a step folder for the actor: the whole training state.
WEIGHTS_IN_STEP = Path("actor") / "model_state_dict" / "full_weights.pt"


def default_run_dir(suite: str, model: str, name: str | None = None,
                    root: Path = RUNS_ROOT) -> Path:
    """``runs/<name>`` or ``runs/<suite>_<model>_<timestamp>``."""
    if name is not None and (not name.strip() or name in (".", "..") or "/" in name
                             or os.sep in name):
        raise DexrlError(f"--name {name!r} is not a folder name",
                         "give a plain name (runs/<name> is created), or a path with --run-dir",
                         where="--name", code="run-name-invalid")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / (name or f"{suite}_{model}_{stamp}")


def check_new_run_dir(path: Path) -> None:
    """Refuse a run directory that already holds something (resume is the way to continue)."""
    if path.exists() and not path.is_dir():
        raise DexrlError("the run directory path is a file", "choose another --run-dir",
                         where=str(path), code="run-folder-is-a-file")
    if path.is_dir() and any(path.iterdir()):
        what = "another run" if (path / CONFIG_FILE).exists() else "files"
        raise DexrlError(f"the run directory already holds {what}",
                         f"continue it with `dexrl resume {path}`, or choose another --run-dir",
                         where=str(path), code="run-folder-not-empty")


def checkpoints_dir(run_dir: Path) -> Path:
    """Where a run's checkpoints live: ``<run_dir>/checkpoints``."""
    return Path(run_dir) / CHECKPOINTS


def set_aside_dir(run_dir: Path) -> Path:
    """A new folder for checkpoints moved out of the way now: ``<run_dir>/set-aside/<time>``."""
    base = Path(run_dir) / SET_ASIDE / time.strftime("%Y%m%d-%H%M%S")
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    return folder


def step_dir(run_dir: Path, step: int) -> Path:
    """The checkpoint folder of global step ``step``: ``<run_dir>/checkpoints/global_step_N``."""
    return checkpoints_dir(run_dir) / f"{STEP_PREFIX}{step}"


def run_of_step(step_folder: Path) -> Path:
    """The run folder a ``<run>/checkpoints/global_step_N`` folder belongs to."""
    return Path(step_folder).parent.parent


def eval_dir(run_dir: Path, step: int, suite: str) -> Path:
    """Where ``dexrl eval`` of global step ``step`` writes: ``eval/global_step_N-<suite>``."""
    return Path(run_dir) / EVALS / f"{STEP_PREFIX}{step}-{suite}"


def rlinf_step_dir(log_path: str, experiment_name: str, step: int) -> Path:
    """Where RLinf 0.3.0 saves global step ``step``: under ``<log_path>/<experiment_name>``
    (dexrl keeps ``experiment_name`` empty, so that is :func:`step_dir` of the run folder)."""
    return Path(os.path.join(log_path, experiment_name, CHECKPOINTS, f"{STEP_PREFIX}{step}"))


def checkpoint_step(checkpoint: Path) -> int | None:
    """N of a ``global_step_N`` folder, else None."""
    name = Path(checkpoint).name
    suffix = name.removeprefix(STEP_PREFIX)
    ascii_digits = suffix.isascii() and suffix.isdigit()  # int() refuses '²', isdigit not
    return int(suffix) if name.startswith(STEP_PREFIX) and ascii_digits else None


def step_of_weights(weights: Path) -> Path | None:
    """``.../global_step_N`` for ``.../global_step_N/actor/model_state_dict/<file>``, else None."""
    folder = weights.parents[2] if len(weights.parents) > 2 else None
    if folder is not None and weights.parent.parent.name == WEIGHTS_IN_STEP.parts[0] \
            and checkpoint_step(folder) is not None:
        return folder
    return None
