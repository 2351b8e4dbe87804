"""The config keys that hold a run folder's paths, and :func:`open_run`, which re-anchors them
when the folder was moved or copied (docs/design/run-folders.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from dexrl.errors import DexrlError, one_line
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


def point_at_checkpoint(cfg: Any, path: Path) -> None:
    """Train ``cfg`` from the checkpoint folder ``path`` (the rollout's model path follows the
    actor's in the shipped configs)."""
    OmegaConf.update(cfg, MODEL_PATH_KEYS[0], str(path))


def recorded_model_path(cfg: Any, run_dir: Path) -> str:
    """The checkpoint a run started from, as its config.yaml records it.

    Raises:
        DexrlError: the path is an interpolation that does not resolve, or is not recorded.
    """
    try:
        value = OmegaConf.select(cfg, MODEL_PATH_KEYS[0])
    except Exception as exc:  # an interpolation that does not resolve here
        raise DexrlError(f"actor.model.model_path does not resolve ({one_line(exc, typed=False)})",
                         "pass the checkpoint the run started from with --base",
                         where=f"{run_dir}/config.yaml", code="base-path-unresolvable") from None
    if not value:
        raise DexrlError("the run config has no actor.model.model_path",
                         "pass the checkpoint the run started from with --base",
                         where=f"{run_dir}/config.yaml", code="base-not-in-config")
    return str(value)


def training_facts(cfg: Any) -> dict[str, Any]:
    """What a run's config says its checkpoints were trained with (suite or task, chunk and step
    counts, LIBERO's camera ``init_params``, a dexrl task's own section); None where unknown."""
    def get(key: str) -> Any:
        try:
            return OmegaConf.select(cfg, key)
        except Exception:  # unresolvable interpolation: treat as unknown
            return None

    init_params = get("env.eval.init_params") or get("env.train.init_params")
    chunks, steps = get("actor.model.num_action_chunks"), get("actor.model.num_steps")
    task = get("env.train.dexrl_env")
    section = get(f"env.train.{task}") if task else None
    return {
        "suite": get("env.train.task_suite_name") or task,
        "num_action_chunks": int(chunks) if chunks is not None else None,
        "num_steps": int(steps) if steps is not None else None,
        "init_params": OmegaConf.to_container(init_params) if init_params is not None else None,
        "task": OmegaConf.to_container(section, resolve=True) if section is not None else None,
    }
