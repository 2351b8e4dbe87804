"""The config keys that hold a run folder's paths, and :func:`open_run`, which re-anchors them
when the folder was moved or copied (docs/design/run-folders.md)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from dexrl.runs.opened import Run, find_run_folder, load_run_config, relocate
from dexrl.runs.record import read_manifest

# Path-valued keys that dexrl 0.1 could record relative to the working directory of `train`.
MODEL_PATH_KEYS = ("actor.model.model_path", "rollout.model.model_path")
# Where the folder last ran (RLinf's outputs follow it).
LOG_PATH_KEY = "runner.logger.log_path"


def open_run(path: str | Path) -> Run:
    """Open a run folder from any working directory, also after it was moved or copied.

    The one resolver for commands that read a run (resume, eval, export, plot).

    Raises:
        DexrlError: the path does not exist, is a file, or is not a dexrl run folder.
    """
    run_dir = find_run_folder(path)
    cfg = load_run_config(run_dir)
    manifest = read_manifest(run_dir)
    data = OmegaConf.to_container(cfg, resolve=False)
    # Where the folder last ran (config) and where it was created (manifest).
    recorded = [OmegaConf.select(cfg, LOG_PATH_KEY, default=None,
                                 throw_on_resolution_failure=False), manifest.get("run_dir")]
    data, moved_from = relocate(data, run_dir, [tuple(k.split(".")) for k in MODEL_PATH_KEYS],
                                manifest.get("cwd"), recorded)
    return Run(run_dir, OmegaConf.create(data), manifest, moved_from)
